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

GRID_RECIPES: tuple[Recipe, ...] = ()


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

IMAGE_TEXT_RECIPES: tuple[Recipe, ...] = ()


# --- other families -----------------------------------------------------------------------


def _ids(config: Any, shape: tuple[int, ...], device: str) -> Any:
    """Token ids of ``shape`` below the config's vocabulary (and :data:`hf.TEXT_ID_LIMIT`): random on the CPU, zeros on meta."""
    import torch

    from neuronprobe.loaders import hf

    limit = max(2, min(hf._vocab(config), hf.TEXT_ID_LIMIT))
    if device == "meta":
        return torch.zeros(shape, dtype=torch.long, device=device)
    return torch.randint(2, limit, shape, device=device)


def _host(device: str) -> str:
    """Where small integer tensors whose values the forward reads go: the CPU when the capture runs on meta."""
    return "cpu" if device == "meta" else device


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
    return {
        "input_ids": inputs["input_ids"][:1],  # a batch of one prompt
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
        "classes_structure": torch.full((batch,), OMDET_CLASSES, dtype=torch.long, device=_host(device)),
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
    ids = torch.cat([torch.full((batch, count), image_token, dtype=ids.dtype, device=device), ids], dim=1)
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
            made.update(found)
    return made
