"""Input primitives: the plan the repairs refine, tensors by name, text ids, pixels, audio."""

from __future__ import annotations

import dataclasses
import inspect
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from neuronprobe.loaders.hf.build import WRAPPER_KEYWORDS, entry_params
from neuronprobe.loaders.hf.config import (
    ALT_AUDIO_FRAMES,
    AUDIO_SAMPLES,
    DEFAULT_CHANNELS,
    DEFAULT_IMAGE_SIZE,
    DEFAULT_MEL_BINS,
    IMAGE_COUNT_FIELDS,
    LONG_SERIES,
    QWEN_GRID,
    SPECIAL_TOKEN_FIELDS,
    TEXT_ID_LIMIT,
    first_field,
    sub_configs,
    vocab_of,
)

# --- inputs --------------------------------------------------------------------------


@dataclass(frozen=True)
class InputPlan:
    """Choices earlier attempts' errors taught (see :data:`REPAIRS`): how many image tokens, which audio
    layout, inputs remade at a shape the forward asked for, optional inputs the forward said it needs."""

    image_tokens: int | None = None
    audio_time_major: bool = False
    from_parent: bool = False  # record the inputs from a parent model's call (hf_parent), not from the config
    fill_unset: bool = False  # give the config's unset fields a value (complete_config)
    shapes: tuple[tuple[str, tuple[int, ...]], ...] = ()  # (input, its shape after its first dim: the batch, or its patches)
    extra: tuple[str, ...] = ()  # optional inputs to make although the signature does not require them
    floats: tuple[str, ...] = ()  # inputs made as integers that the forward computes on as floats
    dropped: tuple[str, ...] = ()  # keywords the wrapper must not add (the forward passes its own on), inputs the forward refuses
    rope_sections: tuple[int, ...] = ()  # multimodal rotary sections the config's rotary width must fill (fit_rotary)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> InputPlan:
        """The plan a worker process was sent (lists back to the tuples the plan holds)."""
        return cls(
            image_tokens=data.get("image_tokens"),
            audio_time_major=bool(data.get("audio_time_major")),
            from_parent=bool(data.get("from_parent")),
            fill_unset=bool(data.get("fill_unset")),
            shapes=tuple((str(n), tuple(int(d) for d in shape)) for n, shape in data.get("shapes", ())),
            extra=tuple(data.get("extra", ())),
            floats=tuple(data.get("floats", ())),
            dropped=tuple(data.get("dropped", ())),
            rope_sections=tuple(int(n) for n in data.get("rope_sections", ())),
        )

    def describe(self) -> str | None:
        """What the repairs changed, for the report; None when the inputs are the config's own."""
        parts = [f"{name} as (batch, {', '.join(map(str, shape))})" for name, shape in self.shapes]
        parts += [f"{name} added" for name in self.extra] + [f"{name} as floats" for name in self.floats]
        parts += [f"{name} left out" for name in self.dropped if name not in WRAPPER_KEYWORDS]  # a refused input, not a wrapper keyword
        if self.image_tokens is not None:
            parts.append(f"{self.image_tokens} image tokens")
        if self.audio_time_major:
            parts.append("audio features time-major")
        return f"inputs remade after the forward's own errors: {'; '.join(parts)}" if parts else None

    def shape(self, name: str) -> tuple[int, ...] | None:
        return next((shape for n, shape in self.shapes if n == name), None)

    def with_shape(self, name: str, shape: tuple[int, ...]) -> InputPlan | None:
        """This plan with ``name`` remade at ``(its first dim, *shape)``; None when the plan already says so."""
        shape = tuple(int(d) for d in shape)
        if self.shape(name) == shape:
            return None
        return replace(self, shapes=(*((n, s) for n, s in self.shapes if n != name), (name, shape)))

    def with_extra(self, name: str) -> InputPlan | None:
        return None if name in self.extra else replace(self, extra=(*self.extra, name))

    def with_float(self, name: str) -> InputPlan | None:
        return None if name in self.floats else replace(self, floats=(*self.floats, name))


def _image_size(config: Any) -> tuple[int, int]:
    """The config's image size; a detector with none of its own takes its backbone's (lw_detr's ViT windows tile
    1024-pixel images: transformers/models/lw_detr/configuration_lw_detr.py), else 224."""
    size = getattr(config, "image_size", None) or getattr(getattr(config, "backbone_config", None), "image_size", None) or DEFAULT_IMAGE_SIZE
    if isinstance(size, dict):
        size = size.get("height") or size.get("shortest_edge") or DEFAULT_IMAGE_SIZE
    if isinstance(size, (list, tuple)):
        return int(size[0]), int(size[-1])
    return int(size), int(size)


