"""Vision towers on patch grids: grids next to flattened patches."""

from __future__ import annotations

import math
from typing import Any

from neuronprobe.loaders.hf.build import entry_point
from neuronprobe.loaders.hf.config import IMAGE_TOKEN_FIELDS, QWEN_GRID, first_field
from neuronprobe.loaders.hf.inputs.primitives import (
    first_int_field,
    hidden_width,
    image_channels,
    main_input_of,
    reshaped_value,
    text_ids,
    tokens_before,
    vision_tower_inputs,
)
from neuronprobe.loaders.hf.inputs.recipes import RecipeContext, recipe

# --- vision towers on patch grids (Qwen-VL, GLM-V, Kimi, Molmo, PaddleOCR-VL, ...) --------

_GRID_PARAMS = ("grid_thw", "image_grid_thw")


@recipe(priority=2000, needs=("pixel_values",))
def grid_tower_pixels(ctx: RecipeContext) -> dict[str, Any] | None:
    """A vision tower called on its own with ``pixel_values`` and a patch grid (``grid_thw``): the patches
    flattened as the image processor packs them (one row per patch, ``C*T*P*P`` wide, ``T`` only for towers
    with a ``temporal_patch_size``) next to their ``(t, h, w)`` grid, instead of a 4-D image. The shapes the
    forward's errors asked for (``plan``) are kept: per-patch images ``(N, C, P, P)`` for towers whose conv
    takes them as they are (kimi_k25), and ``(1, N, C, P, P)`` when the forward unpacks a batch in front of them
    (paddleocr_vl/modeling_paddleocr_vl.py: ``batch_size, sequence_len, channel, height, width``). Learned from qwen2_vl/image_processing_qwen2_vl.py (``flatten_patches``) and the
    towers that reshape each row to ``(-1, C, P, P)``: cosmos3_edge, dots3_note, hy_v4_vl, hunyuan_vl, glm_image."""

    grid_name = next((n for n in _GRID_PARAMS if n in ctx.params), None)
    if grid_name is None or main_input_of(ctx.inner, ctx.params) != "pixel_values":
        return None
    if getattr(ctx.config, "patch_size", None) is None or getattr(ctx.config, "vision_config", None) is not None:
        return None  # a vision-language model: its pixels and image tokens come from vision_tower_inputs
    made, _ = vision_tower_inputs(ctx.config, ctx.config, {"image_grid_thw": None}, ctx.batch, ctx.device, ctx.plan)
    pixels = made["pixel_values"]
    shape = ctx.plan.shape("pixel_values")
    if shape is not None and len(shape) == 4 and shape[0] == 1:  # a dim asked in front of the patch images: the batch
        pixels = reshaped_value(pixels, shape[1:], ctx.device).unsqueeze(0)  # (1, N, C, P, P): paddleocr_vl's layout
    elif shape is not None:
        pixels = reshaped_value(pixels, shape, ctx.device)
    return {"pixel_values": pixels, grid_name: made["image_grid_thw"]}


@recipe(priority=2010)
def grid_merge_sizes(ctx: RecipeContext) -> dict[str, Any] | None:
    """A merge size per image next to its grid (``merge_sizes``, ``image_merge_sizes``): video_llama_3's
    tower unshuffles each image's patches by its own merge size (video_llama_3/modeling_video_llama_3.py
    ``pixel_unshuffle``; the processor sends 2 for video frames, 1 for images). The grid made here is a multiple
    of 2 and the image token count assumes the merge of :func:`hf._vision_inputs` (the config's
    ``spatial_merge_size``, else 2), so that merge is sent for every image."""
    import torch

    for grid_name, sizes_name in (("grid_thw", "merge_sizes"), ("image_grid_thw", "image_merge_sizes")):
        grid = ctx.inputs.get(grid_name)
        if sizes_name in ctx.params and isinstance(grid, torch.Tensor):
            vision = getattr(ctx.config, "vision_config", None) or ctx.config
            merge = first_int_field([vision], ("spatial_merge_size",)) or 2
            return {sizes_name: torch.full((grid.shape[0],), merge, dtype=torch.long, device=grid.device)}
    return None


def _ids_after_image_tokens(config: Any, batch: int, seq: int, device: str, count: int) -> Any:
    """Text ids after ``count`` image tokens (the config's image token id), as make_inputs lays them out."""

    token = first_field([config, getattr(config, "text_config", None)], IMAGE_TOKEN_FIELDS)
    text = text_ids(config, batch, seq, device)
    return tokens_before(text, int(token), count)


