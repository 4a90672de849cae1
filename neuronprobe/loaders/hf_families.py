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

SAM_RECIPES: tuple[Recipe, ...] = ()


# --- vision towers on patch grids (Qwen-VL, GLM-V, Kimi, Molmo, PaddleOCR-VL, ...) --------

GRID_RECIPES: tuple[Recipe, ...] = ()


# --- audio and speech ---------------------------------------------------------------------

AUDIO_RECIPES: tuple[Recipe, ...] = ()


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
