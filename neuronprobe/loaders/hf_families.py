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

_GRID_PARAMS = ("grid_thw", "image_grid_thw")


def grid_tower_pixels(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """A vision tower called on its own with ``pixel_values`` and a patch grid (``grid_thw``): the patches
    flattened as the image processor packs them (one row per patch, ``C*T*P*P`` wide, ``T`` only for towers
    with a ``temporal_patch_size``) next to their ``(t, h, w)`` grid, instead of a 4-D image. The shapes the
    forward's errors asked for (``plan``) are kept: per-patch images ``(N, C, P, P)`` for towers whose conv
    takes them as they are (kimi_k25), and ``(1, N, C, P, P)`` when the forward unpacks a batch in front of them
    (paddleocr_vl/modeling_paddleocr_vl.py: ``batch_size, sequence_len, channel, height, width``). Learned from qwen2_vl/image_processing_qwen2_vl.py (``flatten_patches``) and the
    towers that reshape each row to ``(-1, C, P, P)``: cosmos3_edge, dots3_note, hy_v4_vl, hunyuan_vl, glm_image."""
    from neuronprobe.loaders import hf

    grid_name = next((n for n in _GRID_PARAMS if n in params), None)
    if grid_name is None or "pixel_values" not in params or hf._main_input(inner, params) != "pixel_values":
        return None
    if getattr(config, "patch_size", None) is None or getattr(config, "vision_config", None) is not None:
        return None  # a vision-language model: its pixels and image tokens come from hf._vision_inputs
    made, _ = hf._vision_inputs(config, config, {"image_grid_thw": None}, batch, device, plan)
    pixels = made["pixel_values"]
    shape = plan.shape("pixel_values")
    if shape is not None and len(shape) == 4 and shape[0] == 1:  # a dim asked in front of the patch images: the batch
        pixels = hf._reshaped(pixels, shape[1:], device).unsqueeze(0)  # (1, N, C, P, P): paddleocr_vl's layout
    elif shape is not None:
        pixels = hf._reshaped(pixels, shape, device)
    return {"pixel_values": pixels, grid_name: made["image_grid_thw"]}


def grid_merge_sizes(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """A merge size per image next to its grid (``merge_sizes``, ``image_merge_sizes``): video_llama_3's
    tower unshuffles each image's patches by its own merge size (video_llama_3/modeling_video_llama_3.py
    ``pixel_unshuffle``; the processor sends 2 for video frames, 1 for images). The grid made here is a multiple
    of 2 and the image token count assumes the merge of :func:`hf._vision_inputs` (the config's
    ``spatial_merge_size``, else 2), so that merge is sent for every image."""
    import torch

    from neuronprobe.loaders import hf

    for grid_name, sizes_name in (("grid_thw", "merge_sizes"), ("image_grid_thw", "image_merge_sizes")):
        grid = inputs.get(grid_name)
        if sizes_name in params and isinstance(grid, torch.Tensor):
            vision = getattr(config, "vision_config", None) or config
            merge = hf._int_field([vision], ("spatial_merge_size",)) or 2
            return {sizes_name: torch.full((grid.shape[0],), merge, dtype=torch.long, device=grid.device)}
    return None


GRID_RECIPES: tuple[Recipe, ...] = (grid_tower_pixels, grid_merge_sizes)


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