def _pooling_windows(index_grid: Any, pool_h: int, pool_w: int) -> Any:
    """The patch indices each pooled token reads: a (h, w) grid of patch indices in windows of pool_h x pool_w,
    padded with -1 evenly on both sides (molmo2/image_processing_molmo2.py ``arange_for_pooling``)."""
    import torch

    pad_h = pool_h * -(-index_grid.shape[0] // pool_h) - index_grid.shape[0]
    pad_w = pool_w * -(-index_grid.shape[1] // pool_w) - index_grid.shape[1]
    grid = torch.nn.functional.pad(index_grid, (pad_w // 2, (pad_w + 1) // 2, pad_h // 2, (pad_h + 1) // 2), value=-1)
    rows, cols = grid.shape[0] // pool_h, grid.shape[1] // pool_w
    return grid.reshape(rows, pool_h, cols, pool_w).permute(0, 2, 1, 3).reshape(rows * cols, pool_h * pool_w)


MOLMO_POOL = (2, 2)  # molmo2/image_processing_molmo2.py: pooling_size defaults to [2, 2]


@recipe(priority=2020)
def molmo_pooled_crops(ctx: RecipeContext) -> dict[str, Any] | None:
    """Molmo2's crops and the patch windows each image token pools (``image_token_pooling`` with ``image_grids``;
    the adapter's ``pooled_patches_idx``): what molmo2/image_processing_molmo2.py gives for one image that fits
    one crop: the resized image and that crop (2 crops of ``num_position_embeddings`` patches, ``C*P*P`` wide), 2x2
    windows over each crop's patch grid (the crop's indices offset by a crop's patches) and the grid
    ``[resized_h, resized_w, crop_h, crop_w]`` in windows; as many image tokens as windows."""

    import torch

    pooled_name = "image_token_pooling" if "image_token_pooling" in ctx.params else "pooled_patches_idx" if "pooled_patches_idx" in ctx.params else None
    if pooled_name is None:
        return None
    vision = getattr(ctx.config, "vision_config", None)
    adapter = getattr(ctx.config, "adapter_config", None) or ctx.config
    if pooled_name == "image_token_pooling" and (vision is None or "image_grids" not in ctx.params):
        return None
    patches = int(getattr(vision, "num_position_embeddings", 0) or 0) if vision is not None else 0
    side = math.isqrt(patches) if patches else QWEN_GRID * 2
    patches = side * side
    index_grid = torch.arange(patches).reshape(side, side)
    window = _pooling_windows(index_grid, *MOLMO_POOL)
    pooling = torch.cat([window, torch.where(window >= 0, window + patches, -1)])  # the resized image, then the crop
    windows_per_side = -(-side // MOLMO_POOL[0])
    on = "cpu" if ctx.device == "meta" else ctx.device
    if pooled_name == "pooled_patches_idx":  # the adapter alone: the two crops' features from the tower
        layers = len(getattr(adapter, "vision_feature_layer", None) or [1])
        width = int(getattr(adapter, "hidden_size", 0) or hidden_width(adapter)) * layers
        return {"image_features": torch.randn(2, patches, width, device=ctx.device), "pooled_patches_idx": pooling.to(ctx.device)}
    patch = int(getattr(vision, "patch_size", 14) or 14)
    made: dict[str, Any] = {
        "pixel_values": torch.randn(2 * ctx.batch, patches, image_channels(vision) * patch * patch, device=ctx.device),
        "image_token_pooling": torch.cat([pooling + i * 2 * patches for i in range(ctx.batch)]).to(ctx.device),  # indexes on the device
        "image_grids": torch.tensor([[windows_per_side] * 4] * ctx.batch, device=on),  # read as values (split sizes): on the CPU
    }
    if isinstance(ctx.inputs.get("input_ids"), torch.Tensor):
        made["input_ids"] = _ids_after_image_tokens(ctx.config, ctx.batch, ctx.seq, ctx.device, pooling.shape[0])
        if "attention_mask" in ctx.inputs:
            made["attention_mask"] = torch.ones_like(made["input_ids"])
    return made


def _is_inkling2_vision(config: Any) -> bool:
    try:
        from transformers.models.inkling2.configuration_inkling2 import Inkling2VisionConfig
    except ImportError:  # a transformers without inkling2
        return False
    return isinstance(config, Inkling2VisionConfig)


@recipe(priority=2030, needs=("image_grid_thw", "pixel_values"))
def inkling2_token_blocks(ctx: RecipeContext) -> dict[str, Any] | None:
    """Inkling2's pixels: one channels-last block of ``(P*m, P*m, C)`` pixels per image token and the grid counted
    in image tokens, ``[1, rows, columns]`` (inkling2/image_processing_inkling2.py ``_preprocess``: the image cut
    into ``size``-pixel blocks, ``permute(1, 3, 2, 4, 0)``; the tower multiplies the grid by the merge itself).
    Its forward takes ``image_grid_thw`` like Qwen-VL's, so the family is known by its vision config class."""
    import torch

    vision = getattr(ctx.config, "vision_config", None) or ctx.config
    if not _is_inkling2_vision(vision):
        return None
    merge = first_int_field([vision], ("spatial_merge_size",)) or 2
    block = int(vision.patch_size) * merge
    side = QWEN_GRID // 2  # image tokens per side: the 4x4 patches of vision_tower_inputs, merged 2x2
    on = "cpu" if ctx.device == "meta" else ctx.device
    made: dict[str, Any] = {
        "pixel_values": torch.randn(ctx.batch * side * side, block, block, image_channels(vision), device=ctx.device),
        "image_grid_thw": torch.tensor([[1, side, side]] * ctx.batch, device=on),
    }
    return made


GLM_IMAGE_TARGET = (1152, 768)  # glm_image/processing_glm_image.py: target_h, target_w defaults
GLM_IMAGE_TOKEN_PIXELS = 32  # glm_image/processing_glm_image.py ``_get_target_shape``: one token per 32x32 pixels


@recipe(priority=2040, needs=("images_per_sample",))
def image_to_image_grids(ctx: RecipeContext) -> dict[str, Any] | None:
    """GLM-Image's image-to-image grids: each sample's source image grids followed by the grid of the image to
    generate, with ``images_per_sample`` counting both; the model reads the sources as all but each sample's last
    grid (glm_image/modeling_glm_image.py ``get_image_grids_for_generation``; the target grid is the
    processor's default 1152x768 target in 32-pixel tokens, processing_glm_image.py ``_build_target_image_grid_thw``).
    Known by its ``images_per_sample`` parameter."""
    import torch

    grid = ctx.inputs.get("image_grid_thw")
    if not isinstance(grid, torch.Tensor) or grid.shape[0] != ctx.batch:
        return None
    target = torch.tensor(
        [[1, GLM_IMAGE_TARGET[0] // GLM_IMAGE_TOKEN_PIXELS, GLM_IMAGE_TARGET[1] // GLM_IMAGE_TOKEN_PIXELS]], dtype=grid.dtype, device=grid.device
    )
    rows = [torch.cat([grid[i : i + 1], target]) for i in range(ctx.batch)]
    return {"image_grid_thw": torch.cat(rows), "images_per_sample": torch.full((ctx.batch,), 2, dtype=torch.long, device=grid.device)}


@recipe(priority=2050, needs=("hidden_states",))
def vq_feature_grid(ctx: RecipeContext) -> dict[str, Any] | None:
    """A VQ tokenizer of vision features (an ``encode(hidden_states)`` whose config has ``latent_channels``): the
    features of one image on its patch grid, ``(B, latent_channels, h, w)``, what GLM-Image's
    ``get_image_tokens`` gives its ``vqmodel.encode`` (glm_image/modeling_glm_image.py: a 1x1 ``quant_conv`` over
    ``latent_channels``); the grid is the 4x4 patches of :func:`hf._vision_inputs`."""
    import torch

    latent = getattr(ctx.config, "latent_channels", None)
    if entry_point(ctx.inner) != "encode" or not isinstance(latent, int) or getattr(ctx.config, "hidden_size", None) is not None:
        return None
    return {"hidden_states": torch.randn(ctx.batch, latent, QWEN_GRID, QWEN_GRID, device=ctx.device)}


def _is_inkling_vision(config: Any) -> bool:
    try:
        from transformers.models.inkling.configuration_inkling import InklingVisionConfig
    except ImportError:  # a transformers without inkling
        return False
    return isinstance(config, InklingVisionConfig)


INKLING_PATCHES = 4  # image patches: their count is free (one image token each)


@recipe(priority=2060, needs=("pixel_values",))
def inkling_patch_volumes(ctx: RecipeContext) -> dict[str, Any] | None:
    """Inkling's pixels: one channels-last volume ``(T, P, P, C)`` per patch, ``T`` the temporal patch, one image
    token per patch (inkling/modeling_inkling.py: ``InklingVisionEncoderLayer.fold_timespace_to_depth`` reads
    ``(B, T, H, W, C)``, the tower's output is ``reshape(num_patches, 1, -1)``). Known by its vision config class:
    its forward takes a bare ``pixel_values``, like every image model's."""
    import torch

    vision = getattr(ctx.config, "vision_config", None) or ctx.config
    if not _is_inkling_vision(vision):
        return None
    patch, temporal = int(vision.patch_size), int(getattr(vision, "temporal_patch_size", 1) or 1)
    made: dict[str, Any] = {"pixel_values": torch.randn(ctx.batch * INKLING_PATCHES, temporal, patch, patch, image_channels(vision), device=ctx.device)}
    if vision is not ctx.config and isinstance(ctx.inputs.get("input_ids"), torch.Tensor):
        made["input_ids"] = _ids_after_image_tokens(ctx.config, ctx.batch, ctx.seq, ctx.device, INKLING_PATCHES)
        if "attention_mask" in ctx.inputs:
            made["attention_mask"] = torch.ones_like(made["input_ids"])
    return made


@recipe(priority=2070)
def token_modalities(ctx: RecipeContext) -> dict[str, Any] | None:
    """Each token's modality (``mm_token_type_ids``: 0 text, 1 image), when the forward asked for it (a repair put it
    in ``plan.extra``): ernie4_5_vl_moe's M-RoPE index needs it next to an image grid (processing_utils.py
    ``create_mm_token_type_ids``: image tokens 1, video tokens 2)."""
    import torch

    ids = ctx.inputs.get("input_ids")
    token = first_field([ctx.config, getattr(ctx.config, "text_config", None)], IMAGE_TOKEN_FIELDS)
    if "mm_token_type_ids" not in ctx.plan.extra or not isinstance(ids, torch.Tensor) or not isinstance(token, int):
        return None
    return {"mm_token_type_ids": (ids == token).long()}
