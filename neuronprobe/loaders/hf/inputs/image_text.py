"""Image-text models: image tokens next to pixels, tiles, masks."""

from __future__ import annotations

import inspect
import math
from collections.abc import Mapping
from typing import Any

from neuronprobe.loaders.hf.config import IMAGE_TOKEN_FIELDS, first_field
from neuronprobe.loaders.hf.inputs.primitives import hidden_width, image_channels, image_token_count, make_pixels, text_ids, tokens_before
from neuronprobe.loaders.hf.inputs.recipes import RecipeContext, recipe

# --- image-text models (Idefics, Gemma3, LLaVA, MiniCPM, Florence, ...) ------------------


def _pool_factor(config: Any) -> int | None:
    """The pixel shuffle of an idefics3-style connector: how many patches a side fold into one image token."""
    for name in ("scale_factor", "pixel_shuffle_factor"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def _with_image_tokens(config: Any, vision: Any, inputs: Mapping[str, Any], plan: Any, count: int, device: str) -> dict[str, Any]:
    """``input_ids`` with ``count`` image tokens in front in place of the ones :func:`hf.make_inputs` put there."""

    ids = inputs.get("input_ids")
    token = first_field([config], IMAGE_TOKEN_FIELDS)
    if ids is None or not isinstance(token, int) or plan.image_tokens is not None:
        return {}
    made = image_token_count(config, vision)
    text = ids[:, made:]
    return {"input_ids": tokens_before(text, token, count)}


@recipe(priority=4000, needs=("pixel_attention_mask",))
def pixel_shuffle_images(ctx: RecipeContext) -> dict[str, Any] | None:
    """Idefics3-style vision-language models (idefics3, smolvlm, modernvbert, ultravbert): images padded to
    (B, images, C, H, W) with a ``pixel_attention_mask`` of (B, images, H, W) over their real pixels, and
    (H / patch / factor)^2 image tokens per image after the connector's pixel shuffle (``scale_factor`` or
    ``pixel_shuffle_factor``). Without the mask, ``get_image_features`` makes one of the size of the real
    images it kept (a data-dependent size: "SymIntArrayRef expected to contain only concrete integers" on
    fake tensors). Learned from transformers/models/idefics3/modeling_idefics3.py (get_image_features,
    Idefics3Connector.pixel_shuffle) and modernvbert/modeling_modernvbert.py."""
    import torch

    pixels = ctx.inputs.get("pixel_values")
    factor = _pool_factor(ctx.config)
    vision = getattr(ctx.config, "vision_config", None)
    patch = getattr(vision, "patch_size", None)
    if factor is None or not isinstance(patch, int) or not isinstance(pixels, torch.Tensor) or pixels.dim() != 5:
        return None
    b, n, _, h, w = pixels.shape
    found: dict[str, Any] = {"pixel_attention_mask": torch.ones(b, n, h, w, dtype=torch.bool, device=ctx.device)}
    tokens = n * (h // patch // factor) * (w // patch // factor)
    return {**found, **_with_image_tokens(ctx.config, vision, ctx.inputs, ctx.plan, tokens, ctx.device)}


def _mask_required(inner: Any) -> bool:
    """The model's ``get_image_features`` cannot do without ``pixel_attention_mask`` (no default)."""

    for owner in (inner, getattr(inner, "model", None)):
        method = getattr(owner, "get_image_features", None)
        if callable(method):
            try:
                param = inspect.signature(method).parameters.get("pixel_attention_mask")
            except (TypeError, ValueError):
                return False
            return param is not None and param.default is inspect.Parameter.empty
    return False


@recipe(priority=4010, needs=("pixel_attention_mask",))
def image_tiles(ctx: RecipeContext) -> dict[str, Any] | None:
    """Tiled documents (granite_docling): pixels as (B, tiles, C, H, W), a ``pixel_attention_mask`` of (B, tiles)
    that says which tiles are real (``get_image_features`` requires it and keeps ``pixel_values[mask]``), and
    ``image_seq_len`` = (image_size / patch)^2 / scale_factor^2 image tokens per tile, the vision tower's own
    connector folding its patches by its ``scale_factor``. Learned from
    transformers/models/granite_docling/modeling_granite_docling.py (GraniteDoclingModel.get_image_features)
    and its image processor (one mask entry per tile)."""
    import torch

    vision = getattr(ctx.config, "vision_config", None)
    factor, patch, size = (getattr(vision, n, None) for n in ("scale_factor", "patch_size", "image_size"))
    pixels = ctx.inputs.get("pixel_values")
    if not _mask_required(ctx.inner) or not isinstance(pixels, torch.Tensor):
        return None
    if not (isinstance(factor, int) and isinstance(patch, int) and isinstance(size, int) and factor > 0 and patch > 0):
        return None
    if pixels.dim() == 4:
        pixels = pixels.unsqueeze(1)  # one tile
    b, tiles = pixels.shape[:2]
    per_tile = (size // patch) ** 2 // factor**2
    found = {"pixel_values": pixels, "pixel_attention_mask": torch.ones(b, tiles, dtype=torch.bool, device=ctx.device)}
    return {**found, **_with_image_tokens(ctx.config, vision, ctx.inputs, ctx.plan, tiles * per_tile, ctx.device)}


@recipe(priority=4020)
def second_vision_tower(ctx: RecipeContext) -> dict[str, Any] | None:
    """Models with two vision towers that read the same image at two sizes (deepseek_vl_hybrid: SigLIP at 384 px
    and a SAM encoder at 1024 px; the forward raises "Both pixel_values and high_res_pixel_values should be
    specified at the same time"): ``<name>_pixel_values`` is made at the size of ``<name>_vision_config``, next
    to the main pixels. Learned from transformers/models/deepseek_vl_hybrid/modeling_deepseek_vl_hybrid.py
    (DeepseekVLHybridModel.forward, get_image_features)."""

    if "pixel_values" not in ctx.inputs:
        return None
    found: dict[str, Any] = {}
    for name in ctx.params:
        prefix = name.removesuffix("_pixel_values")
        tower = getattr(ctx.config, f"{prefix}_vision_config", None) if prefix != name else None
        if tower is not None and name not in ctx.inputs:
            found[name] = make_pixels(tower, ctx.batch, ctx.device)
    return found or None


@recipe(priority=4030, needs=("image_embeds_position_mask",))
def image_positions_mask(ctx: RecipeContext) -> dict[str, Any] | None:
    """Kosmos-2: the image's ``latent_query_num`` embeddings are written into the text at the positions
    ``image_embeds_position_mask`` marks (``inputs_embeds[mask] = image_embeds``: no mask, "'NoneType' object has
    no attribute 'to'"). Its processor lays the text out as ``<image>``, ``latent_query_num`` placeholders,
    ``</image>``, then the words, with the mask 0, 1 * latent_query_num, 0, 0...: the same here, the ids at
    the placeholders being any (they are overwritten). Learned from
    transformers/models/kosmos2/modeling_kosmos2.py (Kosmos2TextTransformer.forward_embedding) and
    kosmos2/processing_kosmos2.py."""
    import torch

    queries = getattr(ctx.config, "latent_query_num", None)
    ids = ctx.inputs.get("input_ids")
    if not isinstance(queries, int) or ids is None or "pixel_values" not in ctx.inputs:
        return None
    b = ids.shape[0]
    length = queries + 2 + ids.shape[1]
    mask = torch.zeros(b, length, dtype=torch.long, device=ctx.device)
    mask[:, 1 : 1 + queries] = 1
    found: dict[str, Any] = {
        "input_ids": torch.cat([torch.zeros(b, queries + 2, dtype=ids.dtype, device=ctx.device), ids], dim=1),
        "image_embeds_position_mask": mask,
    }
    if "attention_mask" in ctx.inputs:
        found["attention_mask"] = torch.ones(b, length, dtype=torch.long, device=ctx.device)
    return found


@recipe(priority=4040, needs=("aspect_ratio_ids", "aspect_ratio_mask"))
def aspect_ratio_tiles(ctx: RecipeContext) -> dict[str, Any] | None:
    """Mllama's vision tower: each image is cut into tiles after its aspect ratio (one of
    ``supported_aspect_ratios``) and padded to ``max_num_tiles``: pixels (B, images, max_num_tiles, C, H, W),
    ``aspect_ratio_ids`` (B, images), the ratio's index + 1 (0 is padding), and ``aspect_ratio_mask``
    (B, images, max_num_tiles), 1 on real tiles. One square image here: ratio [1, 1], one real tile, as its
    image processor gives for an image of the tile size. Learned from
    transformers/models/mllama/modeling_mllama.py (MllamaVisionModel.forward) and
    mllama/image_processing_mllama.py."""
    import torch

    ratios = getattr(ctx.config, "supported_aspect_ratios", None)
    tiles = getattr(ctx.config, "max_num_tiles", None)
    if not ratios or not isinstance(tiles, int) or "pixel_values" not in ctx.inputs:
        return None
    square = next((i + 1 for i, r in enumerate(ratios) if list(r) == [1, 1]), 1)
    pixels = make_pixels(ctx.config, ctx.batch, ctx.device)
    mask = torch.zeros(ctx.batch, 1, tiles, dtype=torch.long, device=ctx.device)
    mask[:, :, 0] = 1
    return {
        "pixel_values": pixels[:, None, None].expand(ctx.batch, 1, tiles, *pixels.shape[1:]).contiguous(),
        "aspect_ratio_ids": torch.full((ctx.batch, 1), square, dtype=torch.long, device=ctx.device),
        "aspect_ratio_mask": mask,
    }


@recipe(priority=4050)
def pooled_image_token(ctx: RecipeContext) -> dict[str, Any] | None:
    """Florence-2: its projector puts the mean of the feature grid in front of the grid (``torch.cat([spatial
    mean, grid])``, with a ``visual_temporal_embed``), so an image is grid + 1 tokens ("tokens: 49, features:
    50" at 224 px, 577 at the processor's 768). Learned from transformers/models/florence2/modeling_florence2.py
    (Florence2MultiModalProjector.forward) and processing_florence2.py (image_seq_length)."""

    vision = getattr(ctx.config, "vision_config", None)
    projector = getattr(getattr(ctx.inner, "model", ctx.inner), "multi_modal_projector", None)
    if vision is None or not hasattr(projector, "visual_temporal_embed") or "pixel_values" not in ctx.inputs:
        return None
    return _with_image_tokens(ctx.config, vision, ctx.inputs, ctx.plan, image_token_count(ctx.config, vision) + 1, ctx.device) or None


@recipe(priority=4060)
def vq_grid_pixels(ctx: RecipeContext) -> dict[str, Any] | None:
    """Janus's VQ-VAE: its decoder takes exactly ``num_patches`` x ``num_patches`` image tokens ("Expected
    `image_tokens` to have shape `(batch_size, 1024)`, but got shape `torch.Size([1, 196])`"), and its encoder
    halves the image at every level of ``channel_multiplier`` but the last: pixels of num_patches * 2^(levels - 1)
    a side (512 for the default 32 patches; janus sets num_patches to its 384 px / 16). Learned from
    transformers/models/janus/modeling_janus.py (JanusVQVAE.decode, JanusVQVAEEncoder) and configuration_janus.py."""
    import torch

    patches, levels = getattr(ctx.config, "num_patches", None), getattr(ctx.config, "channel_multiplier", None)
    pixels = ctx.inputs.get("pixel_values")
    if not isinstance(patches, int) or not isinstance(levels, (list, tuple)) or not levels or not isinstance(pixels, torch.Tensor) or pixels.dim() != 4:
        return None
    if getattr(ctx.config, "image_size", None) or getattr(ctx.config, "resolution", None):  # the config says its size itself
        return None
    side = patches * 2 ** (len(levels) - 1)
    return {"pixel_values": torch.randn(pixels.shape[0], pixels.shape[1], side, side, device=ctx.device)}


@recipe(priority=4080)
def patches_to_queries(ctx: RecipeContext) -> dict[str, Any] | None:
    """Aria: its projector's cross-attention has query sets only for the patch counts of
    ``projector_patch_to_query_dict`` (1225 and 4900: its image processor's 490 and 980 px in patches of 14;
    "Number of patches 49 not found in patch_to_query_dict"). Pixels of sqrt(count) patches a side for the
    smallest count, with the ``pixel_mask`` of their real pixels, and as many image tokens as that count's
    queries. Learned from transformers/models/aria/modeling_aria.py (AriaProjector.forward,
    AriaModel.get_image_features) and aria/image_processing_aria.py (min and max image size)."""

    import torch

    table = getattr(ctx.config, "projector_patch_to_query_dict", None)
    vision = getattr(ctx.config, "vision_config", None)
    patch = getattr(vision, "patch_size", None)
    if not isinstance(table, dict) or not isinstance(patch, int) or "pixel_values" not in ctx.inputs:
        return None
    squares = sorted(int(k) for k in table if math.isqrt(int(k)) ** 2 == int(k))
    if not squares:
        return None
    side = math.isqrt(squares[0]) * patch
    pixels = torch.randn(ctx.batch, image_channels(vision), side, side, device=ctx.device)
    found: dict[str, Any] = {"pixel_values": pixels}
    if "pixel_mask" in ctx.params:
        found["pixel_mask"] = torch.ones(ctx.batch, side, side, dtype=torch.bool, device=ctx.device)
    queries = table.get(squares[0], table.get(str(squares[0])))
    if not isinstance(queries, int):
        return None
    return {**found, **_with_image_tokens(ctx.config, vision, ctx.inputs, ctx.plan, queries, ctx.device)}


NAVIT_MERGE = 4  # minicpm-v folds the patch grid 2x2 twice (window merger, then downsample MLP)


@recipe(priority=4090, needs=("target_sizes",))
def navit_row_patches(ctx: RecipeContext) -> dict[str, Any] | None:
    """MiniCPM-V's vision towers (minicpmv4_6, minicpmv4_7, minicpm_ocr): every image slice patchified into one
    row, ``pixel_values`` (1, C, patch, sum(h * w) * patch), and ``target_sizes`` (slices, 2) int32 with each
    slice's (h, w) patch grid, which the forward reads as values (``target_sizes.tolist()``: kept on the CPU).
    The grid is the config's image size in patches, cut to a multiple of the two 2x2 merges. The embeddings'
    ``position_ids`` are given precomputed (transformers/vision_utils.py get_vision_nearest_position_ids takes them
    from the kwargs "if precomputed", for torch.export): computed from the grid's values they end the export on the
    meta device. Learned from transformers/models/minicpmv4_6/image_processing_minicpmv4_6.py (reshape_by_patch,
    _preprocess) and modeling_minicpmv4_6.py (MiniCPMV4_6VisionModel.forward, MiniCPMV4_6VisionEmbeddings)."""
    import torch

    patch, size = getattr(ctx.config, "patch_size", None), getattr(ctx.config, "image_size", None)
    if "pixel_values" not in ctx.inputs or not isinstance(patch, int) or not isinstance(size, int):
        return None
    if getattr(ctx.config, "vision_config", None) is not None:  # the tower itself; the full models keep the inputs they analyse with
        return None
    side = max(NAVIT_MERGE, (size // patch) // NAVIT_MERGE * NAVIT_MERGE)
    channels = int(getattr(ctx.config, "num_channels", 3) or 3)
    sizes = torch.tensor([[side, side]] * ctx.batch, dtype=torch.int32)
    found = {
        "pixel_values": torch.randn(1, channels, patch, ctx.batch * side * side * patch, device=ctx.device),
        "target_sizes": sizes if ctx.device == "meta" else sizes.to(ctx.device),
    }
    try:  # the position ids the embeddings would compute from the grid's values, given as transformers allows for export
        from transformers.vision_utils import get_vision_nearest_position_ids
    except ImportError:  # an older transformers: the forward computes them (a data-dependent read)
        return found
    found["position_ids"] = get_vision_nearest_position_ids(sizes, size // patch).to(ctx.device)
    return found


GEMMA4_SOFT_TOKENS = 280  # Gemma4ImageProcessor.max_soft_tokens: an image is at most this many tokens after pooling


@recipe(priority=4100, needs=("pixel_position_ids",))
def padded_patch_positions(ctx: RecipeContext) -> dict[str, Any] | None:
    """Gemma 4's vision tower: an image as flattened patches (B, max_patches, P*P*C) padded to max_patches =
    max_soft_tokens * pooling_kernel_size^2, with ``pixel_position_ids`` (B, max_patches, 2) giving each
    patch's (x, y) and (-1, -1) for padding. A square image as the processor sizes it: the largest side in
    whole pooling windows whose patches fit in max_patches (48 x 48 of 2520 by default). Learned from
    transformers/models/gemma4/image_processing_gemma4.py (convert_image_to_patches, pad_along_first_dim)
    and modeling_gemma4.py (Gemma4VisionModel.forward: output_length from the padded length)."""

    import torch

    pool, patch = getattr(ctx.config, "pooling_kernel_size", None), getattr(ctx.config, "patch_size", None)
    if "pixel_values" not in ctx.inputs or not isinstance(pool, int) or not isinstance(patch, int):
        return None
    max_patches = GEMMA4_SOFT_TOKENS * pool * pool
    side = math.isqrt(max_patches) // pool * pool
    channels = int(getattr(ctx.config, "num_channels", 3) or 3)
    pixels = torch.zeros(ctx.batch, max_patches, patch * patch * channels, device=ctx.device)
    positions = torch.full((ctx.batch, max_patches, 2), -1, dtype=torch.long, device=ctx.device)
    if ctx.device != "meta":
        pixels[:, : side * side] = torch.rand(ctx.batch, side * side, patch * patch * channels, device=ctx.device)
        ys, xs = torch.meshgrid(torch.arange(side, device=ctx.device), torch.arange(side, device=ctx.device), indexing="ij")
        positions[:, : side * side] = torch.stack([xs, ys], dim=-1).reshape(side * side, 2)
    return {"pixel_values": pixels, "pixel_position_ids": positions}


@recipe(priority=4110, needs=("image_grid_hw",))
def flat_patches_hw_grid(ctx: RecipeContext) -> dict[str, Any] | None:
    """Nemotron-H Omni: the patches of every image flattened and concatenated, ``pixel_values`` (total patches,
    C * P * P), with ``image_grid_hw`` (images, 2) their (h, w) patch grids, read as values (``tolist``: kept on
    the CPU); each side a multiple of the pixel shuffle's 1 / ``downsample_ratio``, and h * w * ratio^2 image tokens
    per image. The grid is the vision config's image size in patches, rounded down to that multiple. With no
    image token id there is nowhere to put the features: nothing is made until the config completion gives one. Learned from
    transformers/models/nemotron_h_omni/modeling_nemotron_h_omni.py (get_image_features) and
    image_processing_nemotron_h_omni.py (convert_image_to_patches, get_patch_grid_size)."""
    import torch

    vision = getattr(ctx.config, "vision_config", None)
    ratio = getattr(ctx.config, "downsample_ratio", None)
    patch, size = getattr(vision, "patch_size", None), getattr(vision, "image_size", None)
    if "pixel_values" not in ctx.inputs or not isinstance(ratio, float) or not 0 < ratio < 1:
        return None
    if not isinstance(patch, int) or not isinstance(size, int) or not isinstance(first_field([ctx.config], IMAGE_TOKEN_FIELDS), int):
        return None  # no image token id (the default config's): the forward's error gets the config completed first
    merge = round(1 / ratio)
    side = max(merge, (size // patch) // merge * merge)
    width = image_channels(vision) * patch * patch
    found: dict[str, Any] = {
        "pixel_values": torch.randn(ctx.batch * side * side, width, device=ctx.device),
        "image_grid_hw": torch.tensor([[side, side]] * ctx.batch, device="cpu" if ctx.device == "meta" else ctx.device),
    }
    return {**found, **_with_image_tokens(ctx.config, vision, ctx.inputs, ctx.plan, side * side // (merge * merge), ctx.device)}


@recipe(priority=4120)
def patches_then_queries(ctx: RecipeContext) -> dict[str, Any] | None:
    """DeepSeek-OCR-2's vision encoder: ``inputs_embeds`` are the SAM encoder's image patches followed by as many
    learned queries (144 + 144 at 768 px, 256 + 256 at 1024 px), and ``num_patches`` (a Python int) says where
    the patches end: attention is bidirectional over them and causal over the queries. Here half the sequence
    is patches. Learned from transformers/models/deepseek_ocr2/modeling_deepseek_ocr2.py
    (DeepseekOcr2VisionModel.forward, DeepseekOcr2VisionEncoder.forward)."""

    embeds = ctx.inputs.get("inputs_embeds")
    param = ctx.params.get("num_patches") if hasattr(ctx.params, "get") else None
    if param is None or param.annotation not in (int, "int") or embeds is None or "num_patches" in ctx.inputs:
        return None
    return {"num_patches": max(1, embeds.shape[1] // 2)} if param.default is inspect.Parameter.empty else None


@recipe(priority=4130, needs=("context",))
def resampler_context(ctx: RecipeContext) -> dict[str, Any] | None:
    """Idefics2's perceiver resampler: ``context`` is the image's patch features after the modality projection,
    (B, patches, hidden_size), that ``resampler_n_latents`` latents attend to, with an ``attention_mask`` over the
    patches; not token ids. Learned from transformers/models/idefics2/modeling_idefics2.py
    (Idefics2PerceiverResampler.forward, Idefics2Connector.forward)."""
    import torch

    if not isinstance(getattr(ctx.config, "resampler_n_latents", None), int):
        return None
    found: dict[str, Any] = {"context": torch.randn(ctx.batch, ctx.seq, hidden_width(ctx.config), device=ctx.device)}
    if "attention_mask" in ctx.params:
        found["attention_mask"] = torch.ones(ctx.batch, ctx.seq, dtype=torch.long, device=ctx.device)
    return found


QFORMER_VIDEO_FRAMES = 4  # instructblipvideo's processor: "InstrucBLIP works with 4 frames only"


@recipe(priority=4070, needs=("qformer_input_ids", "input_ids"))
def qformer_video(ctx: RecipeContext) -> dict[str, Any] | None:
    """InstructBLIP-Video: 4 frames (B, 4, C, H, W), each read by the Q-Former into ``num_query_tokens`` queries
    that replace as many ``video_token_id`` tokens of the text per frame, with the Q-Former's own prompt
    ids next to them. Its forward reads ``input_ids`` with no None check. Without a video token id (the default
    config leaves it unset) it has nothing to place: the config completion gives one first. Learned from
    transformers/models/instructblipvideo/modeling_instructblipvideo.py (forward: frames into the batch, queries
    reshaped to num_query_tokens * frames) and processing_instructblipvideo.py (num_query_tokens * 4 video tokens)."""
    import torch

    queries = getattr(ctx.config, "num_query_tokens", None)
    token = getattr(ctx.config, "video_token_id", None)
    pixels = ctx.inputs.get("pixel_values")
    if not isinstance(queries, int) or not isinstance(token, int):
        return None
    if not isinstance(pixels, torch.Tensor) or pixels.dim() != 5:
        return None
    frames = QFORMER_VIDEO_FRAMES
    text = text_ids(ctx.config, ctx.batch, ctx.seq, ctx.device)
    return {
        "pixel_values": pixels[:, :1].expand(pixels.shape[0], frames, *pixels.shape[2:]).contiguous(),
        "input_ids": tokens_before(text, token, queries * frames),
    }
