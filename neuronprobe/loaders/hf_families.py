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
from types import SimpleNamespace
from typing import Any

from neuronprobe.loaders import fired

Recipe = Callable[[Any, Any, Any, int, int, str, dict[str, Any], Any], "dict[str, Any] | None"]


# --- segment anything (SAM, SAM2, EdgeTAM, SAM3): prompts and image embeddings ------------


def _prompt_config(config: Any) -> Any:
    """The SAM prompt-encoder config: the config itself (a prompt encoder) or its ``prompt_encoder_config``."""
    found = getattr(config, "prompt_encoder_config", None) or config
    return found if isinstance(getattr(found, "image_size", None), int) and hasattr(found, "mask_input_channels") else None


def _sam_sizes(prompt: Any) -> tuple[int, int]:
    """(the side of the image the prompts point into, the side of a mask prompt): the processors resize and pad
    images to ``image_size`` (SamImageProcessor pad_size 1024, Sam2ImageProcessor size 1024), mask prompts are
    four times the image embedding (``mask_input_size``: 256 for a 64x64 embedding)."""
    side = int(prompt.image_size)
    embedding = int(getattr(prompt, "image_embedding_size", 0) or side // int(getattr(prompt, "patch_size", 16) or 16))
    return side, 4 * embedding


def _point_prompt(batch: int, side: int, device: str) -> dict[str, Any]:
    """One foreground point per image at its centre: ``input_points`` (B, 1 prompt, 1 point, xy) in the resized
    image's pixels, ``input_labels`` (B, 1, 1) = 1, what SamProcessor / Sam2Processor give for ``[[[x, y]]]``."""
    import torch

    return {
        "input_points": torch.full((batch, 1, 1, 2), side / 2, device=device),
        "input_labels": torch.ones(batch, 1, 1, dtype=torch.long, device=device),
    }


def sam_image_and_point(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """A SAM-family model on an image (sam, sam_hq, sam2, edgetam, sam3_tracker; the forward takes ``pixel_values``
    and ``input_points``): pixels at the prompt encoder's ``image_size``, the size the processor gives, since
    SAM2 and EdgeTAM reshape their feature maps to the config's ``backbone_feature_sizes`` (modeling_sam2.py
    ``Sam2Model.forward``: ``feat.view(batch_size, -1, *feat_size)``), and one point prompt, as in the model's
    documented use (``processor(images=raw_image, input_points=[[[400, 650]]])``)."""
    import torch

    prompt = _prompt_config(config)
    if prompt is None or "pixel_values" not in params or "input_points" not in params or "input_labels" not in params:
        return None
    side, _ = _sam_sizes(prompt)
    made = _point_prompt(batch, side, device)
    if plan is None or plan.shape("pixel_values") is None:  # a size the forward's own error asked for stays
        channels = int(getattr(getattr(config, "vision_config", None), "num_channels", 3) or 3)
        made["pixel_values"] = torch.randn(batch, channels, side, side, device=device)
    return made


def sam_prompts(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """A SAM prompt encoder on its own (sam2_prompt_encoder, edgetam_prompt_encoder, the video trackers'; its forward
    takes ``input_points``, ``input_labels``, ``input_boxes`` and ``input_masks`` and no image): a point, a box
    around it and a low-resolution mask, so every prompt path runs (modeling_sam2.py ``Sam2PromptEncoder.forward``:
    points padded only without a box, boxes (B, prompts, 4) as two corners, masks at ``mask_input_size``)."""
    import torch

    prompt = _prompt_config(config)
    wanted = ("input_points", "input_labels", "input_boxes", "input_masks")
    if prompt is None or not all(name in params for name in wanted) or "pixel_values" in params:
        return None
    side, mask = _sam_sizes(prompt)
    box = torch.tensor([side / 4, side / 4, 3 * side / 4, 3 * side / 4], device=device)
    return {
        **_point_prompt(batch, side, device),
        "input_boxes": box.expand(batch, 1, 4).contiguous(),
        "input_masks": torch.randn(batch, 1, mask, mask, device=device),
    }


def sam_mask_embedding(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """SAM's mask embedding (hf:sam_prompt_encoder and hf:sam_hq_prompt_encoder build ``SamMaskEmbedding``, the one
    class that takes the prompt-encoder config: ``SamPromptEncoder`` takes the whole ``SamConfig``): its forward
    takes ``masks``, the mask prompt as floats at ``mask_input_size`` (B, 1, 256, 256) (modeling_sam.py, the
    processor's ``mask_pad_size``)."""
    import torch

    prompt = _prompt_config(config)
    if prompt is None or list(params) != ["masks"]:
        return None
    _, mask = _sam_sizes(prompt)
    return {"masks": torch.randn(batch, 1, mask, mask, device=device)}


def sam3_box_prompt(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """SAM3's detector next to its text prompt takes box prompts (its forward takes ``input_boxes`` and
    ``input_boxes_labels``): one positive box, normalised (cx, cy, w, h), as Sam3Processor gives for
    ``input_boxes=[[[x0, y0, x1, y1]]], input_boxes_labels=[[1]]``. Only with a box does ``Sam3Model.forward`` run
    its geometry encoder (modeling_sam3.py: ``has_geometry_prompts = input_boxes is not None and
    input_boxes.numel() > 0``), so sam3_geometry_encoder's inputs are recorded there."""
    import torch

    if not all(name in params for name in ("pixel_values", "input_boxes", "input_boxes_labels")) or "input_points" in params:
        return None
    return {
        "input_boxes": torch.full((batch, 1, 4), 0.5, device=device),
        "input_boxes_labels": torch.ones(batch, 1, dtype=torch.long, device=device),
    }


VIDEO_FRAMES = 2  # a short video: the tracker's forward runs on frame 0, the rest wait in the session


def _session_class(inner: Any, params: Any) -> Any:
    """The class the forward's ``inference_session`` is annotated with (resolved in the model's module)."""
    import sys

    param = params.get("inference_session")
    annotation = getattr(param, "annotation", None)
    if isinstance(annotation, str):
        annotation = getattr(sys.modules.get(type(inner).__module__), annotation, None)
    return annotation if isinstance(annotation, type) else None


TEXT_PROMPT_TOKENS = 32  # Sam3VideoProcessor.add_text_prompt pads each prompt to 32 tokens


def sam_video_session(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """A SAM video model (the forward takes an ``inference_session``) used as its processor sets it up:
    ``init_video_session`` on a video (frames at the config's ``image_size``, here random), prompts on frame 0,
    then ``model(inference_session=session, frame_idx=0)``. A tracker (sam2_video, edgetam_video,
    sam3_tracker_video: the session class takes point prompts) gets one point per object, one object per batch
    item, as ``add_inputs_to_inference_session`` stores it (``point_coords`` (1, 1, 1, xy) in the resized frame's
    pixels, ``point_labels`` int32; processing_sam2_video.py); its forward runs the vision encoder, prompt encoder,
    mask decoder and memory encoder (modeling_sam2_video.py). A detector-tracker (sam3_video: the session takes text
    prompts) gets one text prompt, token ids padded to 32 with their mask, as ``add_text_prompt`` stores them
    (processing_sam3_video.py). The session is a :class:`hf.StatefulInput`: the forward consumes its prompts."""
    import torch

    from neuronprobe.loaders.hf import StatefulInput, sub_configs, text_ids

    session_class = _session_class(inner, params)
    side = getattr(config, "image_size", None)
    points = hasattr(session_class, "add_point_inputs")
    if session_class is None or not isinstance(side, int) or not (points or hasattr(session_class, "add_prompt")):
        return None
    frames = torch.randn(VIDEO_FRAMES, 3, side, side, device=device)
    session = session_class(
        video=frames,
        video_height=side,
        video_width=side,
        inference_device=device,
        inference_state_device=device,
        video_storage_device=device,
        dtype=torch.float32,
    )
    if points:
        for obj_id in range(1, batch + 1):
            prompt = {
                "point_coords": torch.full((1, 1, 1, 2), side / 2, device=device),
                "point_labels": torch.ones(1, 1, 1, dtype=torch.int32, device=device),
            }
            session.add_point_inputs(session.obj_id_to_idx(obj_id), 0, prompt)
        session.obj_with_new_inputs = list(range(1, batch + 1))
    else:
        text = next((sub for sub in sub_configs(config) if hasattr(sub, "vocab_size") and hasattr(sub, "max_position_embeddings")), config)
        prompt_id = session.add_prompt("object")
        session.prompt_input_ids[prompt_id] = text_ids(text, 1, TEXT_PROMPT_TOKENS, device)
        session.prompt_attention_masks[prompt_id] = torch.ones(1, TEXT_PROMPT_TOKENS, dtype=torch.long, device=device)
    return {"inference_session": StatefulInput(session), "frame_idx": 0}


SAM_RECIPES: tuple[Recipe, ...] = (sam_image_and_point, sam_prompts, sam_mask_embedding, sam3_box_prompt, sam_video_session)


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


def _ids_after_image_tokens(config: Any, batch: int, seq: int, device: str, count: int) -> Any:
    """Text ids after ``count`` image tokens (the config's image token id), as hf.make_inputs lays them out."""

    from neuronprobe.loaders import hf

    token = hf._field([config, getattr(config, "text_config", None)], hf._IMAGE_TOKEN_FIELDS)
    text = hf.text_ids(config, batch, seq, device)
    return hf.tokens_before(text, int(token), count)


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


def molmo_pooled_crops(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """Molmo2's crops and the patch windows each image token pools (``image_token_pooling`` with ``image_grids``;
    the adapter's ``pooled_patches_idx``): what molmo2/image_processing_molmo2.py gives for one image that fits
    one crop: the resized image and that crop (2 crops of ``num_position_embeddings`` patches, ``C*P*P`` wide), 2x2
    windows over each crop's patch grid (the crop's indices offset by a crop's patches) and the grid
    ``[resized_h, resized_w, crop_h, crop_w]`` in windows; as many image tokens as windows."""
    import math

    import torch

    from neuronprobe.loaders import hf

    pooled_name = "image_token_pooling" if "image_token_pooling" in params else "pooled_patches_idx" if "pooled_patches_idx" in params else None
    if pooled_name is None:
        return None
    vision = getattr(config, "vision_config", None)
    adapter = getattr(config, "adapter_config", None) or config
    if pooled_name == "image_token_pooling" and (vision is None or "image_grids" not in params):
        return None
    patches = int(getattr(vision, "num_position_embeddings", 0) or 0) if vision is not None else 0
    side = math.isqrt(patches) if patches else hf.QWEN_GRID * 2
    patches = side * side
    index_grid = torch.arange(patches).reshape(side, side)
    window = _pooling_windows(index_grid, *MOLMO_POOL)
    pooling = torch.cat([window, torch.where(window >= 0, window + patches, -1)])  # the resized image, then the crop
    windows_per_side = -(-side // MOLMO_POOL[0])
    on = "cpu" if device == "meta" else device
    if pooled_name == "pooled_patches_idx":  # the adapter alone: the two crops' features from the tower
        layers = len(getattr(adapter, "vision_feature_layer", None) or [1])
        width = int(getattr(adapter, "hidden_size", 0) or hf._width(adapter)) * layers
        return {"image_features": torch.randn(2, patches, width, device=device), "pooled_patches_idx": pooling.to(device)}
    patch = int(getattr(vision, "patch_size", 14) or 14)
    made: dict[str, Any] = {
        "pixel_values": torch.randn(2 * batch, patches, hf._channels(vision) * patch * patch, device=device),
        "image_token_pooling": torch.cat([pooling + i * 2 * patches for i in range(batch)]).to(device),  # indexes on the device
        "image_grids": torch.tensor([[windows_per_side] * 4] * batch, device=on),  # read as values (split sizes): on the CPU
    }
    if isinstance(inputs.get("input_ids"), torch.Tensor):
        made["input_ids"] = _ids_after_image_tokens(config, batch, seq, device, pooling.shape[0])
        if "attention_mask" in inputs:
            made["attention_mask"] = torch.ones_like(made["input_ids"])
    return made


def _is_inkling2_vision(config: Any) -> bool:
    try:
        from transformers.models.inkling2.configuration_inkling2 import Inkling2VisionConfig
    except ImportError:  # a transformers without inkling2
        return False
    return isinstance(config, Inkling2VisionConfig)


def inkling2_token_blocks(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """Inkling2's pixels: one channels-last block of ``(P*m, P*m, C)`` pixels per image token and the grid counted
    in image tokens, ``[1, rows, columns]`` (inkling2/image_processing_inkling2.py ``_preprocess``: the image cut
    into ``size``-pixel blocks, ``permute(1, 3, 2, 4, 0)``; the tower multiplies the grid by the merge itself).
    Its forward takes ``image_grid_thw`` like Qwen-VL's, so the family is known by its vision config class."""
    import torch

    from neuronprobe.loaders import hf

    vision = getattr(config, "vision_config", None) or config
    if not _is_inkling2_vision(vision) or "image_grid_thw" not in params or "pixel_values" not in params:
        return None
    merge = hf._int_field([vision], ("spatial_merge_size",)) or 2
    block = int(vision.patch_size) * merge
    side = hf.QWEN_GRID // 2  # image tokens per side: the 4x4 patches of hf._vision_inputs, merged 2x2
    on = "cpu" if device == "meta" else device
    made: dict[str, Any] = {
        "pixel_values": torch.randn(batch * side * side, block, block, hf._channels(vision), device=device),
        "image_grid_thw": torch.tensor([[1, side, side]] * batch, device=on),
    }
    return made


GLM_IMAGE_TARGET = (1152, 768)  # glm_image/processing_glm_image.py: target_h, target_w defaults
GLM_IMAGE_TOKEN_PIXELS = 32  # glm_image/processing_glm_image.py ``_get_target_shape``: one token per 32x32 pixels


def image_to_image_grids(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """GLM-Image's image-to-image grids: each sample's source image grids followed by the grid of the image to
    generate, with ``images_per_sample`` counting both; the model reads the sources as all but each sample's last
    grid (glm_image/modeling_glm_image.py ``get_image_grids_for_generation``; the target grid is the
    processor's default 1152x768 target in 32-pixel tokens, processing_glm_image.py ``_build_target_image_grid_thw``).
    Known by its ``images_per_sample`` parameter."""
    import torch

    grid = inputs.get("image_grid_thw")
    if "images_per_sample" not in params or not isinstance(grid, torch.Tensor) or grid.shape[0] != batch:
        return None
    target = torch.tensor(
        [[1, GLM_IMAGE_TARGET[0] // GLM_IMAGE_TOKEN_PIXELS, GLM_IMAGE_TARGET[1] // GLM_IMAGE_TOKEN_PIXELS]], dtype=grid.dtype, device=grid.device
    )
    rows = [torch.cat([grid[i : i + 1], target]) for i in range(batch)]
    return {"image_grid_thw": torch.cat(rows), "images_per_sample": torch.full((batch,), 2, dtype=torch.long, device=grid.device)}


def vq_feature_grid(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """A VQ tokenizer of vision features (an ``encode(hidden_states)`` whose config has ``latent_channels``): the
    features of one image on its patch grid, ``(B, latent_channels, h, w)``, what GLM-Image's
    ``get_image_tokens`` gives its ``vqmodel.encode`` (glm_image/modeling_glm_image.py: a 1x1 ``quant_conv`` over
    ``latent_channels``); the grid is the 4x4 patches of :func:`hf._vision_inputs`."""
    import torch

    from neuronprobe.loaders import hf

    latent = getattr(config, "latent_channels", None)
    if hf.entry_point(inner) != "encode" or "hidden_states" not in params or not isinstance(latent, int) or getattr(config, "hidden_size", None) is not None:
        return None
    return {"hidden_states": torch.randn(batch, latent, hf.QWEN_GRID, hf.QWEN_GRID, device=device)}


def _is_inkling_vision(config: Any) -> bool:
    try:
        from transformers.models.inkling.configuration_inkling import InklingVisionConfig
    except ImportError:  # a transformers without inkling
        return False
    return isinstance(config, InklingVisionConfig)


INKLING_PATCHES = 4  # image patches: their count is free (one image token each)


def inkling_patch_volumes(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """Inkling's pixels: one channels-last volume ``(T, P, P, C)`` per patch, ``T`` the temporal patch, one image
    token per patch (inkling/modeling_inkling.py: ``InklingVisionEncoderLayer.fold_timespace_to_depth`` reads
    ``(B, T, H, W, C)``, the tower's output is ``reshape(num_patches, 1, -1)``). Known by its vision config class:
    its forward takes a bare ``pixel_values``, like every image model's."""
    import torch

    from neuronprobe.loaders import hf

    vision = getattr(config, "vision_config", None) or config
    if not _is_inkling_vision(vision) or "pixel_values" not in params:
        return None
    patch, temporal = int(vision.patch_size), int(getattr(vision, "temporal_patch_size", 1) or 1)
    made: dict[str, Any] = {"pixel_values": torch.randn(batch * INKLING_PATCHES, temporal, patch, patch, hf._channels(vision), device=device)}
    if vision is not config and isinstance(inputs.get("input_ids"), torch.Tensor):
        made["input_ids"] = _ids_after_image_tokens(config, batch, seq, device, INKLING_PATCHES)
        if "attention_mask" in inputs:
            made["attention_mask"] = torch.ones_like(made["input_ids"])
    return made


def token_modalities(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """Each token's modality (``mm_token_type_ids``: 0 text, 1 image), when the forward asked for it (a repair put it
    in ``plan.extra``): ernie4_5_vl_moe's M-RoPE index needs it next to an image grid (processing_utils.py
    ``create_mm_token_type_ids``: image tokens 1, video tokens 2)."""
    import torch

    from neuronprobe.loaders import hf

    ids = inputs.get("input_ids")
    token = hf._field([config, getattr(config, "text_config", None)], hf._IMAGE_TOKEN_FIELDS)
    if "mm_token_type_ids" not in plan.extra or not isinstance(ids, torch.Tensor) or not isinstance(token, int):
        return None
    return {"mm_token_type_ids": (ids == token).long()}


GRID_RECIPES: tuple[Recipe, ...] = (
    grid_tower_pixels,
    grid_merge_sizes,
    molmo_pooled_crops,
    inkling2_token_blocks,
    image_to_image_grids,
    vq_feature_grid,
    inkling_patch_volumes,
    token_modalities,  # last: over the image tokens the recipes above laid out
)


# --- audio and speech ---------------------------------------------------------------------

AUDIO_FRAMES = 128  # mel frames when nothing fixes the count: a little over a second at a 10 ms hop


def _value_device(device: str) -> str:
    """Where tensors whose values the forward reads (lengths, flags) go: the CPU next to meta inputs."""
    return "cpu" if device == "meta" else device


def _audio_config(config: Any) -> Any:
    return getattr(config, "audio_config", None) or config


def _clap_spectrogram(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """CLAP's audio tower takes log-mel crops as (B, crops, frames, mel bins) next to ``is_longer`` (B, 1):
    one crop, or four (the whole clip shrunk, front, middle, back) when ``enable_fusion``; ``reshape_mel2img``
    stretches the frames to ``spec_size * (spec_size // num_mel_bins)``, its Swin input, which is the frame
    count made here (transformers/models/clap/modeling_clap.py, feature_extraction_clap.py: a fused batch
    has at least one longer clip). Recognised by ``is_longer`` next to ``input_features``."""
    import torch

    if "is_longer" not in params or "input_features" not in params:
        return None
    audio = _audio_config(config)
    mel, spec = int(getattr(audio, "num_mel_bins", 64)), int(getattr(audio, "spec_size", 256))
    fused = bool(getattr(audio, "enable_fusion", False))
    is_longer = torch.zeros(batch, 1, dtype=torch.bool, device=_value_device(device))
    if fused and device != "meta":
        is_longer[0] = True
    frames = spec * max(1, spec // mel)
    return {"input_features": torch.randn(batch, 4 if fused else 1, frames, mel, device=device), "is_longer": is_longer}


def _mel_with_padding_mask(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """Gemma 3n's audio encoder takes ``audio_mel`` (B, frames, mel bins) and ``audio_mel_mask`` (B, frames),
    True where a frame is padding (its parent passes ``~input_features_mask``): all frames valid here
    (transformers/models/gemma3n/modeling_gemma3n.py, Gemma3nAudioEncoder.forward)."""
    import torch

    if "audio_mel" not in params or "audio_mel_mask" not in params:
        return None
    mel = int(getattr(config, "input_feat_size", None) or getattr(config, "num_mel_bins", None) or 128)
    return {
        "audio_mel": torch.randn(batch, AUDIO_FRAMES, mel, device=device),
        "audio_mel_mask": torch.zeros(batch, AUDIO_FRAMES, dtype=torch.bool, device=device),
    }


def _conformer_features_mask(
    inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any
) -> dict[str, Any] | None:
    """Phi-4-multimodal's conformer takes ``hidden_states`` (B, frames, ``input_size`` mel bins) and ``mask``
    (B, frames), True for valid frames (it sums the mask for the lengths; ``time_reduction`` subsamples the
    frames): transformers/models/phi4_multimodal/modeling_phi4_multimodal.py, Phi4MultimodalAudioModel."""
    import torch

    if "mask" not in params or "hidden_states" not in params or not isinstance(getattr(config, "time_reduction", None), int):
        return None
    mel = int(getattr(config, "input_size", None) or 80)
    return {
        "hidden_states": torch.randn(batch, AUDIO_FRAMES, mel, device=device),
        "mask": torch.ones(batch, AUDIO_FRAMES, dtype=torch.bool, device=device),
    }


def _concatenated_features_lengths(
    inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any
) -> dict[str, Any] | None:
    """Qwen-Omni audio encoders take the batch's mel frames joined in one (mel bins, total frames) tensor and
    ``feature_lens`` (B,), each clip's frame count, which they split by (``chunk_and_pad_features``);
    ``aftercnn_lens`` is the count after the stride-2 conv, as the thinker passes it
    (transformers/models/qwen2_5_omni/modeling_qwen2_5_omni.py, qwen3_omni_moe)."""
    import torch

    features = inputs.get("input_features")
    if "feature_lens" not in params or not isinstance(features, torch.Tensor) or features.dim() != 3:
        return None
    mel, frames = (int(features.shape[2]), int(features.shape[1])) if plan.audio_time_major else (int(features.shape[1]), int(features.shape[2]))
    lengths = torch.full((batch,), frames, dtype=torch.long, device=_value_device(device))
    made = {"input_features": torch.randn(mel, batch * frames, device=device), "feature_lens": lengths}
    if "aftercnn_lens" in params:
        made["aftercnn_lens"] = (lengths - 1) // 2 + 1
    return made


def _chunk_sample_lengths(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """dots3's audio encoder takes ``chunk_sample_lengths`` (B,), the waveform samples behind each chunk of
    features: the frames times the config's ``hop_length`` (its conv stem divides them back into frames and
    tokens): transformers/models/dots3_note/modeling_dots3_note.py, Dots3NoteAudioConvStem."""
    import torch

    features = inputs.get("input_features")
    hop = getattr(config, "hop_length", None)
    if "chunk_sample_lengths" not in params or not isinstance(features, torch.Tensor) or not isinstance(hop, int):
        return None
    frames = int(features.shape[1] if plan.audio_time_major else features.shape[-1])
    return {"chunk_sample_lengths": torch.full((features.shape[0],), frames * hop, dtype=torch.long, device=_value_device(device))}


def _codec_semantic_features(
    inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any
) -> dict[str, Any] | None:
    """Codecs with a semantic encoder next to the acoustic one (xcodec2, neucodec) take raw audio (B, 1, samples)
    padded to a multiple of the hop, and the semantic encoder's features (B, samples / hop, its
    ``feature_projection_input_dim``: two 80-bin fbank frames stacked per code); both branches give one frame
    per hop, joined frame by frame (transformers/models/xcodec2/feature_extraction_xcodec2.py, modeling_xcodec2.py
    ``encode``; neucodec the same). Recognised by the two inputs and a semantic sub-config."""
    import torch

    semantic = getattr(config, "semantic_model_config", None)
    if "input_values" not in params or "input_features" not in params or semantic is None:
        return None
    hop = getattr(config, "encoder_hop_length", None) or getattr(config, "hop_length", None)
    width = getattr(semantic, "feature_projection_input_dim", None)
    if not isinstance(hop, int) or not isinstance(width, int) or hop <= 0:
        return None
    from neuronprobe.loaders.hf import AUDIO_SAMPLES

    frames = -(-AUDIO_SAMPLES // hop)
    made = {
        "input_values": torch.randn(batch, 1, frames * hop, device=device),
        "input_features": torch.randn(batch, frames, width, device=device),
    }
    if "input_features_mask" in inputs:
        made["input_features_mask"] = torch.ones(batch, frames, dtype=torch.long, device=device)
    return made


def _cross_attended_text(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """Dia's decoder cross-attends to its text encoder's states, which its forward takes as an optional
    ``encoder_hidden_states`` (B, text length, ``cross_hidden_size``) but reads without a None check
    (transformers/models/dia/modeling_dia.py, DiaCrossAttention: ``cross_attention_states.shape``)."""
    import torch

    width = getattr(config, "cross_hidden_size", None)
    if "encoder_hidden_states" not in params or not isinstance(width, int) or "encoder_hidden_states" in inputs:
        return None
    return {"encoder_hidden_states": torch.randn(batch, seq, width, device=device)}


def _multichannel_decoder_ids(
    inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any
) -> dict[str, Any] | None:
    """Dia's encoder reads text bytes (its ``encoder_config`` vocabulary) and its decoder reads one audio code per
    channel at each step: ``decoder_input_ids`` (B, steps, ``decoder_config.num_channels``), each code below the
    decoder's vocabulary (transformers/models/dia/modeling_dia.py: DiaModel.forward, DiaMultiChannelEmbedding)."""

    from neuronprobe.loaders.hf import text_ids

    decoder = getattr(config, "decoder_config", None)
    channels = getattr(decoder, "num_channels", None)
    if "decoder_input_ids" not in params or not isinstance(channels, int) or channels < 1:
        return None
    codes = text_ids(decoder, batch * channels, seq, device).reshape(batch, channels, seq).transpose(1, 2).contiguous()
    made = {"decoder_input_ids": codes}
    encoder = getattr(config, "encoder_config", None)
    if encoder is not None and "input_ids" in inputs:
        made["input_ids"] = text_ids(encoder, batch, seq, device)
    return made


def _codebooks_in_batch(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """MusicGen's decoder (and MusicGen Melody's) has one embedding table per codebook and takes the codebooks'
    ids flattened into the batch, (B * num_codebooks, steps), which it reshapes to (B, codebooks, steps)
    (transformers/models/musicgen/modeling_musicgen.py, MusicgenDecoder.forward). Recognised by input embeddings
    that are a list of ``num_codebooks`` tables."""
    import torch

    from neuronprobe.loaders.hf import text_ids

    codebooks = getattr(config, "num_codebooks", None)
    try:
        tables = inner.get_input_embeddings()
    except Exception:  # a model without input embeddings
        return None
    if "input_ids" not in inputs or not isinstance(tables, torch.nn.ModuleList) or not isinstance(codebooks, int) or len(tables) != codebooks:
        return None
    ids = text_ids(config, batch * codebooks, int(inputs["input_ids"].shape[-1]), device)
    made = {"input_ids": ids}
    if isinstance(inputs.get("attention_mask"), torch.Tensor):  # a mask per sequence, not per codebook
        made["attention_mask"] = torch.ones(batch, ids.shape[-1], dtype=torch.long, device=device)
    return made


def _depth_decoder_codes(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """Moshi's depth decoder runs once per audio frame over its codebooks: ``input_ids`` (frames, num_codebooks),
    the text token then the audio codes but the last, and the main decoder's ``last_hidden_state`` for that frame,
    (frames, 1, ``input_size``) (transformers/models/moshi/modeling_moshi.py: MoshiForConditionalGeneration.forward
    builds them so for MoshiDepthDecoder)."""
    import torch

    from neuronprobe.loaders.hf import text_ids

    codebooks, width = getattr(config, "num_codebooks", None), getattr(config, "input_size", None)
    if "last_hidden_state" not in params or "input_ids" not in params or not isinstance(codebooks, int) or not isinstance(width, int):
        return None
    return {"input_ids": text_ids(config, batch, codebooks, device), "last_hidden_state": torch.randn(batch, 1, width, device=device)}


def _speech_encoder_inputs(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """A speech encoder-decoder's ``inputs`` is whatever its encoder's main input is (raw audio for a wav2vec2
    encoder, log-mel features for a speech_to_text one), not text: made from the encoder's config
    (transformers/models/speech_encoder_decoder/modeling_speech_encoder_decoder.py: ``self.encoder(inputs, ...)``)."""
    from neuronprobe.loaders.hf import _by_name

    encoder, encoder_config = getattr(inner, "encoder", None), getattr(config, "encoder", None)
    name = getattr(encoder, "main_input_name", None)
    if "inputs" not in params or encoder_config is None or name not in ("input_values", "input_features"):
        return None
    made = _by_name(str(name), encoder_config, batch, seq, device, {})
    return {"inputs": made} if made is not None else None


def _speech_decoder_values(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """SpeechT5's decoder takes ``decoder_input_values``, optional in the signature but read without a None check
    (its causal mask is made from them): log-mel frames (B, steps, ``num_mel_bins``) when a speech prenet turns
    them into states, the states themselves (B, steps, ``hidden_size``) for the bare model, whose encoder takes
    states as its ``input_values`` too (transformers/models/speecht5/modeling_speecht5.py: SpeechT5Model,
    SpeechT5DecoderWithoutPrenet, SpeechT5DecoderWithSpeechPrenet)."""
    import torch

    decoder, encoder = getattr(inner, "decoder", None), getattr(inner, "encoder", None)
    hidden, mel = getattr(config, "hidden_size", None), getattr(config, "num_mel_bins", None)
    if "decoder_input_values" not in params or decoder is None or not isinstance(hidden, int) or not isinstance(mel, int):
        return None
    made = {"decoder_input_values": torch.randn(batch, seq, mel if hasattr(decoder, "prenet") else hidden, device=device)}
    if encoder is not None and not hasattr(encoder, "prenet") and "input_values" in params:
        made["input_values"] = torch.randn(batch, seq, hidden, device=device)
    return made


def _tokenizer_encoder_audio(
    inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any
) -> dict[str, Any] | None:
    """An audio tokenizer's encoder taken alone (VibeVoice's acoustic tokenizer encoder) names its input
    ``hidden_states`` but reads raw audio, (B, ``channels``, samples), a whole number of hops
    (``prod(downsampling_ratios)``): its first conv takes ``channels`` inputs, where its decoder's takes
    ``hidden_size`` latents (transformers/models/vibevoice_acoustic_tokenizer/modeling_vibevoice_acoustic_tokenizer.py,
    VibeVoiceAcousticTokenizerEncoderModel; the full tokenizer takes the same audio as ``input_values``)."""
    import math

    import torch

    from neuronprobe.loaders.hf import AUDIO_SAMPLES

    channels, ratios = getattr(config, "channels", None), getattr(config, "downsampling_ratios", None)
    if "hidden_states" not in params or not isinstance(channels, int) or not isinstance(ratios, (list, tuple)) or not ratios:
        return None
    first = next((m for m in inner.modules() if isinstance(m, torch.nn.Conv1d)), None)
    if first is None or first.in_channels != channels:
        return None
    hop = math.prod(int(r) for r in ratios)
    return {"hidden_states": torch.randn(batch, channels, -(-AUDIO_SAMPLES // hop) * hop, device=device)}


def _code_to_mel_inputs(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """Qwen2.5-Omni's token-to-wave DiT: the talker's codes (B, codes) below ``num_embeds``, a reference mel of the
    speaker (B, frames, ``mel_dim``), the speaker's vector (B, ``enc_emb_dim``): ``Qwen2_5OmniToken2WavModel.forward``
    takes these as ``code``, ``reference_mel``, ``conditioning``; one step of the DiT alone takes the noisy mel
    (B, codes * ``repeats``, ``mel_dim``), the reference mel as ``condition_vector``, the speaker vector repeated
    over the frames as ``speaker_embedding``, and the flow time (B,) (transformers/models/qwen2_5_omni/
    modeling_qwen2_5_omni.py: Qwen2_5OmniToken2WavDiTModel.sample, which makes these for each step)."""
    import torch

    dit = getattr(config, "dit_config", None) or config
    mel, speaker, vocab = (getattr(dit, name, None) for name in ("mel_dim", "enc_emb_dim", "num_embeds"))
    if not all(isinstance(v, int) for v in (mel, speaker, vocab)):
        return None
    assert isinstance(mel, int) and isinstance(speaker, int) and isinstance(vocab, int)
    codes = torch.randint(0, vocab - 1, (batch, seq), device=device) if device != "meta" else torch.zeros(batch, seq, dtype=torch.long, device=device)
    reference = torch.randn(batch, AUDIO_FRAMES, mel, device=device)
    if {"code", "conditioning", "reference_mel"} <= set(params):
        return {"code": codes, "conditioning": torch.randn(batch, speaker, device=device), "reference_mel": reference}
    if {"condition_vector", "speaker_embedding", "quantized_code", "time_step"} <= set(params):
        frames = seq * int(getattr(dit, "repeats", 1) or 1)
        return {
            "hidden_states": torch.randn(batch, frames, mel, device=device),
            "condition_vector": reference,
            "speaker_embedding": torch.randn(batch, frames, speaker, device=device),
            "quantized_code": codes,
            "time_step": torch.rand(batch, device=device),
        }
    return None


def _audio_next_to_video(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """Perception Encoder audio-video takes any two of text, video and audio, and all three for its full
    audio-video-text form; its text-and-video branch reads ``mm_encoder_outputs``, which PeVideoOutput lacks in
    this transformers (transformers/models/pe_audio_video/modeling_pe_audio_video.py, PeAudioVideoModel.forward).
    With video made, the audio goes next to it: raw audio as for its audio tower (the repairs shape it)."""
    from neuronprobe.loaders.hf import _by_name

    if "pixel_values_videos" not in inputs or "input_values" not in params or "input_values" in inputs or "input_ids" not in inputs:
        return None
    audio = _by_name("input_values", getattr(config, "audio_config", None) or config, batch, seq, device, inputs)
    if audio is not None and plan.shape("input_values") is not None:
        from neuronprobe.loaders.hf import _reshaped

        audio = _reshaped(audio, plan.shape("input_values"), device)
    return {"input_values": audio} if audio is not None else None


def _nested_mel_bins(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """Features for a model whose config only nests its encoders' configs (Nemotron 3.5 Transcribe's audio model:
    an ASR encoder and a diarization model, both at ``num_mel_bins`` 128, while the outer config names none) get
    the mel bins the nested configs agree on, in the layout made so far
    (transformers/models/nemotron3_5_transcribe/modeling_nemotron3_5_transcribe.py, configuration_*.py)."""
    import torch

    from neuronprobe.loaders.hf import sub_configs

    features = inputs.get("input_features")
    if not isinstance(features, torch.Tensor) or features.dim() != 3 or "input_features" not in params:
        return None
    if any(getattr(config, name, None) is not None for name in ("num_mel_bins", "feature_size", "input_feat_per_channel")):
        return None
    found = {getattr(sub, "num_mel_bins", None) for sub in sub_configs(config)[1:]} - {None}
    if len(found) != 1 or not isinstance(mel := next(iter(found)), int):
        return None
    time_major = bool(getattr(plan, "audio_time_major", False))
    shape = (features.shape[0], features.shape[1], mel) if time_major else (features.shape[0], mel, features.shape[2])
    return None if tuple(features.shape) == shape else {"input_features": torch.randn(*shape, device=device)}


def _frame_mask_follows_layout(
    inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any
) -> dict[str, Any] | None:
    """A frame mask (``input_features_mask``, ``feature_attention_mask``) is over the features' frames: their
    last dim (B, mel, frames), or the middle one once a repair made them time-major (B, frames, mel), as
    fun_asr_nano's LFR features (B, frames, 560) are (transformers/models/fun_asr_nano/feature_extraction_fun_asr_nano.py)."""
    import torch

    features = inputs.get("input_features")
    if not getattr(plan, "audio_time_major", False) or not isinstance(features, torch.Tensor) or features.dim() != 3:
        return None
    made = {}
    for name in ("input_features_mask", "feature_attention_mask"):
        mask = inputs.get(name)
        if isinstance(mask, torch.Tensor) and mask.dim() == 2 and mask.shape[-1] != features.shape[1]:
            made[name] = torch.ones(features.shape[0], features.shape[1], dtype=mask.dtype, device=device)
    return made or None


AUDIO_RECIPES: tuple[Recipe, ...] = (
    _clap_spectrogram,
    _mel_with_padding_mask,
    _conformer_features_mask,
    _concatenated_features_lengths,
    _chunk_sample_lengths,
    _codec_semantic_features,
    _cross_attended_text,
    _multichannel_decoder_ids,
    _codebooks_in_batch,
    _depth_decoder_codes,
    _speech_encoder_inputs,
    _speech_decoder_values,
    _tokenizer_encoder_audio,
    _code_to_mel_inputs,
    _audio_next_to_video,
    _nested_mel_bins,
    _frame_mask_follows_layout,
)


# --- image-text models (Idefics, Gemma3, LLaVA, MiniCPM, Florence, ...) ------------------


def _pool_factor(config: Any) -> int | None:
    """The pixel shuffle of an idefics3-style connector: how many patches a side fold into one image token."""
    for name in ("scale_factor", "pixel_shuffle_factor"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def _with_image_tokens(config: Any, vision: Any, inputs: dict[str, Any], plan: Any, count: int, device: str) -> dict[str, Any]:
    """``input_ids`` with ``count`` image tokens in front in place of the ones :func:`hf.make_inputs` put there."""

    from neuronprobe.loaders import hf

    ids = inputs.get("input_ids")
    token = hf._field([config], hf._IMAGE_TOKEN_FIELDS)
    if ids is None or not isinstance(token, int) or plan.image_tokens is not None:
        return {}
    made = hf._image_token_count(config, vision)
    text = ids[:, made:]
    return {"input_ids": hf.tokens_before(text, token, count)}


def pixel_shuffle_images(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """Idefics3-style vision-language models (idefics3, smolvlm, modernvbert, ultravbert): images padded to
    (B, images, C, H, W) with a ``pixel_attention_mask`` of (B, images, H, W) over their real pixels, and
    (H / patch / factor)^2 image tokens per image after the connector's pixel shuffle (``scale_factor`` or
    ``pixel_shuffle_factor``). Without the mask, ``get_image_features`` makes one of the size of the real
    images it kept (a data-dependent size: "SymIntArrayRef expected to contain only concrete integers" on
    fake tensors). Learned from transformers/models/idefics3/modeling_idefics3.py (get_image_features,
    Idefics3Connector.pixel_shuffle) and modernvbert/modeling_modernvbert.py."""
    import torch

    pixels = inputs.get("pixel_values")
    factor = _pool_factor(config)
    vision = getattr(config, "vision_config", None)
    patch = getattr(vision, "patch_size", None)
    if "pixel_attention_mask" not in params or factor is None or not isinstance(patch, int) or not isinstance(pixels, torch.Tensor) or pixels.dim() != 5:
        return None
    b, n, _, h, w = pixels.shape
    found: dict[str, Any] = {"pixel_attention_mask": torch.ones(b, n, h, w, dtype=torch.bool, device=device)}
    tokens = n * (h // patch // factor) * (w // patch // factor)
    return {**found, **_with_image_tokens(config, vision, inputs, plan, tokens, device)}


def _mask_required(inner: Any) -> bool:
    """The model's ``get_image_features`` cannot do without ``pixel_attention_mask`` (no default)."""
    import inspect

    for owner in (inner, getattr(inner, "model", None)):
        method = getattr(owner, "get_image_features", None)
        if callable(method):
            try:
                param = inspect.signature(method).parameters.get("pixel_attention_mask")
            except (TypeError, ValueError):
                return False
            return param is not None and param.default is inspect.Parameter.empty
    return False


def image_tiles(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """Tiled documents (granite_docling): pixels as (B, tiles, C, H, W), a ``pixel_attention_mask`` of (B, tiles)
    that says which tiles are real (``get_image_features`` requires it and keeps ``pixel_values[mask]``), and
    ``image_seq_len`` = (image_size / patch)^2 / scale_factor^2 image tokens per tile, the vision tower's own
    connector folding its patches by its ``scale_factor``. Learned from
    transformers/models/granite_docling/modeling_granite_docling.py (GraniteDoclingModel.get_image_features)
    and its image processor (one mask entry per tile)."""
    import torch

    vision = getattr(config, "vision_config", None)
    factor, patch, size = (getattr(vision, n, None) for n in ("scale_factor", "patch_size", "image_size"))
    pixels = inputs.get("pixel_values")
    if "pixel_attention_mask" not in params or not _mask_required(inner) or not isinstance(pixels, torch.Tensor):
        return None
    if not (isinstance(factor, int) and isinstance(patch, int) and isinstance(size, int) and factor > 0 and patch > 0):
        return None
    if pixels.dim() == 4:
        pixels = pixels.unsqueeze(1)  # one tile
    b, tiles = pixels.shape[:2]
    per_tile = (size // patch) ** 2 // factor**2
    found = {"pixel_values": pixels, "pixel_attention_mask": torch.ones(b, tiles, dtype=torch.bool, device=device)}
    return {**found, **_with_image_tokens(config, vision, inputs, plan, tiles * per_tile, device)}


def second_vision_tower(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """Models with two vision towers that read the same image at two sizes (deepseek_vl_hybrid: SigLIP at 384 px
    and a SAM encoder at 1024 px; the forward raises "Both pixel_values and high_res_pixel_values should be
    specified at the same time"): ``<name>_pixel_values`` is made at the size of ``<name>_vision_config``, next
    to the main pixels. Learned from transformers/models/deepseek_vl_hybrid/modeling_deepseek_vl_hybrid.py
    (DeepseekVLHybridModel.forward, get_image_features)."""
    from neuronprobe.loaders import hf

    if "pixel_values" not in inputs:
        return None
    found: dict[str, Any] = {}
    for name in params:
        prefix = name.removesuffix("_pixel_values")
        tower = getattr(config, f"{prefix}_vision_config", None) if prefix != name else None
        if tower is not None and name not in inputs:
            found[name] = hf._pixels(tower, batch, device)
    return found or None


def image_positions_mask(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """Kosmos-2: the image's ``latent_query_num`` embeddings are written into the text at the positions
    ``image_embeds_position_mask`` marks (``inputs_embeds[mask] = image_embeds``: no mask, "'NoneType' object has
    no attribute 'to'"). Its processor lays the text out as ``<image>``, ``latent_query_num`` placeholders,
    ``</image>``, then the words, with the mask 0, 1 * latent_query_num, 0, 0...: the same here, the ids at
    the placeholders being any (they are overwritten). Learned from
    transformers/models/kosmos2/modeling_kosmos2.py (Kosmos2TextTransformer.forward_embedding) and
    kosmos2/processing_kosmos2.py."""
    import torch

    queries = getattr(config, "latent_query_num", None)
    ids = inputs.get("input_ids")
    if "image_embeds_position_mask" not in params or not isinstance(queries, int) or ids is None or "pixel_values" not in inputs:
        return None
    b = ids.shape[0]
    length = queries + 2 + ids.shape[1]
    mask = torch.zeros(b, length, dtype=torch.long, device=device)
    mask[:, 1 : 1 + queries] = 1
    found: dict[str, Any] = {
        "input_ids": torch.cat([torch.zeros(b, queries + 2, dtype=ids.dtype, device=device), ids], dim=1),
        "image_embeds_position_mask": mask,
    }
    if "attention_mask" in inputs:
        found["attention_mask"] = torch.ones(b, length, dtype=torch.long, device=device)
    return found


def aspect_ratio_tiles(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """Mllama's vision tower: each image is cut into tiles after its aspect ratio (one of
    ``supported_aspect_ratios``) and padded to ``max_num_tiles``: pixels (B, images, max_num_tiles, C, H, W),
    ``aspect_ratio_ids`` (B, images), the ratio's index + 1 (0 is padding), and ``aspect_ratio_mask``
    (B, images, max_num_tiles), 1 on real tiles. One square image here: ratio [1, 1], one real tile, as its
    image processor gives for an image of the tile size. Learned from
    transformers/models/mllama/modeling_mllama.py (MllamaVisionModel.forward) and
    mllama/image_processing_mllama.py."""
    import torch

    from neuronprobe.loaders import hf

    ratios = getattr(config, "supported_aspect_ratios", None)
    tiles = getattr(config, "max_num_tiles", None)
    if "aspect_ratio_ids" not in params or "aspect_ratio_mask" not in params or not ratios or not isinstance(tiles, int) or "pixel_values" not in inputs:
        return None
    square = next((i + 1 for i, r in enumerate(ratios) if list(r) == [1, 1]), 1)
    pixels = hf._pixels(config, batch, device)
    mask = torch.zeros(batch, 1, tiles, dtype=torch.long, device=device)
    mask[:, :, 0] = 1
    return {
        "pixel_values": pixels[:, None, None].expand(batch, 1, tiles, *pixels.shape[1:]).contiguous(),
        "aspect_ratio_ids": torch.full((batch, 1), square, dtype=torch.long, device=device),
        "aspect_ratio_mask": mask,
    }


def pooled_image_token(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """Florence-2: its projector puts the mean of the feature grid in front of the grid (``torch.cat([spatial
    mean, grid])``, with a ``visual_temporal_embed``), so an image is grid + 1 tokens ("tokens: 49, features:
    50" at 224 px, 577 at the processor's 768). Learned from transformers/models/florence2/modeling_florence2.py
    (Florence2MultiModalProjector.forward) and processing_florence2.py (image_seq_length)."""
    from neuronprobe.loaders import hf

    vision = getattr(config, "vision_config", None)
    projector = getattr(getattr(inner, "model", inner), "multi_modal_projector", None)
    if vision is None or not hasattr(projector, "visual_temporal_embed") or "pixel_values" not in inputs:
        return None
    return _with_image_tokens(config, vision, inputs, plan, hf._image_token_count(config, vision) + 1, device) or None


def vq_grid_pixels(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """Janus's VQ-VAE: its decoder takes exactly ``num_patches`` x ``num_patches`` image tokens ("Expected
    `image_tokens` to have shape `(batch_size, 1024)`, but got shape `torch.Size([1, 196])`"), and its encoder
    halves the image at every level of ``channel_multiplier`` but the last: pixels of num_patches * 2^(levels - 1)
    a side (512 for the default 32 patches; janus sets num_patches to its 384 px / 16). Learned from
    transformers/models/janus/modeling_janus.py (JanusVQVAE.decode, JanusVQVAEEncoder) and configuration_janus.py."""
    import torch

    patches, levels = getattr(config, "num_patches", None), getattr(config, "channel_multiplier", None)
    pixels = inputs.get("pixel_values")
    if not isinstance(patches, int) or not isinstance(levels, (list, tuple)) or not levels or not isinstance(pixels, torch.Tensor) or pixels.dim() != 4:
        return None
    if getattr(config, "image_size", None) or getattr(config, "resolution", None):  # the config says its size itself
        return None
    side = patches * 2 ** (len(levels) - 1)
    return {"pixel_values": torch.randn(pixels.shape[0], pixels.shape[1], side, side, device=device)}


def patches_to_queries(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """Aria: its projector's cross-attention has query sets only for the patch counts of
    ``projector_patch_to_query_dict`` (1225 and 4900: its image processor's 490 and 980 px in patches of 14;
    "Number of patches 49 not found in patch_to_query_dict"). Pixels of sqrt(count) patches a side for the
    smallest count, with the ``pixel_mask`` of their real pixels, and as many image tokens as that count's
    queries. Learned from transformers/models/aria/modeling_aria.py (AriaProjector.forward,
    AriaModel.get_image_features) and aria/image_processing_aria.py (min and max image size)."""
    import math

    import torch

    from neuronprobe.loaders import hf

    table = getattr(config, "projector_patch_to_query_dict", None)
    vision = getattr(config, "vision_config", None)
    patch = getattr(vision, "patch_size", None)
    if not isinstance(table, dict) or not isinstance(patch, int) or "pixel_values" not in inputs:
        return None
    squares = sorted(int(k) for k in table if math.isqrt(int(k)) ** 2 == int(k))
    if not squares:
        return None
    side = math.isqrt(squares[0]) * patch
    pixels = torch.randn(batch, hf._channels(vision), side, side, device=device)
    found: dict[str, Any] = {"pixel_values": pixels}
    if "pixel_mask" in params:
        found["pixel_mask"] = torch.ones(batch, side, side, dtype=torch.bool, device=device)
    queries = table.get(squares[0], table.get(str(squares[0])))
    if not isinstance(queries, int):
        return None
    return {**found, **_with_image_tokens(config, vision, inputs, plan, queries, device)}


NAVIT_MERGE = 4  # minicpm-v folds the patch grid 2x2 twice (window merger, then downsample MLP)


def navit_row_patches(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """MiniCPM-V's vision towers (minicpmv4_6, minicpmv4_7, minicpm_ocr): every image slice patchified into one
    row, ``pixel_values`` (1, C, patch, sum(h * w) * patch), and ``target_sizes`` (slices, 2) int32 with each
    slice's (h, w) patch grid, which the forward reads as values (``target_sizes.tolist()``: kept on the CPU).
    The grid is the config's image size in patches, cut to a multiple of the two 2x2 merges. The embeddings'
    ``position_ids`` are given precomputed (transformers/vision_utils.py get_vision_nearest_position_ids takes them
    from the kwargs "if precomputed", for torch.export): computed from the grid's values they end the export on the
    meta device. Learned from transformers/models/minicpmv4_6/image_processing_minicpmv4_6.py (reshape_by_patch,
    _preprocess) and modeling_minicpmv4_6.py (MiniCPMV4_6VisionModel.forward, MiniCPMV4_6VisionEmbeddings)."""
    import torch

    patch, size = getattr(config, "patch_size", None), getattr(config, "image_size", None)
    if "target_sizes" not in params or "pixel_values" not in inputs or not isinstance(patch, int) or not isinstance(size, int):
        return None
    if getattr(config, "vision_config", None) is not None:  # the tower itself; the full models keep the inputs they analyse with
        return None
    side = max(NAVIT_MERGE, (size // patch) // NAVIT_MERGE * NAVIT_MERGE)
    channels = int(getattr(config, "num_channels", 3) or 3)
    sizes = torch.tensor([[side, side]] * batch, dtype=torch.int32)
    found = {
        "pixel_values": torch.randn(1, channels, patch, batch * side * side * patch, device=device),
        "target_sizes": sizes if device == "meta" else sizes.to(device),
    }
    try:  # the position ids the embeddings would compute from the grid's values, given as transformers allows for export
        from transformers.vision_utils import get_vision_nearest_position_ids
    except ImportError:  # an older transformers: the forward computes them (a data-dependent read)
        return found
    found["position_ids"] = get_vision_nearest_position_ids(sizes, size // patch).to(device)
    return found


GEMMA4_SOFT_TOKENS = 280  # Gemma4ImageProcessor.max_soft_tokens: an image is at most this many tokens after pooling


def padded_patch_positions(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """Gemma 4's vision tower: an image as flattened patches (B, max_patches, P*P*C) padded to max_patches =
    max_soft_tokens * pooling_kernel_size^2, with ``pixel_position_ids`` (B, max_patches, 2) giving each
    patch's (x, y) and (-1, -1) for padding. A square image as the processor sizes it: the largest side in
    whole pooling windows whose patches fit in max_patches (48 x 48 of 2520 by default). Learned from
    transformers/models/gemma4/image_processing_gemma4.py (convert_image_to_patches, pad_along_first_dim)
    and modeling_gemma4.py (Gemma4VisionModel.forward: output_length from the padded length)."""
    import math

    import torch

    pool, patch = getattr(config, "pooling_kernel_size", None), getattr(config, "patch_size", None)
    if "pixel_position_ids" not in params or "pixel_values" not in inputs or not isinstance(pool, int) or not isinstance(patch, int):
        return None
    max_patches = GEMMA4_SOFT_TOKENS * pool * pool
    side = math.isqrt(max_patches) // pool * pool
    channels = int(getattr(config, "num_channels", 3) or 3)
    pixels = torch.zeros(batch, max_patches, patch * patch * channels, device=device)
    positions = torch.full((batch, max_patches, 2), -1, dtype=torch.long, device=device)
    if device != "meta":
        pixels[:, : side * side] = torch.rand(batch, side * side, patch * patch * channels, device=device)
        ys, xs = torch.meshgrid(torch.arange(side, device=device), torch.arange(side, device=device), indexing="ij")
        positions[:, : side * side] = torch.stack([xs, ys], dim=-1).reshape(side * side, 2)
    return {"pixel_values": pixels, "pixel_position_ids": positions}


def flat_patches_hw_grid(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """Nemotron-H Omni: the patches of every image flattened and concatenated, ``pixel_values`` (total patches,
    C * P * P), with ``image_grid_hw`` (images, 2) their (h, w) patch grids, read as values (``tolist``: kept on
    the CPU); each side a multiple of the pixel shuffle's 1 / ``downsample_ratio``, and h * w * ratio^2 image tokens
    per image. The grid is the vision config's image size in patches, rounded down to that multiple. With no
    image token id there is nowhere to put the features: nothing is made until the config completion gives one. Learned from
    transformers/models/nemotron_h_omni/modeling_nemotron_h_omni.py (get_image_features) and
    image_processing_nemotron_h_omni.py (convert_image_to_patches, get_patch_grid_size)."""
    import torch

    from neuronprobe.loaders import hf

    vision = getattr(config, "vision_config", None)
    ratio = getattr(config, "downsample_ratio", None)
    patch, size = getattr(vision, "patch_size", None), getattr(vision, "image_size", None)
    if "image_grid_hw" not in params or "pixel_values" not in inputs or not isinstance(ratio, float) or not 0 < ratio < 1:
        return None
    if not isinstance(patch, int) or not isinstance(size, int) or not isinstance(hf._field([config], hf._IMAGE_TOKEN_FIELDS), int):
        return None  # no image token id (the default config's): the forward's error gets the config completed first
    merge = round(1 / ratio)
    side = max(merge, (size // patch) // merge * merge)
    width = hf._channels(vision) * patch * patch
    found: dict[str, Any] = {
        "pixel_values": torch.randn(batch * side * side, width, device=device),
        "image_grid_hw": torch.tensor([[side, side]] * batch, device="cpu" if device == "meta" else device),
    }
    return {**found, **_with_image_tokens(config, vision, inputs, plan, side * side // (merge * merge), device)}


def patches_then_queries(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """DeepSeek-OCR-2's vision encoder: ``inputs_embeds`` are the SAM encoder's image patches followed by as many
    learned queries (144 + 144 at 768 px, 256 + 256 at 1024 px), and ``num_patches`` (a Python int) says where
    the patches end: attention is bidirectional over them and causal over the queries. Here half the sequence
    is patches. Learned from transformers/models/deepseek_ocr2/modeling_deepseek_ocr2.py
    (DeepseekOcr2VisionModel.forward, DeepseekOcr2VisionEncoder.forward)."""
    import inspect

    embeds = inputs.get("inputs_embeds")
    param = params.get("num_patches") if hasattr(params, "get") else None
    if param is None or param.annotation not in (int, "int") or embeds is None or "num_patches" in inputs:
        return None
    return {"num_patches": max(1, embeds.shape[1] // 2)} if param.default is inspect.Parameter.empty else None


def resampler_context(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """Idefics2's perceiver resampler: ``context`` is the image's patch features after the modality projection,
    (B, patches, hidden_size), that ``resampler_n_latents`` latents attend to, with an ``attention_mask`` over the
    patches; not token ids. Learned from transformers/models/idefics2/modeling_idefics2.py
    (Idefics2PerceiverResampler.forward, Idefics2Connector.forward)."""
    import torch

    from neuronprobe.loaders import hf

    if "context" not in params or not isinstance(getattr(config, "resampler_n_latents", None), int):
        return None
    found: dict[str, Any] = {"context": torch.randn(batch, seq, hf._width(config), device=device)}
    if "attention_mask" in params:
        found["attention_mask"] = torch.ones(batch, seq, dtype=torch.long, device=device)
    return found


QFORMER_VIDEO_FRAMES = 4  # instructblipvideo's processor: "InstrucBLIP works with 4 frames only"


def qformer_video(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """InstructBLIP-Video: 4 frames (B, 4, C, H, W), each read by the Q-Former into ``num_query_tokens`` queries
    that replace as many ``video_token_id`` tokens of the text per frame, with the Q-Former's own prompt
    ids next to them. Its forward reads ``input_ids`` with no None check. Without a video token id (the default
    config leaves it unset) it has nothing to place: the config completion gives one first. Learned from
    transformers/models/instructblipvideo/modeling_instructblipvideo.py (forward: frames into the batch, queries
    reshaped to num_query_tokens * frames) and processing_instructblipvideo.py (num_query_tokens * 4 video tokens)."""
    import torch

    from neuronprobe.loaders import hf

    queries = getattr(config, "num_query_tokens", None)
    token = getattr(config, "video_token_id", None)
    pixels = inputs.get("pixel_values")
    if "qformer_input_ids" not in params or "input_ids" not in params or not isinstance(queries, int) or not isinstance(token, int):
        return None
    if not isinstance(pixels, torch.Tensor) or pixels.dim() != 5:
        return None
    frames = QFORMER_VIDEO_FRAMES
    text = hf.text_ids(config, batch, seq, device)
    return {
        "pixel_values": pixels[:, :1].expand(pixels.shape[0], frames, *pixels.shape[2:]).contiguous(),
        "input_ids": hf.tokens_before(text, token, queries * frames),
    }


IMAGE_TEXT_RECIPES: tuple[Recipe, ...] = (
    pixel_shuffle_images,
    image_tiles,
    second_vision_tower,
    image_positions_mask,
    aspect_ratio_tiles,
    pooled_image_token,
    vq_grid_pixels,
    qformer_video,
    patches_to_queries,
    navit_row_patches,
    padded_patch_positions,
    flat_patches_hw_grid,
    patches_then_queries,
    resampler_context,
)


# --- other families -----------------------------------------------------------------------


def _ids(config: Any, shape: tuple[int, ...], device: str) -> Any:
    """Token ids of ``shape`` below the config's vocabulary (and :data:`hf.TEXT_ID_LIMIT`): random on the CPU, zeros on meta."""
    import torch

    from neuronprobe.loaders import hf

    limit = max(2, min(hf._vocab(config), hf.TEXT_ID_LIMIT))
    if device == "meta":
        return torch.zeros(shape, dtype=torch.long, device=device)
    return torch.randint(2, limit, shape, device=device)


def language_adapter_inputs(
    inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any
) -> dict[str, Any] | None:
    """X-MOD's language adapters: without ``lang_ids`` (one adapter index per sequence, shape (batch,)) the forward
    raises "Input language unknown" unless a default language was set on the config. The index of the config's
    first language (``languages[0]``, an adapter every layer has), as ``XmodModel.forward`` makes it from
    ``default_language`` (transformers/models/xmod/modeling_xmod.py)."""
    import torch

    if "lang_ids" not in params or not getattr(config, "languages", None) or "lang_ids" in inputs:
        return None
    return {"lang_ids": torch.zeros(batch, dtype=torch.long, device=device)}


def trajectory_inputs(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """Decision Transformer: a trajectory of ``seq`` steps, (B, T, state_dim) states, (B, T, act_dim) actions,
    (B, T, 1) returns-to-go and rewards, (B, T) timesteps below ``max_ep_len`` and a (B, T) mask; the forward
    embeds each without a None check (transformers/models/decision_transformer/modeling_decision_transformer.py).
    Three tokens a step: the steps are kept within the GPT-2 position table."""
    import torch

    if not {"states", "actions", "returns_to_go", "timesteps"} <= set(params):
        return None
    state_dim, act_dim = getattr(config, "state_dim", None), getattr(config, "act_dim", None)
    if not (isinstance(state_dim, int) and isinstance(act_dim, int)):
        return None
    positions = int(getattr(config, "n_positions", None) or getattr(config, "max_position_embeddings", None) or 3 * seq)
    steps = max(1, min(seq, positions // 3))
    episode = int(getattr(config, "max_ep_len", None) or steps)
    timesteps = torch.arange(steps, device=device).clamp(max=episode - 1) if device != "meta" else torch.zeros(steps, dtype=torch.long, device=device)
    return {
        "states": torch.randn(batch, steps, state_dim, device=device),
        "actions": torch.randn(batch, steps, act_dim, device=device),
        "rewards": torch.randn(batch, steps, 1, device=device),
        "returns_to_go": torch.randn(batch, steps, 1, device=device),
        "timesteps": timesteps.long().expand(batch, steps).contiguous(),
        "attention_mask": torch.ones(batch, steps, dtype=torch.long, device=device),
    }


def decision_inputs(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """Decision heads (``DecisionMixin``: jev): one prompt with, per question, ``marks`` (the number of tokens before
    its ``<|mark|>``, read at ``marks - 1``), ``num_options`` and ``question_type_ids`` (an index into
    ``Question.questions_types``), each (1, questions), as ``DecisionMixin.decide`` makes them
    (transformers/decision/modeling_utils.py, transformers/models/jev/modeling_jev.py). One true/false question
    (type 0, ``noul``, two options) read at the last token."""
    import torch

    if not {"marks", "num_options", "question_type_ids"} <= set(params) or "input_ids" not in inputs:
        return None
    length = int(inputs["input_ids"].shape[-1])
    one: dict[str, Any] = {name: inputs[name][:1] for name in ("input_ids", "attention_mask") if name in inputs}  # a batch of one prompt
    return {
        **one,
        "marks": torch.tensor([[length]], device=device),
        "num_options": torch.tensor([[2]], device=device),
        "question_type_ids": torch.tensor([[0]], device=device),
    }


def retrieved_docs_inputs(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """RAG without a retriever: the forward asserts ``context_input_ids``, ``context_attention_mask`` (B * n_docs,
    length) in the generator's vocabulary and ``doc_scores`` (B, n_docs) are passed, what ``RagRetriever`` and the
    question encoder's dot products give (transformers/models/rag/modeling_rag.py). ``n_docs`` from the config;
    the contexts as long as the question (up to ``max_combined_length``)."""
    import torch

    if not {"context_input_ids", "doc_scores"} <= set(params):
        return None
    docs = getattr(config, "n_docs", None)
    if not isinstance(docs, int) or docs < 1:
        return None
    generator = getattr(config, "generator", None) or config
    length = min(seq, int(getattr(config, "max_combined_length", None) or seq))
    return {
        "context_input_ids": _ids(generator, (batch * docs, length), device),
        "context_attention_mask": torch.ones(batch * docs, length, dtype=torch.long, device=device),
        "doc_scores": torch.randn(batch, docs, device=device),
    }


OMDET_CLASSES = 2  # two class prompts for the one task ("Detect cat, remote.")
OMDET_TEXT = 77  # OmDetTurboProcessor pads class and task prompts to max_length=77


def class_prompt_inputs(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """OmDet-Turbo: class prompts flattened over the batch (B * classes, 77), a task prompt per image (B, 77), both
    with masks, and ``classes_structure`` (B,), the class count of each task, whose values the forward iterates
    (so it stays on the CPU next to meta weights). Shapes from ``OmDetTurboProcessor`` (padding to max_length 77)
    and ``OmDetTurboForObjectDetection.forward`` (transformers/models/omdet_turbo/)."""
    import torch

    if not {"classes_input_ids", "tasks_input_ids", "classes_structure"} <= set(params):
        return None
    text = getattr(config, "text_config", None) or config
    length = min(OMDET_TEXT, int(getattr(text, "max_position_embeddings", None) or OMDET_TEXT))
    mask = torch.ones(batch * OMDET_CLASSES, length, dtype=torch.long, device=device)
    task_mask = torch.ones(batch, length, dtype=torch.long, device=device)
    return {
        "classes_input_ids": _ids(text, (batch * OMDET_CLASSES, length), device),
        "classes_attention_mask": mask,
        "tasks_input_ids": _ids(text, (batch, length), device),
        "tasks_attention_mask": task_mask,
        "classes_structure": torch.full((batch,), OMDET_CLASSES, dtype=torch.long, device=_value_device(device)),
    }


AMINO_ACIDS = "ACDEFGHIKLMNPQRSTVWY"  # the twenty standard residues, cycled into a protein of any length


def protein_structure_inputs(
    inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any
) -> dict[str, Any] | None:
    """Structure models whose forward takes featurised atoms (ESMFold2: ``atom_inputs``, residue, chain and entity
    ids, token bonds): the family's own featuriser, ``protein_utils.prepare_protein_features(sequence)``, on a
    protein of ``seq`` residues, with the per-atom tensors bundled into the forward's ``atom_inputs`` class, as
    ``EsmFold2FoldingMixin.fold`` does (transformers/models/esmfold2/protein_utils.py, generation_esmfold2.py)."""
    import dataclasses
    import importlib
    import sys

    if "atom_inputs" not in params:
        return None
    package = type(inner).__module__.rpartition(".")[0]
    try:
        featurise = importlib.import_module(f"{package}.protein_utils").prepare_protein_features
    except (ImportError, AttributeError):
        return None
    bundle = (
        getattr(sys.modules[type(inner).__module__], params["atom_inputs"].annotation, None)
        if isinstance(params["atom_inputs"].annotation, str)
        else params["atom_inputs"].annotation
    )
    if not (isinstance(bundle, type) and dataclasses.is_dataclass(bundle)):
        return None
    sequence = (AMINO_ACIDS * (seq // len(AMINO_ACIDS) + 1))[: max(1, seq)]
    features = featurise(sequence, device="cpu")
    if batch != 1:
        features = {k: v.expand(batch, *v.shape[1:]).contiguous() for k, v in features.items()}
    atom_fields = {f.name for f in dataclasses.fields(bundle)}
    made: dict[str, Any] = {"atom_inputs": bundle(**{k: features[k].to(device) for k in atom_fields})}
    made.update({k: v.to(device) for k, v in features.items() if k in params and k not in atom_fields})
    return made


def draft_context_inputs(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """DFlash draft models (muse_glimmer_assistant): ``noise_embeds`` (B, block_size, hidden), the embeddings of the
    block to denoise, and ``context_hidden_states`` (B, context, hidden * len(target_layer_ids)), the target model's
    hidden states at ``target_layer_ids`` concatenated, which the draft's ``encoder`` projects back to its width
    (transformers/models/muse_glimmer_assistant/modeling_muse_glimmer_assistant.py)."""
    import torch

    if not {"noise_embeds", "context_hidden_states"} <= set(params):
        return None
    layers, hidden = getattr(config, "target_layer_ids", None), getattr(config, "hidden_size", None)
    if not layers or not isinstance(hidden, int):
        return None
    block = int(getattr(config, "block_size", None) or seq)
    return {
        "noise_embeds": torch.randn(batch, block, hidden, device=device),
        "context_hidden_states": torch.randn(batch, seq, hidden * len(layers), device=device),
    }


def shared_kv_inputs(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """Gemma 4 assistants (gemma4_unified_assistant): drafters whose every layer reuses the target model's keys and
    values. ``shared_kv_states`` maps each layer type to the (keys, values) of the target's last layer of that type,
    (B, kv heads, context, head_dim) with the per-layer head_dim and kv heads of that type's layers, and
    ``inputs_embeds`` is (B, L, 2 * backbone_hidden_size), the target's embedding and last hidden state side by side
    for ``pre_projection`` (transformers/models/gemma4_unified_assistant/modeling_gemma4_unified_assistant.py,
    gemma4_unified/modeling_gemma4_unified.py: ``Gemma4UnifiedTextAttention``)."""
    import torch

    backbone = getattr(config, "backbone_hidden_size", None)
    if not {"shared_kv_states", "inputs_embeds"} <= set(params) or not isinstance(backbone, int):
        return None
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    layer_types = list(getattr(text, "layer_types", None) or [])
    layers = getattr(text, "per_layer_config", None)
    if not layer_types or layers is None:
        return None
    shared: dict[str, Any] = {}
    for kind in dict.fromkeys(layer_types):
        layer = layers[layer_types.index(kind)]
        shape = (batch, int(layer.num_key_value_heads), seq, int(layer.head_dim))
        shared[kind] = (torch.randn(shape, device=device), torch.randn(shape, device=device))
    return {"inputs_embeds": torch.randn(batch, seq, 2 * backbone, device=device), "shared_kv_states": shared}


BLT_PATCH = 4  # BltConfig.patch_size's default: bytes per patch when patches have a fixed length


def byte_patch_inputs(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """BLT's local encoder and decoder, between bytes and patches: the encoder takes ``patch_ids`` (B, L), the patch of
    each byte, ``num_patches`` and the patches-as-queries cross-attention mask; the decoder takes byte states
    ``inputs_embeds`` (B, L, hidden), the global model's ``patch_embeds`` (B, patches, hidden_size_global) and the
    bytes-as-queries mask. Made as ``BltModel.forward`` makes them for fixed-length patches of ``patch_size``
    bytes, with the family's own ``_prepare_patch_cross_attention_mask`` (transformers/models/blt/modeling_blt.py)."""
    import sys

    import torch

    encoder = {"patch_ids", "num_patches"} <= set(params)
    decoder = "patch_embeds" in params and not encoder and "inputs_embeds" in params
    mask_for = getattr(sys.modules[type(inner).__module__], "_prepare_patch_cross_attention_mask", None)
    if not (encoder or decoder) or mask_for is None or "encoder_attention_mask" not in params:
        return None
    patch = int(getattr(config, "patch_size", None) or BLT_PATCH)
    patches = -(-seq // patch)
    patch_ids = (torch.arange(seq, device=device) // patch).unsqueeze(0).expand(batch, seq).contiguous()
    k = int(getattr(config, "cross_attn_k", None) or 1)
    mask = mask_for(patch_ids=patch_ids, num_patches=patches, sequence_length=seq, patches_as_queries=encoder, cross_attn_k=k)
    made: dict[str, Any] = {"encoder_attention_mask": mask[0] if isinstance(mask, tuple) else mask}
    if encoder:
        made.update(patch_ids=patch_ids, num_patches=patches)
    else:
        width = int(getattr(config, "hidden_size_global", None) or config.hidden_size)
        made.update(
            inputs_embeds=torch.randn(batch, seq, config.hidden_size, device=device),
            patch_embeds=torch.randn(batch, patches, width, device=device),
        )
    return made


def windowed_backbone_pixels(
    inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any
) -> dict[str, Any] | None:
    """Detectors on a windowed ViT backbone (rf_detr): the patch grid is cut into ``num_windows`` windows a side, so
    the image side must be a multiple of ``patch_size * windows``; the backbone's pretraining size (rf_detr's
    DINOv2 518) is not, and the forward's ``view`` fails. Pixels (and their mask) at the next multiple up, 560 for
    rf_detr as its checkpoints run (transformers/models/rf_detr/modeling_rf_detr.py ``window_partition``; lw_detr
    counts windows in all, ``num_windows_side`` a side)."""
    import torch

    backbone = getattr(config, "backbone_config", None) or config
    windows = getattr(backbone, "num_windows_side", None) or getattr(backbone, "num_windows", None)
    patch = getattr(backbone, "patch_size", None)
    pixels = inputs.get("pixel_values")
    if not (isinstance(windows, int) and windows > 1 and isinstance(patch, int) and isinstance(pixels, torch.Tensor) and pixels.dim() == 4):
        return None
    step = patch * windows
    h, w = (int(d) for d in pixels.shape[-2:])
    side_h, side_w = -(-h // step) * step, -(-w // step) * step
    if (side_h, side_w) == (h, w):
        return None
    made: dict[str, Any] = {"pixel_values": torch.randn(*pixels.shape[:-2], side_h, side_w, device=device)}
    if isinstance(mask := inputs.get("pixel_mask"), torch.Tensor):
        made["pixel_mask"] = torch.ones(*mask.shape[:-2], side_h, side_w, dtype=mask.dtype, device=device)
    return made


def task_prompt_inputs(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """OneFormer's task prompt ("the task is semantic"): ``task_inputs`` (B, task_seq_len), CLIP token ids padded to
    ``task_seq_len`` by ``OneFormerProcessor``, which the task MLP reads as floats
    (transformers/models/oneformer/modeling_oneformer.py, processing_oneformer.py)."""
    length = getattr(config, "task_seq_len", None)
    if "task_inputs" not in params or not isinstance(length, int) or "task_inputs" in inputs:
        return None
    vocab = getattr(config, "text_encoder_vocab_size", None)
    return {"task_inputs": _ids(SimpleNamespace(vocab_size=vocab) if isinstance(vocab, int) else config, (batch, length), device)}


def action_expert_inputs(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """Vision-language-action models (PI0): the VLM prefix, ``input_ids`` with one image token per patch feature of
    each camera, ``pixel_values`` (B, cameras, C, H, W) with ``pixel_attention_mask`` (B, cameras), and the action
    expert's suffix ``action_embeds`` (B, 1 + chunk_size, dit hidden), the state token and the noisy action chunk
    ``PI0ForConditionalGeneration`` embeds (transformers/models/pi0/modeling_pi0.py: ``embed_prefix``, ``forward``).
    One camera."""
    import torch

    from neuronprobe.loaders import hf

    vlm, dit, chunk = getattr(config, "vlm_config", None), getattr(config, "dit_config", None), getattr(config, "chunk_size", None)
    if not {"action_embeds", "pixel_attention_mask"} <= set(params) or vlm is None or dit is None or not isinstance(chunk, int):
        return None
    vision = getattr(vlm, "vision_config", None) or vlm
    image_token = getattr(vlm, "image_token_id", None)
    if not isinstance(image_token, int):
        return None
    count = hf._image_token_count(vlm, vision)
    ids = hf.text_ids(vlm, batch, seq, device)
    ids = hf.tokens_before(ids, image_token, count)
    return {
        "input_ids": ids,
        "attention_mask": torch.ones(batch, ids.shape[1], dtype=torch.long, device=device),
        "pixel_values": hf._pixels(vision, batch, device).unsqueeze(1),
        "pixel_attention_mask": torch.ones(batch, 1, dtype=torch.bool, device=device),
        "action_embeds": torch.randn(batch, 1 + chunk, int(dit.hidden_size), device=device),
    }


def lagged_forecast_inputs(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """Probabilistic forecasters with lagged inputs (TimeSeriesTransformer, Autoformer, Informer): the past is
    ``context_length + max(lags_sequence)`` steps (their ``_past_length``), with ``num_time_features`` time features
    per step and an observed mask; the future the decoder is taught on is ``prediction_length`` steps of values and
    time features; static features when the config declares them; as ``TimeSeriesTransformerModel.forward``
    documents them (transformers/models/time_series_transformer/modeling_time_series_transformer.py)."""
    import torch

    lags = getattr(config, "lags_sequence", None)
    if "past_time_features" not in params or not lags or not isinstance(getattr(config, "context_length", None), int):
        return None
    past, future = int(config.context_length) + max(lags), int(config.prediction_length)
    channels = [int(config.input_size)] if int(getattr(config, "input_size", 1)) > 1 else []
    times = int(getattr(config, "num_time_features", 0))
    made = {
        "past_values": torch.randn(batch, past, *channels, device=device),
        "past_time_features": torch.randn(batch, past, times, device=device),
        "past_observed_mask": torch.ones(batch, past, *channels, device=device),
    }
    if "future_values" in params:
        made["future_values"] = torch.randn(batch, future, *channels, device=device)
        made["future_time_features"] = torch.randn(batch, future, times, device=device)
    if int(getattr(config, "num_static_categorical_features", 0)):
        made["static_categorical_features"] = torch.zeros(batch, int(config.num_static_categorical_features), dtype=torch.long, device=device)
    if int(getattr(config, "num_static_real_features", 0)):
        made["static_real_features"] = torch.randn(batch, int(config.num_static_real_features), device=device)
    return made


def codebook_decoder_ids(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """A text-to-music model whole (``MusicgenForConditionalGeneration``, MusicGen Melody's): its text encoder reads
    ``input_ids`` and its decoder ``decoder_input_ids`` of shape (B * ``decoder.num_codebooks``, steps), the
    codebooks flattened into the batch, in the decoder's vocabulary (transformers/models/musicgen/
    modeling_musicgen.py, MusicgenForConditionalGeneration.forward's docstring)."""
    from neuronprobe.loaders.hf import text_ids

    decoder = getattr(config, "decoder", None)
    codebooks = getattr(decoder, "num_codebooks", None)
    if "decoder_input_ids" not in params or not isinstance(codebooks, int) or codebooks < 1:
        return None
    return {"decoder_input_ids": text_ids(decoder, batch * codebooks, seq, device)}


def time_condition_inputs(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """A decoder whose layers are conditioned on a time embedding passed through the forward's keywords: Voxtral
    Realtime's text model scales each layer's normed states by ``1 + ada_rms_norm(t_cond)``, and its parent passes
    ``t_cond``, the sinusoidal embedding of the delay (``default_num_delay_tokens``) of shape (1, 1, hidden),
    broadcast over the batch (transformers/models/voxtral_realtime/modeling_voxtral_realtime.py,
    VoxtralRealtimeModel.forward and VoxtralRealtimeTimeEmbedding). Recognised by a layer taking ``t_cond``."""
    import inspect

    import torch

    if "kwargs" not in params or "t_cond" in inputs or not isinstance(getattr(config, "hidden_size", None), int):
        return None
    try:  # a model that makes t_cond itself (VoxtralRealtimeModel) passes it on: not this family's part
        if "t_cond" in inspect.getsource(type(inner).forward):
            return None
    except (OSError, TypeError):
        return None
    classes = {type(m) for m in inner.modules()}
    if not any("t_cond" in inspect.signature(cls.forward).parameters for cls in classes if cls.forward is not torch.nn.Module.forward):
        return None
    dim = int(config.hidden_size)
    from neuronprobe.loaders.hf import _ancestor_configs

    delays = [d for c in (config, *_ancestor_configs(type(config))) if isinstance(d := getattr(c, "default_num_delay_tokens", None), int)]
    delay = float(delays[0] if delays else 1)  # the parent config's default (6), as its forward falls back to
    inv_freq = torch.exp(-torch.log(torch.tensor(10000.0)) * torch.arange(dim // 2).float() / (dim // 2))
    emb = delay * inv_freq
    return {"t_cond": torch.cat((emb.cos(), emb.sin()))[None, None].to(device)}


def diffusion_step_inputs(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any] | None:
    """A diffusion prediction head run one denoising step at a time (VibeVoice's ``diffusion_head(noisy_images,
    timesteps, condition)``): per frame a noisy latent (``latent_size``), its timestep (floats, as the sampling loop
    passes ``timestep.repeat(n).to(latent)``) and the language model's hidden state as the condition
    (``hidden_size``), as VibeVoiceForConditionalGeneration's sampling loop calls it (transformers/models/
    vibevoice/generation_vibevoice.py)."""
    import torch

    latent, hidden = getattr(config, "latent_size", None), getattr(config, "hidden_size", None)
    if not {"noisy_images", "timesteps", "condition"} <= set(params) or not isinstance(latent, int) or not isinstance(hidden, int):
        return None
    return {
        "noisy_images": torch.randn(batch, latent, device=device),
        "timesteps": torch.full((batch,), 500.0, device=device),  # a mid-schedule step of its 1000-step DDPM
        "condition": torch.randn(batch, hidden, device=device),
    }


OTHER_RECIPES: tuple[Recipe, ...] = (
    action_expert_inputs,
    task_prompt_inputs,
    windowed_backbone_pixels,
    byte_patch_inputs,
    shared_kv_inputs,
    language_adapter_inputs,
    trajectory_inputs,
    decision_inputs,
    retrieved_docs_inputs,
    class_prompt_inputs,
    protein_structure_inputs,
    draft_context_inputs,
    lagged_forecast_inputs,
    codebook_decoder_ids,
    time_condition_inputs,
    diffusion_step_inputs,
)


RECIPES: tuple[Recipe, ...] = (*SAM_RECIPES, *GRID_RECIPES, *AUDIO_RECIPES, *IMAGE_TEXT_RECIPES, *OTHER_RECIPES)


def family_inputs(inner: Any, config: Any, params: Any, batch: int, seq: int, device: str, inputs: dict[str, Any], plan: Any) -> dict[str, Any]:
    """The inputs every recipe that knows this model's family sets (later recipes win on a clash)."""
    made: dict[str, Any] = {}
    for recipe in RECIPES:
        found = recipe(inner, config, params, batch, seq, device, {**inputs, **made}, plan)
        if found:
            fired.recipe(recipe.__name__)  # the zoo tier's record of which recipes a real type exercises
            made.update(found)
    return made
