"""Zoo tier, part 2 of 4 (see tests/zoo_tier.py; regenerate the tier with `scripts/zoo.py --tier`)."""

from __future__ import annotations

from typing import Any

import pytest
from zoo_tier import check_type, part


@pytest.mark.parametrize("entry", part(2), ids=lambda e: e["model_type"])
def test_zoo_tier_type_captures_with_its_recipes_and_repairs(entry: dict[str, Any]) -> None:
    check_type(entry)
