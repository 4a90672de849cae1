"""Other families: time series, trajectories, detection prompts, structures, diffusion heads."""

from __future__ import annotations

import dataclasses
import inspect
from types import SimpleNamespace
from typing import Any

from neuronprobe.loaders.hf.config import TEXT_ID_LIMIT, ancestor_configs, vocab_of
from neuronprobe.loaders.hf.inputs.primitives import image_token_count, make_pixels, text_ids, tokens_before, value_device
from neuronprobe.loaders.hf.inputs.recipes import RecipeContext, recipe

# --- other families -----------------------------------------------------------------------


def _ids(config: Any, shape: tuple[int, ...], device: str) -> Any:
    """Token ids of ``shape`` below the config's vocabulary (and :data:`hf.TEXT_ID_LIMIT`): random on the CPU, zeros on meta."""
    import torch

    limit = max(2, min(vocab_of(config), TEXT_ID_LIMIT))
    if device == "meta":
        return torch.zeros(shape, dtype=torch.long, device=device)
    return torch.randint(2, limit, shape, device=device)


@recipe(priority=5050, needs=("lang_ids",))
def language_adapter_inputs(ctx: RecipeContext) -> dict[str, Any] | None:
    """X-MOD's language adapters: without ``lang_ids`` (one adapter index per sequence, shape (batch,)) the forward
    raises "Input language unknown" unless a default language was set on the config. The index of the config's
    first language (``languages[0]``, an adapter every layer has), as ``XmodModel.forward`` makes it from
    ``default_language`` (transformers/models/xmod/modeling_xmod.py)."""
    import torch

    if not getattr(ctx.config, "languages", None) or "lang_ids" in ctx.inputs:
        return None
    return {"lang_ids": torch.zeros(ctx.batch, dtype=torch.long, device=ctx.device)}


