"""Warm torch.export once in the test process, so that every forked analysis worker inherits it.

A CLI run forks its worker from a process that has not imported torch; tests run
it from pytest, where each worker would otherwise pay torch.export's first-call
set-up (a few seconds) again.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module", autouse=True)
def warm_export() -> None:
    import torch

    torch.export.export(torch.nn.Linear(2, 2), (torch.randn(1, 2),), strict=False)
