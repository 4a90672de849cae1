"""Segment-anything inputs: prompts next to image embeddings."""

from __future__ import annotations

from typing import Any

from neuronprobe.loaders.hf.build import StatefulInput
from neuronprobe.loaders.hf.config import sub_configs
from neuronprobe.loaders.hf.inputs.primitives import text_ids
from neuronprobe.loaders.hf.inputs.recipes import RecipeContext, recipe

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


@recipe(priority=1000, needs=("pixel_values", "input_points", "input_labels"))
def sam_image_and_point(ctx: RecipeContext) -> dict[str, Any] | None:
    """A SAM-family model on an image (sam, sam_hq, sam2, edgetam, sam3_tracker; the forward takes ``pixel_values``
    and ``input_points``): pixels at the prompt encoder's ``image_size``, the size the processor gives, since
    SAM2 and EdgeTAM reshape their feature maps to the config's ``backbone_feature_sizes`` (modeling_sam2.py
    ``Sam2Model.forward``: ``feat.view(batch_size, -1, *feat_size)``), and one point prompt, as in the model's
    documented use (``processor(images=raw_image, input_points=[[[400, 650]]])``)."""
    import torch

    prompt = _prompt_config(ctx.config)
    if prompt is None:
        return None
    side, _ = _sam_sizes(prompt)
    made = _point_prompt(ctx.batch, side, ctx.device)
    if ctx.plan is None or ctx.plan.shape("pixel_values") is None:  # a size the forward's own error asked for stays
        channels = int(getattr(getattr(ctx.config, "vision_config", None), "num_channels", 3) or 3)
        made["pixel_values"] = torch.randn(ctx.batch, channels, side, side, device=ctx.device)
    return made


@recipe(priority=1010)
def sam_prompts(ctx: RecipeContext) -> dict[str, Any] | None:
    """A SAM prompt encoder on its own (sam2_prompt_encoder, edgetam_prompt_encoder, the video trackers'; its forward
    takes ``input_points``, ``input_labels``, ``input_boxes`` and ``input_masks`` and no image): a point, a box
    around it and a low-resolution mask, so every prompt path runs (modeling_sam2.py ``Sam2PromptEncoder.forward``:
    points padded only without a box, boxes (B, prompts, 4) as two corners, masks at ``mask_input_size``)."""
    import torch

    prompt = _prompt_config(ctx.config)
    wanted = ("input_points", "input_labels", "input_boxes", "input_masks")
    if prompt is None or not all(name in ctx.params for name in wanted) or "pixel_values" in ctx.params:
        return None
    side, mask = _sam_sizes(prompt)
    box = torch.tensor([side / 4, side / 4, 3 * side / 4, 3 * side / 4], device=ctx.device)
    return {
        **_point_prompt(ctx.batch, side, ctx.device),
        "input_boxes": box.expand(ctx.batch, 1, 4).contiguous(),
        "input_masks": torch.randn(ctx.batch, 1, mask, mask, device=ctx.device),
    }


@recipe(priority=1020)
def sam_mask_embedding(ctx: RecipeContext) -> dict[str, Any] | None:
    """SAM's mask embedding (hf:sam_prompt_encoder and hf:sam_hq_prompt_encoder build ``SamMaskEmbedding``, the one
    class that takes the prompt-encoder config: ``SamPromptEncoder`` takes the whole ``SamConfig``): its forward
    takes ``masks``, the mask prompt as floats at ``mask_input_size`` (B, 1, 256, 256) (modeling_sam.py, the
    processor's ``mask_pad_size``)."""
    import torch

    prompt = _prompt_config(ctx.config)
    if prompt is None or list(ctx.params) != ["masks"]:
        return None
    _, mask = _sam_sizes(prompt)
    return {"masks": torch.randn(ctx.batch, 1, mask, mask, device=ctx.device)}


@recipe(priority=1030)
def sam3_box_prompt(ctx: RecipeContext) -> dict[str, Any] | None:
    """SAM3's detector next to its text prompt takes box prompts (its forward takes ``input_boxes`` and
    ``input_boxes_labels``): one positive box, normalised (cx, cy, w, h), as Sam3Processor gives for
    ``input_boxes=[[[x0, y0, x1, y1]]], input_boxes_labels=[[1]]``. Only with a box does ``Sam3Model.forward`` run
    its geometry encoder (modeling_sam3.py: ``has_geometry_prompts = input_boxes is not None and
    input_boxes.numel() > 0``), so sam3_geometry_encoder's inputs are recorded there."""
    import torch

    if not all(name in ctx.params for name in ("pixel_values", "input_boxes", "input_boxes_labels")) or "input_points" in ctx.params:
        return None
    return {
        "input_boxes": torch.full((ctx.batch, 1, 4), 0.5, device=ctx.device),
        "input_boxes_labels": torch.ones(ctx.batch, 1, dtype=torch.long, device=ctx.device),
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


@recipe(priority=1040)
def sam_video_session(ctx: RecipeContext) -> dict[str, Any] | None:
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

    session_class = _session_class(ctx.inner, ctx.params)
    side = getattr(ctx.config, "image_size", None)
    points = hasattr(session_class, "add_point_inputs")
    if session_class is None or not isinstance(side, int) or not (points or hasattr(session_class, "add_prompt")):
        return None
    frames = torch.randn(VIDEO_FRAMES, 3, side, side, device=ctx.device)
    session = session_class(
        video=frames,
        video_height=side,
        video_width=side,
        inference_device=ctx.device,
        inference_state_device=ctx.device,
        video_storage_device=ctx.device,
        dtype=torch.float32,
    )
    if points:
        for obj_id in range(1, ctx.batch + 1):
            prompt = {
                "point_coords": torch.full((1, 1, 1, 2), side / 2, device=ctx.device),
                "point_labels": torch.ones(1, 1, 1, dtype=torch.int32, device=ctx.device),
            }
            session.add_point_inputs(session.obj_id_to_idx(obj_id), 0, prompt)
        session.obj_with_new_inputs = list(range(1, ctx.batch + 1))
    else:
        text = next((sub for sub in sub_configs(ctx.config) if hasattr(sub, "vocab_size") and hasattr(sub, "max_position_embeddings")), ctx.config)
        prompt_id = session.add_prompt("object")
        session.prompt_input_ids[prompt_id] = text_ids(text, 1, TEXT_PROMPT_TOKENS, ctx.device)
        session.prompt_attention_masks[prompt_id] = torch.ones(1, TEXT_PROMPT_TOKENS, dtype=torch.long, device=ctx.device)
    return {"inference_session": StatefulInput(session), "frame_idx": 0}