@recipe(priority=5060, needs=("states", "actions", "returns_to_go", "timesteps"))
def trajectory_inputs(ctx: RecipeContext) -> dict[str, Any] | None:
    """Decision Transformer: a trajectory of ``seq`` steps, (B, T, state_dim) states, (B, T, act_dim) actions,
    (B, T, 1) returns-to-go and rewards, (B, T) timesteps below ``max_ep_len`` and a (B, T) mask; the forward
    embeds each without a None check (transformers/models/decision_transformer/modeling_decision_transformer.py).
    Three tokens a step: the steps are kept within the GPT-2 position table."""
    import torch

    state_dim, act_dim = getattr(ctx.config, "state_dim", None), getattr(ctx.config, "act_dim", None)
    if not (isinstance(state_dim, int) and isinstance(act_dim, int)):
        return None
    positions = int(getattr(ctx.config, "n_positions", None) or getattr(ctx.config, "max_position_embeddings", None) or 3 * ctx.seq)
    steps = max(1, min(ctx.seq, positions // 3))
    episode = int(getattr(ctx.config, "max_ep_len", None) or steps)
    timesteps = (
        torch.arange(steps, device=ctx.device).clamp(max=episode - 1) if ctx.device != "meta" else torch.zeros(steps, dtype=torch.long, device=ctx.device)
    )
    return {
        "states": torch.randn(ctx.batch, steps, state_dim, device=ctx.device),
        "actions": torch.randn(ctx.batch, steps, act_dim, device=ctx.device),
        "rewards": torch.randn(ctx.batch, steps, 1, device=ctx.device),
        "returns_to_go": torch.randn(ctx.batch, steps, 1, device=ctx.device),
        "timesteps": timesteps.long().expand(ctx.batch, steps).contiguous(),
        "attention_mask": torch.ones(ctx.batch, steps, dtype=torch.long, device=ctx.device),
    }


@recipe(priority=5070, needs=("marks", "num_options", "question_type_ids"))
def decision_inputs(ctx: RecipeContext) -> dict[str, Any] | None:
    """Decision heads (``DecisionMixin``: jev): one prompt with, per question, ``marks`` (the number of tokens before
    its ``<|mark|>``, read at ``marks - 1``), ``num_options`` and ``question_type_ids`` (an index into
    ``Question.questions_types``), each (1, questions), as ``DecisionMixin.decide`` makes them
    (transformers/decision/modeling_utils.py, transformers/models/jev/modeling_jev.py). One true/false question
    (type 0, ``noul``, two options) read at the last token."""
    import torch

    if "input_ids" not in ctx.inputs:
        return None
    length = int(ctx.inputs["input_ids"].shape[-1])
    one: dict[str, Any] = {name: ctx.inputs[name][:1] for name in ("input_ids", "attention_mask") if name in ctx.inputs}  # a batch of one prompt
    return {
        **one,
        "marks": torch.tensor([[length]], device=ctx.device),
        "num_options": torch.tensor([[2]], device=ctx.device),
        "question_type_ids": torch.tensor([[0]], device=ctx.device),
    }


@recipe(priority=5080, needs=("context_input_ids", "doc_scores"))
def retrieved_docs_inputs(ctx: RecipeContext) -> dict[str, Any] | None:
    """RAG without a retriever: the forward asserts ``context_input_ids``, ``context_attention_mask`` (B * n_docs,
    length) in the generator's vocabulary and ``doc_scores`` (B, n_docs) are passed, what ``RagRetriever`` and the
    question encoder's dot products give (transformers/models/rag/modeling_rag.py). ``n_docs`` from the config;
    the contexts as long as the question (up to ``max_combined_length``)."""
    import torch

    docs = getattr(ctx.config, "n_docs", None)
    if not isinstance(docs, int) or docs < 1:
        return None
    generator = getattr(ctx.config, "generator", None) or ctx.config
    length = min(ctx.seq, int(getattr(ctx.config, "max_combined_length", None) or ctx.seq))
    return {
        "context_input_ids": _ids(generator, (ctx.batch * docs, length), ctx.device),
        "context_attention_mask": torch.ones(ctx.batch * docs, length, dtype=torch.long, device=ctx.device),
        "doc_scores": torch.randn(ctx.batch, docs, device=ctx.device),
    }


OMDET_CLASSES = 2  # two class prompts for the one task ("Detect cat, remote.")
OMDET_TEXT = 77  # OmDetTurboProcessor pads class and task prompts to max_length=77


@recipe(priority=5090, needs=("classes_input_ids", "tasks_input_ids", "classes_structure"))
def class_prompt_inputs(ctx: RecipeContext) -> dict[str, Any] | None:
    """OmDet-Turbo: class prompts flattened over the batch (B * classes, 77), a task prompt per image (B, 77), both
    with masks, and ``classes_structure`` (B,), the class count of each task, whose values the forward iterates
    (so it stays on the CPU next to meta weights). Shapes from ``OmDetTurboProcessor`` (padding to max_length 77)
    and ``OmDetTurboForObjectDetection.forward`` (transformers/models/omdet_turbo/)."""
    import torch

    text = getattr(ctx.config, "text_config", None) or ctx.config
    length = min(OMDET_TEXT, int(getattr(text, "max_position_embeddings", None) or OMDET_TEXT))
    mask = torch.ones(ctx.batch * OMDET_CLASSES, length, dtype=torch.long, device=ctx.device)
    task_mask = torch.ones(ctx.batch, length, dtype=torch.long, device=ctx.device)
    return {
        "classes_input_ids": _ids(text, (ctx.batch * OMDET_CLASSES, length), ctx.device),
        "classes_attention_mask": mask,
        "tasks_input_ids": _ids(text, (ctx.batch, length), ctx.device),
        "tasks_attention_mask": task_mask,
        "classes_structure": torch.full((ctx.batch,), OMDET_CLASSES, dtype=torch.long, device=value_device(ctx.device)),
    }


AMINO_ACIDS = "ACDEFGHIKLMNPQRSTVWY"  # the twenty standard residues, cycled into a protein of any length


@recipe(priority=5100, needs=("atom_inputs",))
def protein_structure_inputs(ctx: RecipeContext) -> dict[str, Any] | None:
    """Structure models whose forward takes featurised atoms (ESMFold2: ``atom_inputs``, residue, chain and entity
    ids, token bonds): the family's own featuriser, ``protein_utils.prepare_protein_features(sequence)``, on a
    protein of ``seq`` residues, with the per-atom tensors bundled into the forward's ``atom_inputs`` class, as
    ``EsmFold2FoldingMixin.fold`` does (transformers/models/esmfold2/protein_utils.py, generation_esmfold2.py)."""
    import importlib
    import sys

    package = type(ctx.inner).__module__.rpartition(".")[0]
    try:
        featurise = importlib.import_module(f"{package}.protein_utils").prepare_protein_features
    except (ImportError, AttributeError):
        return None
    bundle = (
        getattr(sys.modules[type(ctx.inner).__module__], ctx.params["atom_inputs"].annotation, None)
        if isinstance(ctx.params["atom_inputs"].annotation, str)
        else ctx.params["atom_inputs"].annotation
    )
    if not (isinstance(bundle, type) and dataclasses.is_dataclass(bundle)):
        return None
    sequence = (AMINO_ACIDS * (ctx.seq // len(AMINO_ACIDS) + 1))[: max(1, ctx.seq)]
    features = featurise(sequence, device="cpu")
    if ctx.batch != 1:
        features = {k: v.expand(ctx.batch, *v.shape[1:]).contiguous() for k, v in features.items()}
    atom_fields = {f.name for f in dataclasses.fields(bundle)}
    made: dict[str, Any] = {"atom_inputs": bundle(**{k: features[k].to(ctx.device) for k in atom_fields})}
    made.update({k: v.to(ctx.device) for k, v in features.items() if k in ctx.params and k not in atom_fields})
    return made


@recipe(priority=5110, needs=("noise_embeds", "context_hidden_states"))
def draft_context_inputs(ctx: RecipeContext) -> dict[str, Any] | None:
    """DFlash draft models (muse_glimmer_assistant): ``noise_embeds`` (B, block_size, hidden), the embeddings of the
    block to denoise, and ``context_hidden_states`` (B, context, hidden * len(target_layer_ids)), the target model's
    hidden states at ``target_layer_ids`` concatenated, which the draft's ``encoder`` projects back to its width
    (transformers/models/muse_glimmer_assistant/modeling_muse_glimmer_assistant.py)."""
    import torch

    layers, hidden = getattr(ctx.config, "target_layer_ids", None), getattr(ctx.config, "hidden_size", None)
    if not layers or not isinstance(hidden, int):
        return None
    block = int(getattr(ctx.config, "block_size", None) or ctx.seq)
    return {
        "noise_embeds": torch.randn(ctx.batch, block, hidden, device=ctx.device),
        "context_hidden_states": torch.randn(ctx.batch, ctx.seq, hidden * len(layers), device=ctx.device),
    }


@recipe(priority=5040, needs=("shared_kv_states", "inputs_embeds"))
def shared_kv_inputs(ctx: RecipeContext) -> dict[str, Any] | None:
    """Gemma 4 assistants (gemma4_unified_assistant): drafters whose every layer reuses the target model's keys and
    values. ``shared_kv_states`` maps each layer type to the (keys, values) of the target's last layer of that type,
    (B, kv heads, context, head_dim) with the per-layer head_dim and kv heads of that type's layers, and
    ``inputs_embeds`` is (B, L, 2 * backbone_hidden_size), the target's embedding and last hidden state side by side
    for ``pre_projection`` (transformers/models/gemma4_unified_assistant/modeling_gemma4_unified_assistant.py,
    gemma4_unified/modeling_gemma4_unified.py: ``Gemma4UnifiedTextAttention``)."""
    import torch

    backbone = getattr(ctx.config, "backbone_hidden_size", None)
    if not isinstance(backbone, int):
        return None
    text = ctx.config.get_text_config() if hasattr(ctx.config, "get_text_config") else ctx.config
    layer_types = list(getattr(text, "layer_types", None) or [])
    layers = getattr(text, "per_layer_config", None)
    if not layer_types or layers is None:
        return None
    shared: dict[str, Any] = {}
    for kind in dict.fromkeys(layer_types):
        layer = layers[layer_types.index(kind)]
        shape = (ctx.batch, int(layer.num_key_value_heads), ctx.seq, int(layer.head_dim))
        shared[kind] = (torch.randn(shape, device=ctx.device), torch.randn(shape, device=ctx.device))
    return {"inputs_embeds": torch.randn(ctx.batch, ctx.seq, 2 * backbone, device=ctx.device), "shared_kv_states": shared}


BLT_PATCH = 4  # BltConfig.patch_size's default: bytes per patch when patches have a fixed length


@recipe(priority=5030, needs=("encoder_attention_mask",))
def byte_patch_inputs(ctx: RecipeContext) -> dict[str, Any] | None:
    """BLT's local encoder and decoder, between bytes and patches: the encoder takes ``patch_ids`` (B, L), the patch of
    each byte, ``num_patches`` and the patches-as-queries cross-attention mask; the decoder takes byte states
    ``inputs_embeds`` (B, L, hidden), the global model's ``patch_embeds`` (B, patches, hidden_size_global) and the
    bytes-as-queries mask. Made as ``BltModel.forward`` makes them for fixed-length patches of ``patch_size``
    bytes, with the family's own ``_prepare_patch_cross_attention_mask`` (transformers/models/blt/modeling_blt.py)."""
    import sys

    import torch

    encoder = {"patch_ids", "num_patches"} <= set(ctx.params)
    decoder = "patch_embeds" in ctx.params and not encoder and "inputs_embeds" in ctx.params
    mask_for = getattr(sys.modules[type(ctx.inner).__module__], "_prepare_patch_cross_attention_mask", None)
    if not (encoder or decoder) or mask_for is None:
        return None
    patch = int(getattr(ctx.config, "patch_size", None) or BLT_PATCH)
    patches = -(-ctx.seq // patch)
    patch_ids = (torch.arange(ctx.seq, device=ctx.device) // patch).unsqueeze(0).expand(ctx.batch, ctx.seq).contiguous()
    k = int(getattr(ctx.config, "cross_attn_k", None) or 1)
    mask = mask_for(patch_ids=patch_ids, num_patches=patches, sequence_length=ctx.seq, patches_as_queries=encoder, cross_attn_k=k)
    made: dict[str, Any] = {"encoder_attention_mask": mask[0] if isinstance(mask, tuple) else mask}
    if encoder:
        made.update(patch_ids=patch_ids, num_patches=patches)
    else:
        width = int(getattr(ctx.config, "hidden_size_global", None) or ctx.config.hidden_size)
        made.update(
            inputs_embeds=torch.randn(ctx.batch, ctx.seq, ctx.config.hidden_size, device=ctx.device),
            patch_embeds=torch.randn(ctx.batch, patches, width, device=ctx.device),
        )
    return made


@recipe(priority=5020)
def windowed_backbone_pixels(ctx: RecipeContext) -> dict[str, Any] | None:
    """Detectors on a windowed ViT backbone (rf_detr): the patch grid is cut into ``num_windows`` windows a side, so
    the image side must be a multiple of ``patch_size * windows``; the backbone's pretraining size (rf_detr's
    DINOv2 518) is not, and the forward's ``view`` fails. Pixels (and their mask) at the next multiple up, 560 for
    rf_detr as its checkpoints run (transformers/models/rf_detr/modeling_rf_detr.py ``window_partition``; lw_detr
    counts windows in all, ``num_windows_side`` a side)."""
    import torch

    backbone = getattr(ctx.config, "backbone_config", None) or ctx.config
    windows = getattr(backbone, "num_windows_side", None) or getattr(backbone, "num_windows", None)
    patch = getattr(backbone, "patch_size", None)
    pixels = ctx.inputs.get("pixel_values")
    if not (isinstance(windows, int) and windows > 1 and isinstance(patch, int) and isinstance(pixels, torch.Tensor) and pixels.dim() == 4):
        return None
    step = patch * windows
    h, w = (int(d) for d in pixels.shape[-2:])
    side_h, side_w = -(-h // step) * step, -(-w // step) * step
    if (side_h, side_w) == (h, w):
        return None
    made: dict[str, Any] = {"pixel_values": torch.randn(*pixels.shape[:-2], side_h, side_w, device=ctx.device)}
    if isinstance(mask := ctx.inputs.get("pixel_mask"), torch.Tensor):
        made["pixel_mask"] = torch.ones(*mask.shape[:-2], side_h, side_w, dtype=mask.dtype, device=ctx.device)
    return made


@recipe(priority=5010, needs=("task_inputs",))
def task_prompt_inputs(ctx: RecipeContext) -> dict[str, Any] | None:
    """OneFormer's task prompt ("the task is semantic"): ``task_inputs`` (B, task_seq_len), CLIP token ids padded to
    ``task_seq_len`` by ``OneFormerProcessor``, which the task MLP reads as floats
    (transformers/models/oneformer/modeling_oneformer.py, processing_oneformer.py)."""
    length = getattr(ctx.config, "task_seq_len", None)
    if not isinstance(length, int) or "task_inputs" in ctx.inputs:
        return None
    vocab = getattr(ctx.config, "text_encoder_vocab_size", None)
    return {"task_inputs": _ids(SimpleNamespace(vocab_size=vocab) if isinstance(vocab, int) else ctx.config, (ctx.batch, length), ctx.device)}


@recipe(priority=5000, needs=("action_embeds", "pixel_attention_mask"))
def action_expert_inputs(ctx: RecipeContext) -> dict[str, Any] | None:
    """Vision-language-action models (PI0): the VLM prefix, ``input_ids`` with one image token per patch feature of
    each camera, ``pixel_values`` (B, cameras, C, H, W) with ``pixel_attention_mask`` (B, cameras), and the action
    expert's suffix ``action_embeds`` (B, 1 + chunk_size, dit hidden), the state token and the noisy action chunk
    ``PI0ForConditionalGeneration`` embeds (transformers/models/pi0/modeling_pi0.py: ``embed_prefix``, ``forward``).
    One camera."""
    import torch

    vlm, dit, chunk = getattr(ctx.config, "vlm_config", None), getattr(ctx.config, "dit_config", None), getattr(ctx.config, "chunk_size", None)
    if vlm is None or dit is None or not isinstance(chunk, int):
        return None
    vision = getattr(vlm, "vision_config", None) or vlm
    image_token = getattr(vlm, "image_token_id", None)
    if not isinstance(image_token, int):
        return None
    count = image_token_count(vlm, vision)
    ids = text_ids(vlm, ctx.batch, ctx.seq, ctx.device)
    ids = tokens_before(ids, image_token, count)
    return {
        "input_ids": ids,
        "attention_mask": torch.ones(ctx.batch, ids.shape[1], dtype=torch.long, device=ctx.device),
        "pixel_values": make_pixels(vision, ctx.batch, ctx.device).unsqueeze(1),
        "pixel_attention_mask": torch.ones(ctx.batch, 1, dtype=torch.bool, device=ctx.device),
        "action_embeds": torch.randn(ctx.batch, 1 + chunk, int(dit.hidden_size), device=ctx.device),
    }


@recipe(priority=5120, needs=("past_time_features",))
def lagged_forecast_inputs(ctx: RecipeContext) -> dict[str, Any] | None:
    """Probabilistic forecasters with lagged inputs (TimeSeriesTransformer, Autoformer, Informer): the past is
    ``context_length + max(lags_sequence)`` steps (their ``_past_length``), with ``num_time_features`` time features
    per step and an observed mask; the future the decoder is taught on is ``prediction_length`` steps of values and
    time features; static features when the config declares them; as ``TimeSeriesTransformerModel.forward``
    documents them (transformers/models/time_series_transformer/modeling_time_series_transformer.py)."""
    import torch

    lags = getattr(ctx.config, "lags_sequence", None)
    if not lags or not isinstance(getattr(ctx.config, "context_length", None), int):
        return None
    past, future = int(ctx.config.context_length) + max(lags), int(ctx.config.prediction_length)
    channels = [int(ctx.config.input_size)] if int(getattr(ctx.config, "input_size", 1)) > 1 else []
    times = int(getattr(ctx.config, "num_time_features", 0))
    made = {
        "past_values": torch.randn(ctx.batch, past, *channels, device=ctx.device),
        "past_time_features": torch.randn(ctx.batch, past, times, device=ctx.device),
        "past_observed_mask": torch.ones(ctx.batch, past, *channels, device=ctx.device),
    }
    if "future_values" in ctx.params:
        made["future_values"] = torch.randn(ctx.batch, future, *channels, device=ctx.device)
        made["future_time_features"] = torch.randn(ctx.batch, future, times, device=ctx.device)
    if int(getattr(ctx.config, "num_static_categorical_features", 0)):
        made["static_categorical_features"] = torch.zeros(ctx.batch, int(ctx.config.num_static_categorical_features), dtype=torch.long, device=ctx.device)
    if int(getattr(ctx.config, "num_static_real_features", 0)):
        made["static_real_features"] = torch.randn(ctx.batch, int(ctx.config.num_static_real_features), device=ctx.device)
    return made


@recipe(priority=5130, needs=("decoder_input_ids",))
def codebook_decoder_ids(ctx: RecipeContext) -> dict[str, Any] | None:
    """A text-to-music model whole (``MusicgenForConditionalGeneration``, MusicGen Melody's): its text encoder reads
    ``input_ids`` and its decoder ``decoder_input_ids`` of shape (B * ``decoder.num_codebooks``, steps), the
    codebooks flattened into the batch, in the decoder's vocabulary (transformers/models/musicgen/
    modeling_musicgen.py, MusicgenForConditionalGeneration.forward's docstring)."""

    decoder = getattr(ctx.config, "decoder", None)
    codebooks = getattr(decoder, "num_codebooks", None)
    if not isinstance(codebooks, int) or codebooks < 1:
        return None
    return {"decoder_input_ids": text_ids(decoder, ctx.batch * codebooks, ctx.seq, ctx.device)}


@recipe(priority=5140, needs=("kwargs",))
def time_condition_inputs(ctx: RecipeContext) -> dict[str, Any] | None:
    """A decoder whose layers are conditioned on a time embedding passed through the forward's keywords: Voxtral
    Realtime's text model scales each layer's normed states by ``1 + ada_rms_norm(t_cond)``, and its parent passes
    ``t_cond``, the sinusoidal embedding of the delay (``default_num_delay_tokens``) of shape (1, 1, hidden),
    broadcast over the batch (transformers/models/voxtral_realtime/modeling_voxtral_realtime.py,
    VoxtralRealtimeModel.forward and VoxtralRealtimeTimeEmbedding). Recognised by a layer taking ``t_cond``."""

    import torch

    if "t_cond" in ctx.inputs or not isinstance(getattr(ctx.config, "hidden_size", None), int):
        return None
    try:  # a model that makes t_cond itself (VoxtralRealtimeModel) passes it on: not this family's part
        if "t_cond" in inspect.getsource(type(ctx.inner).forward):
            return None
    except (OSError, TypeError):
        return None
    classes = {type(m) for m in ctx.inner.modules()}
    if not any("t_cond" in inspect.signature(cls.forward).parameters for cls in classes if cls.forward is not torch.nn.Module.forward):
        return None
    dim = int(ctx.config.hidden_size)

    delays = [d for c in (ctx.config, *ancestor_configs(type(ctx.config))) if isinstance(d := getattr(c, "default_num_delay_tokens", None), int)]
    delay = float(delays[0] if delays else 1)  # the parent config's default (6), as its forward falls back to
    inv_freq = torch.exp(-torch.log(torch.tensor(10000.0)) * torch.arange(dim // 2).float() / (dim // 2))
    emb = delay * inv_freq
    return {"t_cond": torch.cat((emb.cos(), emb.sin()))[None, None].to(ctx.device)}


@recipe(priority=5150, needs=("noisy_images", "timesteps", "condition"))
def diffusion_step_inputs(ctx: RecipeContext) -> dict[str, Any] | None:
    """A diffusion prediction head run one denoising step at a time (VibeVoice's ``diffusion_head(noisy_images,
    timesteps, condition)``): per frame a noisy latent (``latent_size``), its timestep (floats, as the sampling loop
    passes ``timestep.repeat(n).to(latent)``) and the language model's hidden state as the condition
    (``hidden_size``), as VibeVoiceForConditionalGeneration's sampling loop calls it (transformers/models/
    vibevoice/generation_vibevoice.py)."""
    import torch

    latent, hidden = getattr(ctx.config, "latent_size", None), getattr(ctx.config, "hidden_size", None)
    if not isinstance(latent, int) or not isinstance(hidden, int):
        return None
    return {
        "noisy_images": torch.randn(ctx.batch, latent, device=ctx.device),
        "timesteps": torch.full((ctx.batch,), 500.0, device=ctx.device),  # a mid-schedule step of its 1000-step DDPM
        "condition": torch.randn(ctx.batch, hidden, device=ctx.device),
    }
