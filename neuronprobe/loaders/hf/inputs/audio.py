"""Audio and speech inputs: features next to their masks and lengths."""

from __future__ import annotations

import math
from typing import Any

from neuronprobe.loaders.hf.config import AUDIO_SAMPLES, sub_configs
from neuronprobe.loaders.hf.inputs.primitives import input_by_name, reshaped_value, text_ids, value_device
from neuronprobe.loaders.hf.inputs.recipes import RecipeContext, recipe

# --- audio and speech ---------------------------------------------------------------------

AUDIO_FRAMES = 128  # mel frames when nothing fixes the count: a little over a second at a 10 ms hop


def _audio_config(config: Any) -> Any:
    return getattr(config, "audio_config", None) or config


@recipe(priority=3000, needs=("is_longer", "input_features"))
def _clap_spectrogram(ctx: RecipeContext) -> dict[str, Any] | None:
    """CLAP's audio tower takes log-mel crops as (B, crops, frames, mel bins) next to ``is_longer`` (B, 1):
    one crop, or four (the whole clip shrunk, front, middle, back) when ``enable_fusion``; ``reshape_mel2img``
    stretches the frames to ``spec_size * (spec_size // num_mel_bins)``, its Swin input, which is the frame
    count made here (transformers/models/clap/modeling_clap.py, feature_extraction_clap.py: a fused batch
    has at least one longer clip). Recognised by ``is_longer`` next to ``input_features``."""
    import torch

    audio = _audio_config(ctx.config)
    mel, spec = int(getattr(audio, "num_mel_bins", 64)), int(getattr(audio, "spec_size", 256))
    fused = bool(getattr(audio, "enable_fusion", False))
    is_longer = torch.zeros(ctx.batch, 1, dtype=torch.bool, device=value_device(ctx.device))
    if fused and ctx.device != "meta":
        is_longer[0] = True
    frames = spec * max(1, spec // mel)
    return {"input_features": torch.randn(ctx.batch, 4 if fused else 1, frames, mel, device=ctx.device), "is_longer": is_longer}


@recipe(priority=3010, needs=("audio_mel", "audio_mel_mask"))
def _mel_with_padding_mask(ctx: RecipeContext) -> dict[str, Any] | None:
    """Gemma 3n's audio encoder takes ``audio_mel`` (B, frames, mel bins) and ``audio_mel_mask`` (B, frames),
    True where a frame is padding (its parent passes ``~input_features_mask``): all frames valid here
    (transformers/models/gemma3n/modeling_gemma3n.py, Gemma3nAudioEncoder.forward)."""
    import torch

    mel = int(getattr(ctx.config, "input_feat_size", None) or getattr(ctx.config, "num_mel_bins", None) or 128)
    return {
        "audio_mel": torch.randn(ctx.batch, AUDIO_FRAMES, mel, device=ctx.device),
        "audio_mel_mask": torch.zeros(ctx.batch, AUDIO_FRAMES, dtype=torch.bool, device=ctx.device),
    }


@recipe(priority=3020, needs=("mask", "hidden_states"))
def _conformer_features_mask(ctx: RecipeContext) -> dict[str, Any] | None:
    """Phi-4-multimodal's conformer takes ``hidden_states`` (B, frames, ``input_size`` mel bins) and ``mask``
    (B, frames), True for valid frames (it sums the mask for the lengths; ``time_reduction`` subsamples the
    frames): transformers/models/phi4_multimodal/modeling_phi4_multimodal.py, Phi4MultimodalAudioModel."""
    import torch

    if not isinstance(getattr(ctx.config, "time_reduction", None), int):
        return None
    mel = int(getattr(ctx.config, "input_size", None) or 80)
    return {
        "hidden_states": torch.randn(ctx.batch, AUDIO_FRAMES, mel, device=ctx.device),
        "mask": torch.ones(ctx.batch, AUDIO_FRAMES, dtype=torch.bool, device=ctx.device),
    }


@recipe(priority=3030, needs=("feature_lens",))
def _concatenated_features_lengths(ctx: RecipeContext) -> dict[str, Any] | None:
    """Qwen-Omni audio encoders take the batch's mel frames joined in one (mel bins, total frames) tensor and
    ``feature_lens`` (B,), each clip's frame count, which they split by (``chunk_and_pad_features``);
    ``aftercnn_lens`` is the count after the stride-2 conv, as the thinker passes it
    (transformers/models/qwen2_5_omni/modeling_qwen2_5_omni.py, qwen3_omni_moe)."""
    import torch

    features = ctx.inputs.get("input_features")
    if not isinstance(features, torch.Tensor) or features.dim() != 3:
        return None
    mel, frames = (int(features.shape[2]), int(features.shape[1])) if ctx.plan.audio_time_major else (int(features.shape[1]), int(features.shape[2]))
    lengths = torch.full((ctx.batch,), frames, dtype=torch.long, device=value_device(ctx.device))
    made = {"input_features": torch.randn(mel, ctx.batch * frames, device=ctx.device), "feature_lens": lengths}
    if "aftercnn_lens" in ctx.params:
        made["aftercnn_lens"] = (lengths - 1) // 2 + 1
    return made


@recipe(priority=3040, needs=("chunk_sample_lengths",))
def _chunk_sample_lengths(ctx: RecipeContext) -> dict[str, Any] | None:
    """dots3's audio encoder takes ``chunk_sample_lengths`` (B,), the waveform samples behind each chunk of
    features: the frames times the config's ``hop_length`` (its conv stem divides them back into frames and
    tokens): transformers/models/dots3_note/modeling_dots3_note.py, Dots3NoteAudioConvStem."""
    import torch

    features = ctx.inputs.get("input_features")
    hop = getattr(ctx.config, "hop_length", None)
    if not isinstance(features, torch.Tensor) or not isinstance(hop, int):
        return None
    frames = int(features.shape[1] if ctx.plan.audio_time_major else features.shape[-1])
    return {"chunk_sample_lengths": torch.full((features.shape[0],), frames * hop, dtype=torch.long, device=value_device(ctx.device))}


@recipe(priority=3050, needs=("input_values", "input_features"))
def _codec_semantic_features(ctx: RecipeContext) -> dict[str, Any] | None:
    """Codecs with a semantic encoder next to the acoustic one (xcodec2, neucodec) take raw audio (B, 1, samples)
    padded to a multiple of the hop, and the semantic encoder's features (B, samples / hop, its
    ``feature_projection_input_dim``: two 80-bin fbank frames stacked per code); both branches give one frame
    per hop, joined frame by frame (transformers/models/xcodec2/feature_extraction_xcodec2.py, modeling_xcodec2.py
    ``encode``; neucodec the same). Recognised by the two inputs and a semantic sub-config."""
    import torch

    semantic = getattr(ctx.config, "semantic_model_config", None)
    if semantic is None:
        return None
    hop = getattr(ctx.config, "encoder_hop_length", None) or getattr(ctx.config, "hop_length", None)
    width = getattr(semantic, "feature_projection_input_dim", None)
    if not isinstance(hop, int) or not isinstance(width, int) or hop <= 0:
        return None

    frames = -(-AUDIO_SAMPLES // hop)
    made = {
        "input_values": torch.randn(ctx.batch, 1, frames * hop, device=ctx.device),
        "input_features": torch.randn(ctx.batch, frames, width, device=ctx.device),
    }
    if "input_features_mask" in ctx.inputs:
        made["input_features_mask"] = torch.ones(ctx.batch, frames, dtype=torch.long, device=ctx.device)
    return made


@recipe(priority=3060, needs=("encoder_hidden_states",))
def _cross_attended_text(ctx: RecipeContext) -> dict[str, Any] | None:
    """Dia's decoder cross-attends to its text encoder's states, which its forward takes as an optional
    ``encoder_hidden_states`` (B, text length, ``cross_hidden_size``) but reads without a None check
    (transformers/models/dia/modeling_dia.py, DiaCrossAttention: ``cross_attention_states.shape``)."""
    import torch

    width = getattr(ctx.config, "cross_hidden_size", None)
    if not isinstance(width, int) or "encoder_hidden_states" in ctx.inputs:
        return None
    return {"encoder_hidden_states": torch.randn(ctx.batch, ctx.seq, width, device=ctx.device)}


@recipe(priority=3070, needs=("decoder_input_ids",))
def _multichannel_decoder_ids(ctx: RecipeContext) -> dict[str, Any] | None:
    """Dia's encoder reads text bytes (its ``encoder_config`` vocabulary) and its decoder reads one audio code per
    channel at each step: ``decoder_input_ids`` (B, steps, ``decoder_config.num_channels``), each code below the
    decoder's vocabulary (transformers/models/dia/modeling_dia.py: DiaModel.forward, DiaMultiChannelEmbedding)."""

    decoder = getattr(ctx.config, "decoder_config", None)
    channels = getattr(decoder, "num_channels", None)
    if not isinstance(channels, int) or channels < 1:
        return None
    codes = text_ids(decoder, ctx.batch * channels, ctx.seq, ctx.device).reshape(ctx.batch, channels, ctx.seq).transpose(1, 2).contiguous()
    made = {"decoder_input_ids": codes}
    encoder = getattr(ctx.config, "encoder_config", None)
    if encoder is not None and "input_ids" in ctx.inputs:
        made["input_ids"] = text_ids(encoder, ctx.batch, ctx.seq, ctx.device)
    return made


@recipe(priority=3080)
def _codebooks_in_batch(ctx: RecipeContext) -> dict[str, Any] | None:
    """MusicGen's decoder (and MusicGen Melody's) has one embedding table per codebook and takes the codebooks'
    ids flattened into the batch, (B * num_codebooks, steps), which it reshapes to (B, codebooks, steps)
    (transformers/models/musicgen/modeling_musicgen.py, MusicgenDecoder.forward). Recognised by input embeddings
    that are a list of ``num_codebooks`` tables."""
    import torch

    codebooks = getattr(ctx.config, "num_codebooks", None)
    try:
        tables = ctx.inner.get_input_embeddings()
    except Exception:  # a model without input embeddings
        return None
    if "input_ids" not in ctx.inputs or not isinstance(tables, torch.nn.ModuleList) or not isinstance(codebooks, int) or len(tables) != codebooks:
        return None
    ids = text_ids(ctx.config, ctx.batch * codebooks, int(ctx.inputs["input_ids"].shape[-1]), ctx.device)
    made = {"input_ids": ids}
    if isinstance(ctx.inputs.get("attention_mask"), torch.Tensor):  # a mask per sequence, not per codebook
        made["attention_mask"] = torch.ones(ctx.batch, ids.shape[-1], dtype=torch.long, device=ctx.device)
    return made


@recipe(priority=3090, needs=("last_hidden_state", "input_ids"))
def _depth_decoder_codes(ctx: RecipeContext) -> dict[str, Any] | None:
    """Moshi's depth decoder runs once per audio frame over its codebooks: ``input_ids`` (frames, num_codebooks),
    the text token then the audio codes but the last, and the main decoder's ``last_hidden_state`` for that frame,
    (frames, 1, ``input_size``) (transformers/models/moshi/modeling_moshi.py: MoshiForConditionalGeneration.forward
    builds them so for MoshiDepthDecoder)."""
    import torch

    codebooks, width = getattr(ctx.config, "num_codebooks", None), getattr(ctx.config, "input_size", None)
    if not isinstance(codebooks, int) or not isinstance(width, int):
        return None
    return {"input_ids": text_ids(ctx.config, ctx.batch, codebooks, ctx.device), "last_hidden_state": torch.randn(ctx.batch, 1, width, device=ctx.device)}


@recipe(priority=3100, needs=("inputs",))
def _speech_encoder_inputs(ctx: RecipeContext) -> dict[str, Any] | None:
    """A speech encoder-decoder's ``inputs`` is whatever its encoder's main input is (raw audio for a wav2vec2
    encoder, log-mel features for a speech_to_text one), not text: made from the encoder's config
    (transformers/models/speech_encoder_decoder/modeling_speech_encoder_decoder.py: ``self.encoder(inputs, ...)``)."""

    encoder, encoder_config = getattr(ctx.inner, "encoder", None), getattr(ctx.config, "encoder", None)
    name = getattr(encoder, "main_input_name", None)
    if encoder_config is None or name not in ("input_values", "input_features"):
        return None
    made = input_by_name(str(name), encoder_config, ctx.batch, ctx.seq, ctx.device, {})
    return {"inputs": made} if made is not None else None


@recipe(priority=3110, needs=("decoder_input_values",))
def _speech_decoder_values(ctx: RecipeContext) -> dict[str, Any] | None:
    """SpeechT5's decoder takes ``decoder_input_values``, optional in the signature but read without a None check
    (its causal mask is made from them): log-mel frames (B, steps, ``num_mel_bins``) when a speech prenet turns
    them into states, the states themselves (B, steps, ``hidden_size``) for the bare model, whose encoder takes
    states as its ``input_values`` too (transformers/models/speecht5/modeling_speecht5.py: SpeechT5Model,
    SpeechT5DecoderWithoutPrenet, SpeechT5DecoderWithSpeechPrenet)."""
    import torch

    decoder, encoder = getattr(ctx.inner, "decoder", None), getattr(ctx.inner, "encoder", None)
    hidden, mel = getattr(ctx.config, "hidden_size", None), getattr(ctx.config, "num_mel_bins", None)
    if decoder is None or not isinstance(hidden, int) or not isinstance(mel, int):
        return None
    made = {"decoder_input_values": torch.randn(ctx.batch, ctx.seq, mel if hasattr(decoder, "prenet") else hidden, device=ctx.device)}
    if encoder is not None and not hasattr(encoder, "prenet") and "input_values" in ctx.params:
        made["input_values"] = torch.randn(ctx.batch, ctx.seq, hidden, device=ctx.device)
    return made


@recipe(priority=3120, needs=("hidden_states",))
def _tokenizer_encoder_audio(ctx: RecipeContext) -> dict[str, Any] | None:
    """An audio tokenizer's encoder taken alone (VibeVoice's acoustic tokenizer encoder) names its input
    ``hidden_states`` but reads raw audio, (B, ``channels``, samples), a whole number of hops
    (``prod(downsampling_ratios)``): its first conv takes ``channels`` inputs, where its decoder's takes
    ``hidden_size`` latents (transformers/models/vibevoice_acoustic_tokenizer/modeling_vibevoice_acoustic_tokenizer.py,
    VibeVoiceAcousticTokenizerEncoderModel; the full tokenizer takes the same audio as ``input_values``)."""

    import torch

    channels, ratios = getattr(ctx.config, "channels", None), getattr(ctx.config, "downsampling_ratios", None)
    if not isinstance(channels, int) or not isinstance(ratios, (list, tuple)) or not ratios:
        return None
    first = next((m for m in ctx.inner.modules() if isinstance(m, torch.nn.Conv1d)), None)
    if first is None or first.in_channels != channels:
        return None
    hop = math.prod(int(r) for r in ratios)
    return {"hidden_states": torch.randn(ctx.batch, channels, -(-AUDIO_SAMPLES // hop) * hop, device=ctx.device)}


@recipe(priority=3130)
def _code_to_mel_inputs(ctx: RecipeContext) -> dict[str, Any] | None:
    """Qwen2.5-Omni's token-to-wave DiT: the talker's codes (B, codes) below ``num_embeds``, a reference mel of the
    speaker (B, frames, ``mel_dim``), the speaker's vector (B, ``enc_emb_dim``): ``Qwen2_5OmniToken2WavModel.forward``
    takes these as ``code``, ``reference_mel``, ``conditioning``; one step of the DiT alone takes the noisy mel
    (B, codes * ``repeats``, ``mel_dim``), the reference mel as ``condition_vector``, the speaker vector repeated
    over the frames as ``speaker_embedding``, and the flow time (B,) (transformers/models/qwen2_5_omni/
    modeling_qwen2_5_omni.py: Qwen2_5OmniToken2WavDiTModel.sample, which makes these for each step)."""
    import torch

    dit = getattr(ctx.config, "dit_config", None) or ctx.config
    mel, speaker, vocab = (getattr(dit, name, None) for name in ("mel_dim", "enc_emb_dim", "num_embeds"))
    if not all(isinstance(v, int) for v in (mel, speaker, vocab)):
        return None
    assert isinstance(mel, int) and isinstance(speaker, int) and isinstance(vocab, int)
    codes = (
        torch.randint(0, vocab - 1, (ctx.batch, ctx.seq), device=ctx.device)
        if ctx.device != "meta"
        else torch.zeros(ctx.batch, ctx.seq, dtype=torch.long, device=ctx.device)
    )
    reference = torch.randn(ctx.batch, AUDIO_FRAMES, mel, device=ctx.device)
    if {"code", "conditioning", "reference_mel"} <= set(ctx.params):
        return {"code": codes, "conditioning": torch.randn(ctx.batch, speaker, device=ctx.device), "reference_mel": reference}
    if {"condition_vector", "speaker_embedding", "quantized_code", "time_step"} <= set(ctx.params):
        frames = ctx.seq * int(getattr(dit, "repeats", 1) or 1)
        return {
            "hidden_states": torch.randn(ctx.batch, frames, mel, device=ctx.device),
            "condition_vector": reference,
            "speaker_embedding": torch.randn(ctx.batch, frames, speaker, device=ctx.device),
            "quantized_code": codes,
            "time_step": torch.rand(ctx.batch, device=ctx.device),
        }
    return None


@recipe(priority=3140, needs=("input_values",))
def _audio_next_to_video(ctx: RecipeContext) -> dict[str, Any] | None:
    """Perception Encoder audio-video takes any two of text, video and audio, and all three for its full
    audio-video-text form; its text-and-video branch reads ``mm_encoder_outputs``, which PeVideoOutput lacks in
    this transformers (transformers/models/pe_audio_video/modeling_pe_audio_video.py, PeAudioVideoModel.forward).
    With video made, the audio goes next to it: raw audio as for its audio tower (the repairs shape it)."""

    if "pixel_values_videos" not in ctx.inputs or "input_values" in ctx.inputs or "input_ids" not in ctx.inputs:
        return None
    audio = input_by_name("input_values", getattr(ctx.config, "audio_config", None) or ctx.config, ctx.batch, ctx.seq, ctx.device, ctx.inputs)
    if audio is not None and ctx.plan.shape("input_values") is not None:
        audio = reshaped_value(audio, ctx.plan.shape("input_values"), ctx.device)
    return {"input_values": audio} if audio is not None else None


@recipe(priority=3150, needs=("input_features",))
def _nested_mel_bins(ctx: RecipeContext) -> dict[str, Any] | None:
    """Features for a model whose config only nests its encoders' configs (Nemotron 3.5 Transcribe's audio model:
    an ASR encoder and a diarization model, both at ``num_mel_bins`` 128, while the outer config names none) get
    the mel bins the nested configs agree on, in the layout made so far
    (transformers/models/nemotron3_5_transcribe/modeling_nemotron3_5_transcribe.py, configuration_*.py)."""
    import torch

    features = ctx.inputs.get("input_features")
    if not isinstance(features, torch.Tensor) or features.dim() != 3:
        return None
    if any(getattr(ctx.config, name, None) is not None for name in ("num_mel_bins", "feature_size", "input_feat_per_channel")):
        return None
    found = {getattr(sub, "num_mel_bins", None) for sub in sub_configs(ctx.config)[1:]} - {None}
    if len(found) != 1 or not isinstance(mel := next(iter(found)), int):
        return None
    time_major = bool(getattr(ctx.plan, "audio_time_major", False))
    shape = (features.shape[0], features.shape[1], mel) if time_major else (features.shape[0], mel, features.shape[2])
    return None if tuple(features.shape) == shape else {"input_features": torch.randn(*shape, device=ctx.device)}


@recipe(priority=3160)
def _frame_mask_follows_layout(ctx: RecipeContext) -> dict[str, Any] | None:
    """A frame mask (``input_features_mask``, ``feature_attention_mask``) is over the features' frames: their
    last dim (B, mel, frames), or the middle one once a repair made them time-major (B, frames, mel), as
    fun_asr_nano's LFR features (B, frames, 560) are (transformers/models/fun_asr_nano/feature_extraction_fun_asr_nano.py)."""
    import torch

    features = ctx.inputs.get("input_features")
    if not getattr(ctx.plan, "audio_time_major", False) or not isinstance(features, torch.Tensor) or features.dim() != 3:
        return None
    made = {}
    for name in ("input_features_mask", "feature_attention_mask"):
        mask = ctx.inputs.get(name)
        if isinstance(mask, torch.Tensor) and mask.dim() == 2 and mask.shape[-1] != features.shape[1]:
            made[name] = torch.ones(features.shape[0], features.shape[1], dtype=mask.dtype, device=ctx.device)
    return made or None
