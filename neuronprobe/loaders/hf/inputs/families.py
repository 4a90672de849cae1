"""The family recipes, in order."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from neuronprobe.loaders.hf.inputs.audio import AUDIO_RECIPES
from neuronprobe.loaders.hf.inputs.grids import GRID_RECIPES
from neuronprobe.loaders.hf.inputs.image_text import IMAGE_TEXT_RECIPES
from neuronprobe.loaders.hf.inputs.other import OTHER_RECIPES
from neuronprobe.loaders.hf.inputs.segmentation import SAM_RECIPES

Recipe = Callable[[Any, Any, Any, int, int, str, dict[str, Any], Any], "dict[str, Any] | None"]
RECIPES: tuple[Recipe, ...] = (*SAM_RECIPES, *GRID_RECIPES, *AUDIO_RECIPES, *IMAGE_TEXT_RECIPES, *OTHER_RECIPES)


def family_inputs(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any]:
    """The inputs every recipe that knows this model's family sets (later recipes win on a clash)."""
    made: dict[str, Any] = {}
    for recipe in RECIPES:
        found = recipe(inner, config, params, batch, seq, device, {**inputs, **made}, plan)
        if found:
            made.update(found)
    return made
