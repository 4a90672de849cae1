"""Family recipes: inputs a whole model family's forward takes that no config field names.

Most ``hf:`` inputs come from the config and the forward's signature (:func:`hf.make_inputs`),
and the repairs (:data:`hf.REPAIRS`) fix what the forward's own errors point at. Some families
need inputs that agree with each other in ways neither sees: SAM's prompts next to its image
embeddings, patch grids next to flattened patches, audio features next to their masks and
lengths. A recipe knows one such family, recognises it by its forward's parameters (or its
config class, when the parameters are shared with other families) and returns the inputs to
add or replace. Each recipe's docstring names the transformers source that taught it.

A recipe is ``(inner, config, params, batch, seq, device, inputs, plan) -> dict | None``:
``params`` is the entry point's signature parameters, ``inputs`` what was made so far; it
returns the inputs to set, or None when the model is not of its family.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Recipe = Callable[[Any, Any, Any, int, int, str, dict[str, Any], Any], "dict[str, Any] | None"]


# --- segment anything (SAM, SAM2, EdgeTAM, SAM3): prompts and image embeddings ------------

SAM_RECIPES: tuple[Recipe, ...] = ()


# --- vision towers on patch grids (Qwen-VL, GLM-V, Kimi, Molmo, PaddleOCR-VL, ...) --------

GRID_RECIPES: tuple[Recipe, ...] = ()


# --- audio and speech ---------------------------------------------------------------------

AUDIO_RECIPES: tuple[Recipe, ...] = ()


# --- image-text models (Idefics, Gemma3, LLaVA, MiniCPM, Florence, ...) ------------------

IMAGE_TEXT_RECIPES: tuple[Recipe, ...] = ()


# --- other families -----------------------------------------------------------------------

OTHER_RECIPES: tuple[Recipe, ...] = ()


RECIPES: tuple[Recipe, ...] = (*SAM_RECIPES, *GRID_RECIPES, *AUDIO_RECIPES, *IMAGE_TEXT_RECIPES, *OTHER_RECIPES)


def family_inputs(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any]:
    """The inputs every recipe that knows this model's family sets (later recipes win on a clash)."""
    made: dict[str, Any] = {}
    for recipe in RECIPES:
        found = recipe(inner, config, params, batch, seq, device, {**inputs, **made}, plan)
        if found:
            made.update(found)
    return made
