"""Input repairs: what a forward's own error says to change in the inputs."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from neuronprobe.loaders import fired
from neuronprobe.loaders.hf.build import WRAPPER_KEYWORDS
from neuronprobe.loaders.hf.config import DEFAULT_CHANNELS
from neuronprobe.loaders.hf.error_texts import error_text
from neuronprobe.loaders.hf.inputs.primitives import InputPlan, InputsInfo, dim_count, image_channels, pixel_target, repair_target


def repair_image_tokens(message: str, plan: InputPlan, info: InputsInfo) -> InputPlan | None:
    """As many image tokens as the vision tower gave features ("Image features and image tokens do not
    match: tokens: 1, features 576"): llava-style vision-language models whose count the config does not say."""
    m = error_text("image-features-count").search(message)
    if m and plan.image_tokens != int(m.group(1)):
        return replace(plan, image_tokens=int(m.group(1)))
    return None


# The source line that raised (``b, c, h, w = pixel_values.shape``), not an error text.
_UNPACK_LINE = re.compile(r"^\s*\(?\s*([\w\s,]+?)\s*\)?\s*=\s*([\w.]+?)\.(?:shape|size\(\))")


def _insert_dims(old: tuple[int, ...], dims: list[str], config: Any) -> tuple[int, ...]:
    """``old`` (with its batch) given the dims the forward wanted: the missing ones go right after the batch,
    as many of each as its name says (``num_frames`` from the config, ``2`` for an image pair, else one)."""
    missing = len(dims) - len(old)
    return tuple(dim_count(d, config) for d in dims[1 : 1 + missing]) + old[1:]


def repair_missing_dims(message: str, plan: InputPlan, info: InputsInfo) -> InputPlan | None:
    """An input with too few dims: video and multi-image pixels (B, frames|images, C, H, W) and raw audio
    (B, channels, T), read from "not enough values to unpack (expected 5, got 4)" and the line that raised
    (``batch_size, num_frames, num_channels, height, width = pixel_values.shape``), or from "Input must be a 5D
    tensor of shape (batch_size, 2, num_channels, height, width)". Learned from videomae, vivit, timesformer,
    xclip, idefics2, idefics3, smolvlm, modernvbert, ultravbert (frames, images); encodec, mimi, mimi_encoder,
    pocket_tts_audio_tokenizer (audio channels); superglue, lightglue, efficientloftr (image pairs); idefics
    (images flattened into the batch before the unpack: a dim of one)."""
    m = error_text("not-enough-to-unpack").search(message)
    stated = error_text("stated-tensor-shape").search(message)
    if m:
        want, got = int(m.group(1)), int(m.group(2))
        line = _UNPACK_LINE.match(info.line)
        dims = [d.strip() for d in line.group(1).split(",")] if line else []
        name = repair_target(info, got, name=line.group(2).rpartition(".")[2] if line else None)
    elif stated:
        dims = [d.strip() for d in stated.group(2).split(",")]
        want, got = int(stated.group(1)), len(dims) - 1
        name = pixel_target(info) or repair_target(info, got)
    else:
        return None
    if name is None or want <= got:
        return None
    old = info.shapes[name]
    if len(old) == got and len(dims) == want:
        new = _insert_dims(old, dims, info.config)
    elif len(old) >= got and plan.shape(name) is None:  # the forward flattened it first (images into the batch): dims of one, once
        new = (*[1] * (want - got), *old[1:])
    else:
        return None
    return plan.with_shape(name, new)


def repair_audio_channels(message: str, plan: InputPlan, info: InputsInfo) -> InputPlan | None:
    """Raw audio (B, T) where the model wants (B, channels, T), channels from ``audio_channels``: "Dimension out
    of range (expected to be in range of [-2, 1], but got 2)", "Audio must be mono, but got 16000", and a conv
    run unbatched on (B, T) ("Attempting to broadcast a dimension of length 16000"). Learned from omniasr_audio,
    omniasr_ctc, vibevoice_acoustic_tokenizer, xcodec, dac, pe_audio, pe_audio_encoder. A 3-D input indexed at
    dim 3 ("expected to be in range of [-3, 2], but got 3") gets a channel dim of one (clap_audio_model)."""
    m = error_text("dimension-out-of-range").search(message)
    if m and int(m.group(1)) == int(m.group(2)) > 2:  # features (B, T, mel) the forward reads as (B, 1, T, mel)
        name = repair_target(info, int(m.group(2)), floats=True)
        return plan.with_shape(name, (1, *info.shapes[name][1:])) if name in info.floats else None
    name = repair_target(info, 2, floats=True)
    if name is None or name not in info.floats:
        return None
    length = info.shapes[name][-1]
    if m and int(m.group(1)) == 2 and int(m.group(2)) == 2:
        pass
    elif not (any(int(x.group(1)) == length for x in (error_text("audio-must-be-mono").search(message), error_text("broadcast-length").search(message)) if x)):
        return None
    return plan.with_shape(name, (dim_count("channels", info.config), length))


def repair_codebook_ids(message: str, plan: InputPlan, info: InputsInfo) -> InputPlan | None:
    """Token ids (B, seq) where the model embeds one id per codebook at each step, (B, seq, codebooks): its
    embedding adds a per-codebook offset buffer of shape (codebooks,) to the ids, "Attempting to broadcast a
    dimension of length 33 at -1! Mismatching argument at index 1 had torch.Size([33]); but expected shape should
    be broadcastable to [1, 32]", or on real tensors "The size of tensor a (32) must match the size of tensor b (33)"
    at a line adding ``offsets`` (kyutai_speech_to_text: the text token and 32 audio codebooks,
    ``input_ids + self.audio_tokens_offsets``; inkling_audio: a mel-bin token per bin; dia_decoder: its 9
    channels, ``audio_codes + self.offsets``, after its ``batch_size, seq_length = input_ids.size()[:-1]`` had
    a dim of one put in). The input is the integer one whose elements and last dim the broadcast target has."""
    m = error_text("broadcast-per-codebook").search(message)
    real = error_text("size-mismatch").search(message) if "offsets" in info.line else None  # real tensors say it this way
    if m and m.group(1) == m.group(2):
        codebooks, steps, size = int(m.group(1)), int(m.group(3).split(",")[-1]), math.prod(int(d) for d in m.group(3).split(","))
    elif real:
        codebooks, steps, size = int(real.group(2)), int(real.group(1)), 0
    else:
        return None
    for name, shape in info.shapes.items():
        ones_between = all(d == 1 for d in shape[1:-1])  # a dim of one another repair put there (dia_decoder's unpack)
        fits = shape[-1] == steps and (not size or math.prod(shape) == size)
        if name not in info.floats and len(shape) >= 2 and ones_between and fits and shape[-1] != codebooks:
            return plan.with_shape(name, (shape[-1], codebooks))
    return None


def repair_stated_size(message: str, plan: InputPlan, info: InputsInfo) -> InputPlan | None:
    """Pixels at the size or channels the error states: "Input image size (224*224) doesn't match model
    (256*192)" (vitpose; seggpt, whose pixels are joined to its prompt's), "Input height (224) doesn't match
    model (336)" (timm towers: pe_video), "Image size 224x224 is too small to be scaled with scaled_images_ratios=(0.25, 0.5, 1)
    when patch_size=384" (depth_pro), "expected input[1, 1, 32] to have 80 channels, but got 1 channels" when
    that input is one of ours, or ours with its time padded (qwen2_5_omni_bigvgan, voxtral_realtime,
    vibevoice_acoustic_tokenizer_encoder; not a feature map inside: edgetam), and "Attempting to broadcast a
    dimension of length 448 at -1! ... had torch.Size([448, 448]); but expected shape should be broadcastable
    to [1, 3, 224, 224]" when that shape is our input's (tvp's image prompt)."""
    if m := error_text("conv-channels").search(message):  # our input as it is, or with its last dim padded by the forward
        shape = tuple(int(d) for d in m.group(1).split(","))
        same = [n for n, s in info.shapes.items() if s == shape and n in info.floats]
        padded = [n for n, s in info.shapes.items() if len(s) == len(shape) > 2 and s[:-1] == shape[:-1] and n in info.floats]
        ours = (same or padded)[0] if same or padded else None
        return plan.with_shape(ours, (int(m.group(2)), *info.shapes[ours][2:])) if ours else None
    if m := error_text("broadcast-our-input").search(message):  # a parameter sized for the input's trailing dims (tvp's 448x448 prompt)
        theirs = tuple(int(d) for d in m.group(1).split(","))
        target = tuple(int(d) for d in m.group(2).split(","))
        sized = next((n for n, s in info.shapes.items() if s == target and n in info.floats), None)
        if sized and len(theirs) < len(target):
            return plan.with_shape(sized, (*target[1 : len(target) - len(theirs)], *theirs))
        return None
    name = pixel_target(info)
    if name is None:
        return None
    h, w = info.shapes[name][-2:]
    if m := error_text("image-size-mismatch").search(message):  # the size it saw may be ours joined with another image (seggpt): scale ours
        got_h, got_w, want_h, want_w = (int(g) for g in m.groups())
        size = (h * want_h // got_h, w * want_w // got_w) if got_h and got_w else (want_h, want_w)
    elif m := error_text("image-side-mismatch").search(message):
        side, got, want = m.group(1).lower(), int(m.group(2)), int(m.group(3))
        size = (h * want // got, w) if side == "height" and got else (h, w * want // got) if got else (h, w)
    elif m := error_text("image-too-small-to-scale").search(message):
        ratios = [float(r) for r in m.group(3).split(",") if r.strip()]
        side_px = -(-int(m.group(4)) * 1000 // int(min(ratios) * 1000)) if ratios and min(ratios) > 0 else 0
        size = (side_px, side_px) if side_px else (h, w)
    else:
        return None
    if size == (h, w) or 0 in size:
        return None
    better = plan
    for other, shape in info.shapes.items():  # every image of this size: prompts and masks next to the pixels
        if len(shape) >= 4 and shape[-2:] == (h, w) and other in info.floats:
            better = better.with_shape(other, (*shape[1:-2], *size)) or better
    return better if better != plan else None


def repair_stated_length(message: str, plan: InputPlan, info: InputsInfo) -> InputPlan | None:
    """A length the error states: "Input sequence length (16) doesn't match model configuration (32)"
    (patchtst, patchtsmixer: the dim that has the wrong length gets the right one), "`input_values` length
    16000 is not a multiple of 1920" (muse_spark_audio), "`padded_feature_length` to be a multiple of
    `n_window * 2` (100), but got 128" (qwen3_asr_encoder): rounded up to the multiple."""
    if m := error_text("sequence-length-mismatch").search(message):
        got, want = int(m.group(1)), int(m.group(2))
    elif m := error_text("length-not-a-multiple").search(message):
        got, multiple = (int(m.group(1)), int(m.group(2))) if m.group(1) else (int(m.group(4)), int(m.group(3)))
        want = -(-got // multiple) * multiple
    else:
        return None
    names = [info.main_input, *(n for n in info.shapes if n != info.main_input)]
    for name in names:
        old = info.shapes.get(name, ())
        for dim in range(len(old) - 1, 0, -1):  # never the batch
            if old[dim] == got:
                return plan.with_shape(name, (*old[1:dim], want, *old[dim + 1 :]))
    return None


def repair_feature_width(message: str, plan: InputPlan, info: InputsInfo) -> InputPlan | None:
    """Features (our own input, found by its shape in the message) whose last dim is not what the first layer
    takes: "Given normalized_shape=[768], expected input with shape [768], but got input of size
    torch.Size([1, 128, 80])" (speecht5, wav2vec2-bert), "a and b must have same reduction dim, but got
    [128, 80] X [320, 1024]" (granite_speech5_ctc, granite_speech5_encoder; flattened patches of cosmos3_edge,
    ernie4_5_vl_moe); and text longer than the position table: "Attempting to broadcast a dimension of length
    16 at -2! ... broadcastable to [1, 32, 512]" (owlvit, owlv2: their text has 16 positions); "Last dimension of
    the inputs: 32 doesn't correspond to config.d_model: 768" (perceiver: features, not ids)."""
    if m := error_text("layer-norm-shape").search(message):
        shape = tuple(int(d) for d in m.group(2).split(","))
        name = next((n for n, s in info.shapes.items() if s == shape and n in info.floats), None)
        return plan.with_shape(name, (*shape[1:-1], int(m.group(1)))) if name else None
    if (m := error_text("last-dimension").search(message)) and m.group(1) in info.shapes:  # ids where the forward wants features
        name, got, want = m.group(1), int(m.group(2)), int(m.group(3))
        old = info.shapes[name]
        if name in info.floats:
            return plan.with_shape(name, (*old[1:-1], want)) if old[-1] == got else None
        better = plan.with_shape(name, (*old[1:], want))
        return better.with_float(name) if better else None
    if m := error_text("matmul-reduction").search(message):
        rows, got, want = (int(g) for g in (m.groups()[:3] if m.group(1) else m.groups()[3:]))
        for name, shape in info.shapes.items():
            lead = 1
            for d in shape[:-1]:
                lead *= d
            if name in info.floats and len(shape) <= 3 and shape[-1] == got and lead == rows:
                return plan.with_shape(name, (*shape[1:-1], want))
        return None
    if m := error_text("broadcast-too-long").search(message):
        length, target = int(m.group(1)), [int(d) for d in m.group(2).split(",")]
        text = next((n for n in ("input_ids", "decoder_input_ids") if n in info.shapes), None)
        if text and len(target) >= 2 and target[1] == info.shapes[text][-1] > length:
            return plan.with_shape(text, (length,))
    return None


def repair_needed_input(message: str, plan: InputPlan, info: InputsInfo) -> InputPlan | None:
    """An optional input the forward says it needs, by its parameter name in the message: "You have to specify
    bbox" (bros), "Bbox is required for horizontal relative position bias" (udop), "`visual_feats` cannot be
    `None`" (lxmert), "You have to specify either pixel_values or image_embeds" (vilt: the first one named,
    the next on the next try). Messages about giving two at once are not this kind."""
    if not error_text("input-needed").search(message) or error_text("inputs-exclusive").search(message):
        return None
    params = {p.lower(): p for p in info.params}
    for word in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", message):
        name = params.get(word.lower())
        if name and name not in info.shapes and name not in plan.extra and name not in ("kwargs", "args"):
            return plan.with_extra(name)
    return None


def repair_missing_input(message: str, plan: InputPlan, info: InputsInfo) -> InputPlan | None:
    """An optional input the forward says is missing by its name in backticks: "Multimodal data was passed (via
    `image_grid_thw` or `video_grid_thw`) but `mm_token_type_ids` is missing" (ernie4_5_vl_moe's M-RoPE index)."""
    m = error_text("input-is-missing").search(message)
    if m is None or m.group(1) not in info.params or m.group(1) in info.shapes:
        return None
    return plan.with_extra(m.group(1))


def _read_side(line: str) -> str:
    """What a source line reads: the right of its assignment (``inputs_embeds = embed(input_ids)`` reads ``input_ids``)."""
    parts = re.split(r"(?<![=!<>:+\-*/])=(?!=)", line, maxsplit=1)
    return parts[-1]


def repair_none_input(message: str, plan: InputPlan, info: InputsInfo) -> InputPlan | None:
    """An optional input the forward reads without a None check, named by the line that raised:
    "'NoneType' object has no attribute 'size'" at ``num_images = image_attention_mask.size(-1)`` (idefics),
    "... 'shape'" at ``input_shape = pixel_values_videos.shape`` (pe_audio_video_encoder), "embedding():
    argument 'indices' (position 2) must be Tensor, not NoneType" at an embedding of ``input_ids`` (instructblip),
    "conv1d() received an invalid combination of arguments - got (NoneType, Parameter, ..." at
    ``mel_spec = self.mel_conv(input_features)`` (clvp: its optional log-mel input)."""
    if not error_text("none-input-read").search(message):
        return None
    for word in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", _read_side(info.line)):
        if word in info.params and word not in info.shapes and word not in plan.extra and word not in ("kwargs", "args", "self"):
            return plan.with_extra(word)
    return None


def repair_misread_input(message: str, plan: InputPlan, info: InputsInfo) -> InputPlan | None:
    """An optional input that sends the forward down a path its model does not have, named by the line that
    raised: llava with ``image_sizes`` splits its features by ``self.vision_tower.patch_size``, which only a
    pixtral tower has ("'CLIPVisionModel' object has no attribute 'patch_size'"); without them it takes
    the image whole (transformers/models/llava/modeling_llava.py, get_image_features). Left out, once."""
    m = error_text("object-attribute").search(message)
    if m is None or m.group(1) == "NoneType":
        return None
    for word in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", info.line):  # the whole line: its keywords (device=...) are no assignment
        if word in info.shapes and word in info.optional and word != info.main_input and word not in plan.dropped:
            return replace(plan, dropped=(*plan.dropped, word))
    return None


def repair_float_input(message: str, plan: InputPlan, info: InputsInfo) -> InputPlan | None:
    """An input made as integers that the forward averages or multiplies as floats, named by the line that
    raised: "mean(): could not infer output dtype. Input dtype must be either a floating point or complex
    dtype. Got: Long" at ``bbox[:, :, [0, 2]].mean(dim=-1)`` (udop's boxes)."""
    if not error_text("integer-input-as-float").search(message):
        return None
    for word in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", _read_side(info.line)):
        if word in info.shapes and word not in info.floats and word not in plan.floats:
            return plan.with_float(word)
    return None


def repair_audio_layout(message: str, plan: InputPlan, info: InputsInfo) -> InputPlan | None:
    """Audio features time-major (B, frames, mel) instead of (B, mel, frames), once, on any error of a model
    whose main input is ``input_features``: speech encoders differ in layout and their errors do not say
    which (wav2vec2-bert, speecht5 style). Last, because it answers every message."""
    if info.main_input == "input_features" and not plan.audio_time_major:
        return replace(plan, audio_time_major=True)
    return None


Repair = Callable[[str, InputPlan, InputsInfo], "InputPlan | None"]


def repair_duplicate_keyword(message: str, plan: InputPlan, info: InputsInfo) -> InputPlan | None:
    """A keyword the wrapper adds (``use_cache=False``) that a forward taking ``**kwargs`` also passes on
    itself: "got multiple values for keyword argument 'use_cache'" (mimi_encoder, pocket_tts_audio_tokenizer)."""
    m = error_text("duplicate-keyword").search(message)
    if m is None or m.group(1) in plan.dropped or m.group(1) not in WRAPPER_KEYWORDS:
        return None
    return replace(plan, dropped=(*plan.dropped, m.group(1)))


def repair_refused_input(message: str, plan: InputPlan, info: InputsInfo) -> InputPlan | None:
    """Token ids a forward refuses because its caller always gives embeddings: "`input_ids` is expected to be
    `None`" (qwen3_omni_moe_talker_code_predictor: the talker calls it with ``inputs_embeds``, its own hidden
    state and the embedded code). The ids are not made; ``inputs_embeds`` are, when the forward takes them."""
    m = error_text("input-refused").search(message)
    if m is None or m.group(1) not in info.shapes or m.group(1) in plan.dropped or "inputs_embeds" not in info.params:
        return None
    better = replace(plan, dropped=(*plan.dropped, m.group(1)))
    return better.with_extra("inputs_embeds") or better


def repair_tuple_output(message: str, plan: InputPlan, info: InputsInfo) -> InputPlan | None:
    """The wrapper's ``return_dict=False`` reaching an inner model through a forward's ``**kwargs`` whose own code
    then reads the inner output by attribute: "'tuple' object has no attribute 'last_hidden_state'" at
    ``self.model(input_ids=input_ids, use_cache=False, **kwargs).last_hidden_state`` (jev: transformers/models/jev/
    modeling_jev.py). The forward returns what it returns; the wrapper takes its first tensor either way."""
    m = error_text("tuple-output").search(message)
    if m is None or "return_dict" in plan.dropped or m.group(1) not in info.line:
        return None
    return replace(plan, dropped=(*plan.dropped, "return_dict"))


_PATCH_DIMS = re.compile(r"chan\w*\s*,\s*(?:height|h|patch\w*)\s*,\s*(?:width|w|patch\w*)\s*\)?\s*=", re.I)


def _patch_side(width: int, config: Any) -> tuple[int, int] | None:
    """(channels, patch side) of a flattened patch row ``width`` wide: ``C*P*P`` with the config's channels."""
    import math

    channels = image_channels(config) if config is not None else DEFAULT_CHANNELS
    side = math.isqrt(width // channels) if width % channels == 0 else 0
    return (channels, side) if side and channels * side * side == width else None


def repair_patch_rows(message: str, plan: InputPlan, info: InputsInfo) -> InputPlan | None:
    """Flattened patch rows ``(N, C*P*P)`` where the tower takes each patch as an image ``(N, C, P, P)``: a conv2d
    given the rows ("Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: [16, 588]",
    kimi_k25/modeling_kimi_k25.py: ``self.proj(pixel_values)``), or an unpacking of the patches that ends in
    channels, height and width (``batch_size, sequence_len, channel, height, width = pixel_values.shape``,
    paddleocr_vl/modeling_paddleocr_vl.py, whose image processor gives ``(N, C, P, P)``)."""
    if m := error_text("conv2d-on-rows").search(message):
        shape = (int(m.group(1)), int(m.group(2)))
        name = next((n for n, s in info.shapes.items() if s == shape and n in info.floats), None)
    elif error_text("not-enough-to-unpack").search(message) and _PATCH_DIMS.search(info.line) and (line := _UNPACK_LINE.match(info.line)):
        name = line.group(2).rpartition(".")[2]
        name = name if len(info.shapes.get(name, ())) == 2 and name in info.floats else None
    else:
        return None
    if name is None:
        return None
    found = _patch_side(info.shapes[name][-1], info.config)
    return plan.with_shape(name, (found[0], found[1], found[1])) if found else None


def repair_rope_sections(message: str, plan: InputPlan, info: InputsInfo) -> InputPlan | None:
    """A multimodal rotary whose frequencies do not fill its sections: "split_with_sizes expects split_sizes to sum
    exactly to 64 (input tensor's size at dimension -1), but got split_sizes=[8, 12, 12]" at
    ``freq.split(self.mrope_section, dim=-1)`` (glm4v_text, glm_image_text, glm4v_moe_text): the config's rotary
    width is fitted to the sections (:func:`fit_rotary`). Kept as (the width seen, *the sections)."""
    m = error_text("rotary-sections").search(message)
    if m is None or "section" not in info.line or plan.rope_sections:
        return None
    return replace(plan, rope_sections=(int(m.group(1)), *(int(d) for d in m.group(2).split(","))))


def repair_image_as_patches(message: str, plan: InputPlan, info: InputsInfo) -> InputPlan | None:
    """A linear patch embedding given a 4-D image: "a and b must have same reduction dim, but got [1134, 378] X
    [588, 1152]" where our pixels (1, 3, 378, 378) lie flat as 1134 rows of 378 and 588 is ``C*P*P`` for the
    config's patch size: the image as its sequence of flattened patches (B, H/P * W/P, C*P*P), what
    molmo2/image_processing_molmo2.py ``batch_pixels_to_patches`` gives the tower."""
    m = error_text("matmul-reduction").search(message)
    if m is None:
        return None
    rows, got, want = (int(g) for g in (m.groups()[:3] if m.group(1) else m.groups()[3:]))
    patch = getattr(info.config, "patch_size", None)
    if not isinstance(patch, int) or patch <= 0:
        return None
    for name, shape in info.shapes.items():
        if name in info.floats and len(shape) == 4 and shape[-1] == got and shape[0] * shape[1] * shape[2] == rows and shape[1] * patch * patch == want:
            return plan.with_shape(name, ((shape[2] // patch) * (shape[3] // patch), want))
    return None


REPAIRS: tuple[Repair, ...] = (
    repair_duplicate_keyword,
    repair_refused_input,
    repair_tuple_output,
    repair_image_as_patches,
    repair_rope_sections,
    repair_patch_rows,
    repair_image_tokens,
    repair_missing_dims,
    repair_audio_channels,
    repair_codebook_ids,
    repair_stated_size,
    repair_stated_length,
    repair_feature_width,
    repair_needed_input,
    repair_misread_input,
    repair_missing_input,
    repair_none_input,
    repair_float_input,
    repair_audio_layout,
)


def learn_from_error(message: str, plan: InputPlan, info: InputsInfo | str) -> InputPlan | None:
    """A better input plan from the forward's own complaint (the first of :data:`REPAIRS` that answers), or
    None when no repair learns anything new from it. ``info`` may be just the main input's name."""
    if isinstance(info, str):
        info = InputsInfo(main_input=info)
    for repair in REPAIRS:
        better = repair(message, plan, info)
        if better is not None and better != plan:
            fired.repair(repair.__name__)  # the one recording point of the repairs that made a capture's inputs (the zoo tier)
            return better
    return None