def image_channels(config: Any) -> int:
    return int(first_field([config], ("num_channels", "in_channels", "in_chans")) or DEFAULT_CHANNELS)


def make_pixels(config: Any, batch: int, device: str) -> Any:
    import torch

    h, w = _image_size(config)
    return torch.randn(batch, image_channels(config), h, w, device=device)


def text_ids(config: Any, batch: int, seq: int, device: str) -> Any:
    """Random token ids that avoid every special (image, audio, video) token id of the config."""
    import torch

    limit = max(2, min(vocab_of(config), TEXT_ID_LIMIT))
    ids = torch.randint(0, limit, (batch, seq), device=device) if device != "meta" else torch.zeros(batch, seq, dtype=torch.long, device=device)
    if device != "meta":
        for value in {first_field(sub_configs(config), (name,)) for name in SPECIAL_TOKEN_FIELDS}:
            if isinstance(value, int):
                ids[ids == value] = (value + 1) % limit
    return ids


def image_token_count(config: Any, vision: Any) -> int:
    count = first_field([config], IMAGE_COUNT_FIELDS)
    if isinstance(count, int) and count > 0:
        return count
    h, w = _image_size(vision)
    patch = getattr(vision, "patch_size", 14) or 14
    if isinstance(patch, (list, tuple)):  # a patch size per stage (florence2's DaViT): the strides downsample together
        strides = getattr(vision, "patch_stride", None)
        patch = math.prod(strides) if isinstance(strides, (list, tuple)) and strides else patch[0]
    patch = int(patch)
    return max(1, (h // patch) * (w // patch))


def vision_tower_inputs(config: Any, vision: Any, params: Any, batch: int, device: str, plan: InputPlan) -> tuple[dict[str, Any], int]:
    """Pixels (or flattened patches with their grid) and how many image tokens stand for them."""
    import torch

    if "image_grid_thw" in params:  # Qwen-VL: patches flattened, with their (t, h, w) grid
        patch = int(getattr(vision, "patch_size", 14) or 14)
        # A tower without a temporal patch (ernie4_5_vl, cosmos3_edge, hy_v4_vl, dots3: SigLIP-style) takes C*P*P per patch.
        temporal = first_int_field([vision], ("temporal_patch_size", "patch_temporal")) or 1
        merge = int(getattr(vision, "spatial_merge_size", 2) or 2)
        grid = QWEN_GRID * merge // 2 if merge > 2 else QWEN_GRID
        patches = grid * grid
        width = image_channels(vision) * temporal * patch * patch
        inputs = {
            "pixel_values": torch.randn(batch * patches, width, device=device),
            "image_grid_thw": torch.tensor([[1, grid, grid]] * batch, device="cpu" if device == "meta" else device),
        }
        return inputs, plan.image_tokens or patches // (merge * merge)
    if "spatial_shapes" in params:  # NaViT (siglip2): a sequence of flattened patches, a mask over it and its (h, w)
        patch_inputs = make_patch_sequence(vision, batch, device)
        side = int(patch_inputs["spatial_shapes"][0, 0])
        return patch_inputs, plan.image_tokens or side * side
    return {"pixel_values": make_pixels(vision, batch, device)}, plan.image_tokens or image_token_count(config, vision)


def make_patch_sequence(vision: Any, batch: int, device: str) -> dict[str, Any]:
    """siglip2-style inputs: ``num_patches`` patches of C*P*P pixels as one sequence, all valid, on a square grid."""
    import math

    import torch

    patch = int(getattr(vision, "patch_size", 16) or 16)
    side = max(1, math.isqrt(int(getattr(vision, "num_patches", 256) or 256)))
    width = image_channels(vision) * patch * patch
    return {
        "pixel_values": torch.randn(batch, side * side, width, device=device),
        "pixel_attention_mask": torch.ones(batch, side * side, dtype=torch.long, device=device),
        "spatial_shapes": torch.tensor([[side, side]] * batch, device="cpu" if device == "meta" else device),
    }


def make_audio_features(config: Any, batch: int, device: str, plan: InputPlan) -> Any:
    import torch

    mel = int(first_field([config], ("num_mel_bins", "feature_size", "input_feat_per_channel")) or DEFAULT_MEL_BINS)
    if plan.audio_time_major:
        return torch.randn(batch, ALT_AUDIO_FRAMES, mel, device=device)
    frames = 2 * int(getattr(config, "max_source_positions", ALT_AUDIO_FRAMES // 2) or ALT_AUDIO_FRAMES // 2)
    return torch.randn(batch, mel, frames, device=device)


def make_audio_values(config: Any, batch: int, device: str) -> Any:
    """Raw audio, or (frames, mel bins) for spectrogram encoders (audio-spectrogram-transformer) that take ``input_values``."""
    import torch

    mel = getattr(config, "num_mel_bins", None)
    if isinstance(mel, int) and mel > 0:
        frames = int(getattr(config, "max_length", None) or ALT_AUDIO_FRAMES)
        return torch.randn(batch, frames, mel, device=device)
    return torch.randn(batch, AUDIO_SAMPLES, device=device)


_MAIN_INPUTS = ("input_ids", "pixel_values", "input_values", "input_features", "inputs_embeds", "hidden_states")


def main_input_of(inner: Any, params: Any) -> str:
    """The input the forward is about: the model's ``main_input_name`` when its forward takes it, else the first required one."""
    main = getattr(inner, "main_input_name", "input_ids")
    if isinstance(main, (list, tuple)):  # oneformer names two: ["pixel_values", "task_inputs"]
        main = main[0] if main else "input_ids"
    if main in params:
        return str(main)
    required = [n for n, p in params.items() if p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    for name in (*required, *_MAIN_INPUTS):
        if name in params:
            return name
    return str(main)


def hidden_width(config: Any) -> int:
    return int(first_field([config], ("hidden_size", "d_model", "embed_dim", "hidden_dim", "dim")) or 64)


def input_by_name(name: str, config: Any, batch: int, seq: int, device: str, done: Mapping[str, Any]) -> Any:
    """An input the forward needs, by its name and the config; None for one neuronprobe does not know how to make."""
    import torch

    text = next((v for k, v in done.items() if k in ("input_ids", "decoder_input_ids")), None)
    length = text.shape[-1] if text is not None else seq
    if name in ("input_ids", "decoder_input_ids"):
        return text_ids(config, batch, seq, device)
    if name in ("attention_mask", "decoder_attention_mask"):
        return torch.ones(batch, length, dtype=torch.long, device=device)
    if name == "pixel_values":
        return make_pixels(getattr(config, "vision_config", None) or config, batch, device)
    if name == "pixel_mask":
        h, w = _image_size(getattr(config, "vision_config", None) or config)
        return torch.ones(batch, h, w, dtype=torch.long, device=device)
    if name == "image_sizes" and "pixel_values" in done and done["pixel_values"].dim() == 4:
        h, w = done["pixel_values"].shape[-2:]
        return torch.tensor([[h, w]] * batch, device="cpu" if device == "meta" else device)
    if name == "input_values":
        return make_audio_values(config, batch, device)
    if name == "input_features":  # an audio codec's features next to its raw audio (xcodec2, neucodec)
        return make_audio_features(config, batch, device, InputPlan())
    if name in ("input_features_mask", "feature_attention_mask") and "input_features" in done:
        features = done["input_features"]
        return torch.ones(batch, features.shape[-1], dtype=torch.long, device=device)
    if name in ("inputs_embeds", "hidden_states"):  # features in: a speech encoder's input_dim before its width
        return torch.randn(batch, length, int(first_field([config], ("input_dim",)) or hidden_width(config)), device=device)
    if name == "encoder_hidden_states":  # what a cross-attending module (Q-Former) reads from the vision side
        return torch.randn(batch, length, int(first_field([config], ("encoder_hidden_size",)) or hidden_width(config)), device=device)
    if name == "query_embeds":
        queries = int(getattr(config, "num_query_tokens", None) or 32)
        return torch.randn(batch, queries, hidden_width(config), device=device)
    return _by_name_more(name, config, batch, seq, device, done, length)


def first_int_field(configs: list[Any], names: Iterable[str]) -> int | None:
    value = first_field(configs, names)
    if isinstance(value, (list, tuple)) and value:
        value = value[0]
    return int(value) if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def dim_count(dim: str, config: Any) -> int:
    """How many of a dimension the forward unpacks by this name: frames from the config (video), channels of
    raw audio from ``audio_channels``; one image, one sequence, one of anything else."""
    dim = dim.lower()
    if dim.isdigit():
        return int(dim)
    configs = sub_configs(config) if hasattr(config, "__dict__") else []
    if "frame" in dim or "video" in dim or dim in ("t", "time"):
        return first_int_field(configs, ("num_frames", "frames_per_clip", "tubelet_size")) or 1
    if "channel" in dim:
        return first_int_field(configs, ("audio_channels",)) or 1
    return 1


def _boxes(batch: int, length: int, device: str) -> Any:
    """One box per token, (x0, y0, x1, y1) with x0 <= x1 and y0 <= y1 in 0..1000: what layout models read."""
    import torch

    if device == "meta":
        return torch.zeros(batch, length, 4, dtype=torch.long, device=device)
    corner = torch.randint(0, 500, (batch, length, 2), device=device)
    return torch.cat([corner, corner + torch.randint(0, 500, (batch, length, 2), device=device)], dim=-1)


def _by_name_more(name: str, config: Any, batch: int, seq: int, device: str, done: Mapping[str, Any], length: int) -> Any:
    """Inputs known by a part of their name and a config field: boxes, side-model text, prompt images and
    masks, video, time series, region features (``visual_feats`` by ``visual_feat_dim``)."""
    import torch

    configs = sub_configs(config)
    vision = getattr(config, "vision_config", None) or config
    if name == "bbox":  # layout models (bros, udop)
        return _boxes(batch, length, device)
    if name.endswith("_input_ids"):  # qformer_input_ids: text for a side model, with that model's vocabulary
        return text_ids(getattr(config, name.removesuffix("input_ids") + "config", None) or config, batch, seq, device)
    if name.endswith("_attention_mask") and (ids := done.get(name.replace("attention_mask", "input_ids"))) is not None:
        return torch.ones(batch, ids.shape[-1], dtype=torch.long, device=device)
    if "pixel_values" in name or name in ("image", "images"):  # prompt_pixel_values (seggpt), pixel_values_videos (B, frames, C, H, W)
        pixels = make_pixels(vision, batch, device)
        return pixels.unsqueeze(1).expand(batch, dim_count("frames", config), *pixels.shape[1:]).contiguous() if "video" in name else pixels
    if name.endswith("_masks") and isinstance(done.get("pixel_values"), torch.Tensor):  # prompt_masks: a mask image per image
        return torch.zeros_like(done["pixel_values"])
    if name in ("past_values", "future_values"):  # time series: (B, context, channels) or (B, context)
        # The config's context (patchtst checks it), but a long one is the sequence length in whole patches
        # (timesfm2_5's 16384 steps take minutes on meta; a model that wants its full context says so, see repairs).
        context = first_int_field(configs, ("context_length",)) or seq
        patch = first_int_field(configs, ("patch_length",)) or 1
        if context > LONG_SERIES:
            context = -(-seq // patch) * patch
        channels = first_int_field(configs, ("num_input_channels",))
        if name == "future_values":
            context = first_int_field(configs, ("prediction_length",)) or context
        return torch.randn(batch, context, *([channels] if channels else []), device=device)
    if name.endswith(("observed_mask", "_padding")) and isinstance(past := done.get("past_values"), torch.Tensor):
        return (torch.ones_like if "observed" in name else torch.zeros_like)(past)
    if name == "image_attention_mask" and isinstance(pixels := done.get("pixel_values"), torch.Tensor) and pixels.dim() == 5:
        return torch.ones(batch, length, pixels.shape[1], dtype=torch.long, device=device)  # which images each token sees
    if name == "freq":  # a frequency class per series (timesfm)
        return torch.zeros(batch, 1, dtype=torch.long, device=device)
    if name == "latents":  # codec decoders: (B, hidden, frames)
        return torch.randn(batch, hidden_width(config), length, device=device)
    if name == "flattened_patches":  # pix2struct, kosmos-2.5: (B, patches, row + column + the patch's pixels)
        width = first_int_field(configs, ("patch_embed_hidden_size",)) or hidden_width(config)
        patches = torch.randn(batch, length, 2 + width, device=device)
        if device != "meta":
            patches[:, :, :2] = 0  # row and column ids: the first patch's, valid for any table of positions
        return patches
    if "spectrogram" in name:  # vocoders (hifigan): (B, frames, mel bins)
        return torch.randn(batch, length, first_int_field(configs, ("model_in_dim", "num_mel_bins")) or DEFAULT_MEL_BINS, device=device)
    for field_name in (f"{name}_dim", f"{name.removesuffix('s')}_dim"):  # features by a config width: visual_feats, visual_pos (lxmert), states
        dim = first_int_field(configs, (field_name,))
        if dim:
            return torch.randn(batch, length, dim, device=device)
    return None


def has_conv_stem(inner: Any) -> bool:
    """The model's first layer with weights is a 2-D convolution: what it reads first is an image."""
    import torch

    first = next((m for m in inner.modules() if any(True for _ in m.parameters(recurse=False))), None)
    return isinstance(first, torch.nn.Conv2d)


def tokens_before(ids: Any, token: int, count: int) -> Any:
    """``ids`` (batch, length) with ``count`` copies of ``token`` in front: how image (or query) placeholders precede
    the text in every vision-language input made here."""
    import torch

    return torch.cat([torch.full((ids.shape[0], count), token, dtype=ids.dtype, device=ids.device), ids], dim=1)


def reshaped_value(value: Any, shape: tuple[int, ...] | None, device: str) -> Any:
    """An input remade at ``(its first dim, *shape)``, keeping its dtype: random values for floats, zeros for ids.
    The first dim is the batch, or the batch's patches for flattened patches: made for the batch asked."""
    import torch

    if shape is None or not isinstance(value, torch.Tensor):
        return value
    if value.is_floating_point():
        return torch.randn(value.shape[0], *shape, dtype=value.dtype, device=device)
    return torch.zeros(value.shape[0], *shape, dtype=value.dtype, device=device)


# --- input repairs ---------------------------------------------------------------
#
# When the forward raises, each repair reads its message (and the source line that raised) and
# says how the inputs should change. Each is pure: (message, plan, inputs info) -> a new plan, or
# None when the message is not its kind or teaches nothing new. The first repair that answers wins.


@dataclass(frozen=True)
class InputsInfo:
    """What the failed attempt gave the forward: its inputs' shapes, the forward's parameters, the
    line that raised (``batch_size, num_frames, ... = pixel_values.shape`` names the dims it wanted)."""

    main_input: str = "input_ids"
    shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    floats: frozenset[str] = frozenset()  # the inputs that are floating point
    params: tuple[str, ...] = ()
    line: str = ""
    config: Any = None
    optional: frozenset[str] = frozenset()  # the parameters with a default: inputs the forward can do without


def inputs_info(inner: Any, inputs: Mapping[str, Any], error: BaseException | None = None) -> InputsInfo:
    """The :class:`InputsInfo` of one attempt: ``inner`` the transformers model, ``error`` its forward's root error."""
    import traceback

    import torch

    line = ""
    if error is not None:
        frames = traceback.extract_tb(error.__traceback__)
        own = [f for f in frames if "/torch/" not in f.filename.replace("\\", "/")] or frames
        line = (own[-1].line or "") if own else ""
    tensors = {k: v for k, v in inputs.items() if isinstance(v, torch.Tensor)}
    try:
        signature = entry_params(inner)
    except (TypeError, ValueError):
        signature = {}
    params = tuple(signature)
    optional = frozenset(n for n, p in signature.items() if p.default is not inspect.Parameter.empty)
    return InputsInfo(
        main_input=str(getattr(inner, "main_input_name", "input_ids")),
        shapes={k: tuple(int(d) for d in v.shape) for k, v in tensors.items()},
        floats=frozenset(k for k, v in tensors.items() if v.is_floating_point()),
        params=params,
        line=line,
        config=getattr(inner, "config", None),
        optional=optional,
    )


def repair_target(info: InputsInfo, ndim: int | None = None, floats: bool = False, name: str | None = None) -> str | None:
    """The input a message is about: ``name`` when it is an input, else the main input, else the only input
    with ``ndim`` dims (floating point when ``floats``)."""
    if name is not None and name in info.shapes:
        return name

    def fits(n: str) -> bool:
        return (ndim is None or len(info.shapes[n]) == ndim) and (not floats or n in info.floats)

    if info.main_input in info.shapes and fits(info.main_input):
        return info.main_input
    found = [n for n in info.shapes if fits(n)]
    return found[0] if len(found) == 1 else None


def pixel_target(info: InputsInfo) -> str | None:
    found = [n for n in info.shapes if "pixel_values" in n and len(info.shapes[n]) >= 4]
    return info.main_input if info.main_input in found else found[0] if found else None


def value_device(device: str) -> str:
    """Where tensors whose values the forward reads (lengths, flags) go: the CPU next to meta inputs."""
    return "cpu" if device == "meta" else device
