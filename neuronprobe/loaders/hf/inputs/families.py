"""Every family of inputs, imported so that its recipes are registered (:mod:`.recipes`): the one module
:mod:`.make` needs to run them all."""

from __future__ import annotations

from neuronprobe.loaders.hf.inputs import audio, grids, image_text, other, segmentation
from neuronprobe.loaders.hf.inputs.recipes import Recipe, RecipeContext, family_inputs, registered

FAMILIES = (segmentation, grids, audio, image_text, other)

__all__ = ["FAMILIES", "Recipe", "RecipeContext", "family_inputs", "registered"]
