"""The config: built from the model type with ``--set`` overrides, completed, shrunk."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import math
import re
from collections.abc import Callable, Iterable
from typing import Any

from neuronprobe.errors import InputError
from neuronprobe.loaders.hf.error_texts import error_text

DEFAULT_IMAGE_SIZE = 224
DEFAULT_CHANNELS = 3
DEFAULT_MEL_BINS = 80
AUDIO_SAMPLES = 16000  # one second at 16 kHz: what wav2vec-style encoders take
ALT_AUDIO_FRAMES = 128
LONG_SERIES = 2048  # time-series contexts above this are cut to the sequence length
TEXT_ID_LIMIT = 1000  # ids well below every special token of the zoo's vocabularies
QWEN_GRID = 4  # an image grid of 4x4 patches (divisible by the spatial merge of 2)

# Shrinking for the real-CPU strategy: ops and their lines do not depend on these sizes, as long as every
# layer kind of the full config stays (:func:`kind_depth`, checked on the built modules by shrink.py).
SHRUNK_LAYERS = 2
SHRUNK_EXPERTS = 4
SHRUNK_HEADS = 4
SHRUNK_HEAD_DIM = 32
WIDE_HIDDEN = 512  # hidden sizes above this are narrowed

# Config field names, not error texts (those are data: error_texts.py).
_LAYER_FIELD = re.compile(
    r"^(\w+_)?(num_hidden_layers|num_layers)$|^(n_layer|n_layers|encoder_layers|decoder_layers|num_decoder_layers|num_encoder_layers|depth)$"
)
# Fields that say which layers are of which kind (MoE or dense, local or global attention, cross-attention).
# A list of one entry per layer (``layer_types``, ``mlp_layer_types``, ``layers_block_type``, GPT-Neo's
# ``attention_layers``) is found by its length; these name the layers of one kind by their indices:
_KIND_INDEX_FIELDS = (
    "cross_attention_layers",  # mllama's text model: a cross-attention layer at each index
    "mlp_only_layers",  # qwen2_moe, qwen3_moe: dense layers among the sparse ones
    "moe_layers",
    "no_rope_layers",
    "global_attn_indexes",  # sam's vision encoder: global attention among windowed layers
    "full_attn_idxs",
    "fullatt_block_indexes",  # qwen2.5-vl's vision blocks
    "window_block_indexes",
    "window_block_indices",
    "attn_layer_indices",
    "hybrid_layer_ids",
    "local_layer_ids",
)
# A layer kind every n-th layer: a layer of each kind lies within the first period + offset layers
# (nllb-moe, switch_transformers: MoE where (i + 1) % sparse_step == 0; gemma3: global attention where
# (i + 1) % sliding_window_pattern == 0; deepseek: dense below first_k_dense_replace, then MoE every moe_layer_freq).
_KIND_PERIOD_FIELDS = re.compile(
    r"^(\w+_)?sparse_step$|^_?sliding_window_pattern$|^(moe_layer_freq|moe_layer_interval|interleave_moe_layer_step|cross_attention_frequency"
    r"|global_attn_every_n_layers|no_rope_layer_interval|attn_layer_period|expert_layer_period|cross_layer_interval)$"
)
_PER_LAYER_KIND = re.compile("layer|block|type")
_PER_LAYER_SIZE = re.compile(r"^num_|size|heads|dim|channels")  # per-layer widths (sapiens2's num_key_value_heads_per_layer): shapes, not kinds
_KIND_OFFSET_FIELDS = ("first_k_dense_replace", "num_dense_layers", "moe_layer_start_index", "attn_layer_offset", "expert_layer_offset")
_EXPERT_FIELDS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
_TOPK_FIELDS = ("num_experts_per_tok", "moe_topk", "num_experts_per_token", "top_k")
_WIDTH_FIELDS = ("intermediate_size", "moe_intermediate_size", "shared_expert_intermediate_size", "ffn_hidden_size")
IMAGE_TOKEN_FIELDS = ("image_token_id", "image_token_index")
SPECIAL_TOKEN_FIELDS = (
    *IMAGE_TOKEN_FIELDS,
    "video_token_id",
    "video_token_index",
    "audio_token_id",
    "audio_token_index",
    "boi_token_id",
    "eoi_token_id",
    "vision_start_token_id",
    "vision_end_token_id",
)
IMAGE_COUNT_FIELDS = ("mm_tokens_per_image", "image_seq_length", "num_image_tokens", "num_query_tokens")


class BuildError(Exception):
    """transformers could not build the model from this config on this device (its constructor raised)."""


# --- config ------------------------------------------------------------------------


def sub_configs(config: Any) -> list[Any]:
    """The config and every config nested in it (text_config, vision_config, encoder, ...)."""
    from transformers import PretrainedConfig

    found: list[Any] = []
    todo = [config]
    while todo:
        current = todo.pop()
        if any(current is f for f in found):
            continue
        found.append(current)
        todo.extend(v for v in vars(current).values() if isinstance(v, PretrainedConfig))
    return found


def _override_target(config: Any, key: str, model: str) -> tuple[Any, str]:
    """``text_config.num_hidden_layers`` -> (the text config, ``num_hidden_layers``)."""
    *path, leaf = key.split(".")
    target = config
    for part in path:
        target = getattr(target, part, None)
        if target is None or not hasattr(target, "to_dict"):
            raise InputError(f"--set {key}: {model}'s config has no sub-config {part!r}")
    if not hasattr(target, leaf):
        raise InputError(f"--set {key}: {model}'s config has no field {key!r}")
    return target, leaf


def build_config(model_type: str, overrides: Iterable[str]) -> Any:
    """The default config of ``model_type`` with the user's ``--set`` values (dotted keys reach sub-configs)."""
    try:
        from transformers import AutoConfig
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise InputError("hf: models need transformers: pip install 'neuronprobe[hf]'") from exc
    from neuronprobe.limits import check_override

    model = f"hf:{model_type}"
    try:
        config = AutoConfig.for_model(model_type)
    except ValueError as exc:
        raise InputError(f"{model}: unknown transformers model_type ({str(exc).splitlines()[0]})") from exc
    mend_misspelled_defaults(config)
    for text in overrides:
        key, value = parse_override(text)
        target, leaf = _override_target(config, key, model)
        value = check_override(getattr(target, leaf), key, value, model, text.partition("=")[2].strip())
        try:
            setattr(target, leaf, value)
        except Exception as exc:  # the config's own validation (strict dataclasses): still the user's value
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise InputError(f"--set {key}: {model}'s config rejects this value ({first})") from None
    return config


def _one_edit_apart(a: str, b: str) -> bool:
    """One letter changed, dropped or added, or two neighbours swapped (``archirecture`` / ``architecture``)."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        return len(diff) == 1 or (len(diff) == 2 and diff[1] == diff[0] + 1 and (a[diff[0]], a[diff[1]]) == (b[diff[1]], b[diff[0]]))
    short, long = sorted((a, b), key=len)
    return any(long[:i] + long[i + 1 :] == short for i in range(len(long)))


def _misspelled(sub: Any) -> list[tuple[str, str]]:
    """(unknown attribute, the declared field one edit from its name) of a config with declared fields."""
    fields = getattr(type(sub), "__dataclass_fields__", None) or {}
    pairs = []
    for name in [n for n in vars(sub) if n not in fields and not n.startswith("_")]:
        meant = [f for f in fields if _one_edit_apart(name, f)]
        if len(meant) == 1:
            pairs.append((name, meant[0]))
    return pairs


def mend_misspelled_defaults(config: Any) -> None:
    """Fields a default sub-config got under a misspelled name, moved to the field meant, in place.

    transformers' EdgeTAM vision config builds its timm backbone with ``{"archirecture": "repvit_m1"}``
    (models/edgetam/configuration_edgetam.py): the typo is kept as an unknown attribute and the backbone is
    timm's default resnet50, whose 1024 channels its neck (``backbone_channel_list`` [384, 192, 96, 48]) cannot
    take. A declared field still at its class default, next to an unknown attribute one edit from its name,
    gets that attribute's value; configs without declared fields are left alone.
    """
    for sub in sub_configs(config):
        fields = getattr(type(sub), "__dataclass_fields__", {})
        for name, meant in _misspelled(sub):
            default = getattr(fields[meant], "default", dataclasses.MISSING)
            if default is not dataclasses.MISSING and getattr(sub, meant) == default != getattr(sub, name):
                with tolerant():
                    setattr(sub, meant, getattr(sub, name))


def misspelled_note(config: Any) -> str | None:
    """Say which misspelled default fields :func:`mend_misspelled_defaults` took (for the report)."""
    taken = [
        f"{type(sub).__name__}.{meant}={getattr(sub, meant)!r} (spelled {name!r})"
        for sub in sub_configs(config)
        for name, meant in _misspelled(sub)
        if getattr(sub, meant) == getattr(sub, name)
    ]
    return f"the default config misspells a field, so transformers ignores it; the capture used {', '.join(taken)} (give yours with --set)" if taken else None


def _int_field(config: Any, name: str) -> int | None:
    try:
        value = vars(config).get(name, getattr(config, name, None))
    except Exception:  # a property that cannot answer on this config
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _per_layer_kinds(name: str, value: Any, layers: int) -> bool:
    """A list of one kind per layer (``layer_types``, ``mlp_layer_types``, ``layers_block_type``): one entry per layer,
    of a name that says layer, block or type (not a width), with more than one kind and not every entry distinct."""
    if len(value) != layers or not _PER_LAYER_KIND.search(name) or _PER_LAYER_SIZE.search(name):
        return False
    return all(isinstance(v, (str, bool, int)) for v in value) and 1 < len(set(value)) < layers


def kind_depth(config: Any, layers: int, floor: int = SHRUNK_LAYERS) -> int:
    """How many of a stack of ``layers`` layers a shrunken config keeps so that each layer kind its fields name is
    among them: a per-layer list (``layer_types``...: up to the first layer of its last kind to appear), the indices
    of one kind (:data:`_KIND_INDEX_FIELDS`: up to the first listed and the first unlisted layer), or a period and an
    offset (:data:`_KIND_PERIOD_FIELDS`, :data:`_KIND_OFFSET_FIELDS`: period + offset layers). At least
    ``floor``, at most ``layers``. shrink.py checks the result against the built modules."""
    need = floor
    listed = False  # a per-layer list names every layer's kind: the periods it was derived from add nothing
    for name, value in list(vars(config).items()):
        if not isinstance(value, (list, tuple)) or not value:
            continue
        if name in _KIND_INDEX_FIELDS and all(isinstance(v, int) and 0 <= v < layers for v in value):
            unlisted = next((i for i in range(layers) if i not in value), None)
            need = max(need, 1 + min(value), 1 + unlisted if unlisted is not None else 0)
        elif _per_layer_kinds(name, value, layers):
            need = max(need, 1 + max(value.index(kind) for kind in set(value)))
            listed = True
    periods = [v for name in vars(config) if _KIND_PERIOD_FIELDS.match(name) and (v := _int_field(config, name)) is not None and v > 1]
    offsets = [v for name in _KIND_OFFSET_FIELDS if (v := _int_field(config, name)) is not None and v > 0]
    if (periods or offsets) and not listed:
        need = max(need, max(periods, default=1) + max(offsets, default=0))
    return min(need, layers)


def layer_counts(config: Any) -> set[int]:
    """The layer counts of every (sub-)config above :data:`SHRUNK_LAYERS`: the stacks a shrunken config cuts."""
    return {
        v
        for sub in sub_configs(config)
        for name in list(vars(sub))
        if _LAYER_FIELD.match(name) and (v := _int_field(sub, name)) is not None and v > SHRUNK_LAYERS
    }


def _shrink_one(config: Any, narrow: bool = True, depths: dict[int, int] | None = None) -> list[str]:
    """Shrink one (sub-)config in place; what changed. ``depths``: layers to keep per full layer count, found on the
    built modules (shrink.py), on top of what the config's own kind fields need."""
    changes: list[str] = []

    def cap(name: str, limit: int) -> None:
        try:
            value = getattr(config, name, None)
        except Exception:  # a per-layer field of a heterogeneous config (dots3_note's num_local_experts): no one value
            return
        if isinstance(value, int) and not isinstance(value, bool) and value > limit:
            try:
                setattr(config, name, limit)
            except Exception:  # a strict config refuses: keep its value
                return
            changes.append(f"{name} {value}->{limit}")

    for name in list(vars(config)):
        if _LAYER_FIELD.match(name) and (layers := _int_field(config, name)) is not None:
            cap(name, min(layers, max(kind_depth(config, layers), (depths or {}).get(layers, 0))))
    for name in _EXPERT_FIELDS:
        cap(name, SHRUNK_EXPERTS)
    for name in _TOPK_FIELDS:
        cap(name, min(SHRUNK_EXPERTS, 2))
    if not narrow:
        return changes
    hidden = getattr(config, "hidden_size", None)
    heads = getattr(config, "num_attention_heads", None)
    if isinstance(hidden, int) and isinstance(heads, int) and hidden > WIDE_HIDDEN and heads > 0:
        head_dim = getattr(config, "head_dim", None)
        # An explicit head_dim is kept: rotary sections (mrope) are sized by it.
        width_per_head = head_dim if isinstance(head_dim, int) and head_dim > 0 else SHRUNK_HEAD_DIM
        sections = "mrope_section" in getattr(type(config), "ignore_keys_at_rope_validation", ())
        if sections and not (isinstance(head_dim, int) and head_dim > 0) and hidden % heads == 0:
            # A multimodal rotary whose sections default in the modeling code (ernie4_5_vl_moe's [22, 22, 20]) is
            # sized by the implied head width: kept, so the shrunken model still builds.
            width_per_head = head_dim = hidden // heads
            with tolerant():
                config.head_dim = head_dim
                changes.append(f"head_dim {head_dim} (kept: its rotary sections are sized by it)")
        new_heads = min(heads, SHRUNK_HEADS)
        kv = getattr(config, "num_key_value_heads", None)
        if not (isinstance(head_dim, int) and head_dim > 0) and hidden % heads == 0 and hidden // heads != SHRUNK_HEAD_DIM:
            with tolerant():
                config.head_dim = SHRUNK_HEAD_DIM  # models that read head_dim from the config
                changes.append(f"head_dim {hidden // heads}->{SHRUNK_HEAD_DIM}")
        cap("num_attention_heads", new_heads)
        if isinstance(kv, int) and kv > 0:
            cap("num_key_value_heads", new_heads if kv >= new_heads else 1)
        cap("hidden_size", new_heads * width_per_head)
        for name in _WIDTH_FIELDS:
            cap(name, 2 * new_heads * width_per_head)
    hidden = getattr(config, "hidden_size", None)
    heads = getattr(config, "num_attention_heads", None)
    if isinstance(hidden, int) and isinstance(heads, int) and heads > 0 and hidden % heads:  # keep the width divisible by the heads
        cap("num_attention_heads", max(d for d in range(1, heads + 1) if hidden % d == 0))
    return changes


# Fields some default configs leave unset although the forward needs them (deepseek_v2's top-k,
# step3p5's sliding window, hunyuan_vl_text's head_dim): a repair after such a forward failed, said in the report.
# diffusion_gemma_text's layers always hold a router and experts, but its default config leaves their sizes unset.
_UNSET_FIELD_VALUES: dict[str, Any] = {
    "num_experts_per_tok": 2,
    "n_group": 1,
    "topk_group": 1,
    "sliding_window": 4096,
    "num_experts": 8,
    "top_k_experts": 2,
    # DbrxAttention clamps its qkv to +-clip_qkv, None in the default config: torch refuses a clamp with neither
    # bound (transformers/models/dbrx/modeling_dbrx.py); databricks/dbrx-base and -instruct set 8.
    "clip_qkv": 8,
    # dots1's layers past first_k_dense_replace are MoE, but its default config leaves the expert counts None
    # (torch.empty(None, ...) in Dots1Experts, transformers/models/dots1/modeling_dots1.py).
    "n_routed_experts": 8,
    "n_shared_experts": 1,
}


def complete_config(config: Any) -> list[str]:
    """Give the unset fields of :data:`_UNSET_FIELD_VALUES` (and ``head_dim``) a value, in place; what was set."""
    changes: list[str] = []
    for sub in sub_configs(config):
        fills = dict(_UNSET_FIELD_VALUES)
        hidden, heads = getattr(sub, "hidden_size", None), getattr(sub, "num_attention_heads", None)
        if isinstance(hidden, int) and isinstance(heads, int) and heads > 0:
            fills["head_dim"] = hidden // heads
        if isinstance(width := getattr(sub, "intermediate_size", None), int):
            fills["moe_intermediate_size"] = width  # an expert as wide as the dense MLP
        if isinstance(labels := vars(sub).get("num_labels") or len(getattr(sub, "id2label", None) or {}), int) and labels > 0:
            fills["class_thresholds"] = [0.5] * labels  # pp_doclayout_v2 keeps each class's boxes above its score threshold
            fills["class_order"] = list(range(labels))  # and ranks each class for its reading-order model (label ids)
        vocab = vocab_of(sub)
        if hasattr(sub, "vision_config") and vocab > TEXT_ID_LIMIT + 1:
            for name in (
                *IMAGE_TOKEN_FIELDS,
                "video_token_id",
                "video_token_index",
            ):  # blip-2, instructblipvideo: where the query outputs go; an id the text ids never use
                fills[name] = vocab - 1
        for name, value in fills.items():
            if name in vars(sub) and vars(sub)[name] is None:  # vars: a per-layer config refuses a global head_dim read
                with tolerant():
                    setattr(sub, name, value)
                    changes.append(f"{name}={value}")
    # A special token id past the text vocabulary (idefics3's image token 128257 with 32000 ids): the embedding grows to hold it.
    special = [v for v in (first_field([config], (name,)) for name in SPECIAL_TOKEN_FIELDS) if isinstance(v, int)]
    for sub in sub_configs(config):
        size = getattr(sub, "vocab_size", None)
        if special and isinstance(size, int) and "vocab_size" in vars(sub) and hasattr(sub, "hidden_size") and max(special) >= size:
            with tolerant():
                sub.vocab_size = max(special) + 1
                changes.append(f"{type(sub).__name__}.vocab_size={sub.vocab_size} (to hold token id {max(special)})")
    return changes


_POOL_FIELDS = ("scale_factor", "pixel_shuffle_factor", "downsample_factor")  # a connector's pixel shuffle: patches per side it folds into one token


def pooled_image_size(config: Any) -> list[str]:
    """A vision image size whose patch grid the connector can pool, in place; what was set.

    Some default configs pair a vision tower with a connector that cannot fold its patch grid:
    gemma3 and shieldgemma2 (224 px in patches of 16 is 14 a side, pooled to ``mm_tokens_per_image``
    256 = 16 a side: ``Gemma3MultiModalProjector`` gets an AvgPool2d of kernel 0, "stride should not be
    zero"), idefics3 and smolvlm (7 patches a side, pixel shuffle ``scale_factor`` 2), modernvbert and
    ultravbert (14 a side, ``pixel_shuffle_factor`` 4: "shape [.., 7, 3, ..] is invalid for input of size").
    The checkpoints use sizes that fit (gemma3 896 px in 64 patches of 14); the default config gets the
    smallest size at or above its own whose patch grid is a whole multiple of what the connector needs.
    No input runs on such a config (the connector is built from it), so :func:`load` checks it every time."""

    changes: list[str] = []
    for sub in sub_configs(config):
        vision = getattr(sub, "vision_config", None)
        size, patch = getattr(vision, "image_size", None), getattr(vision, "patch_size", None)
        if vision is None or not (isinstance(size, int) and isinstance(patch, int) and patch > 0):
            continue
        factor = next((v for n in _POOL_FIELDS if isinstance(v := getattr(sub, n, None), int) and v > 1), None)
        tokens = getattr(sub, "mm_tokens_per_image", None)
        if factor is None and isinstance(tokens, int) and math.isqrt(tokens) ** 2 == tokens:
            factor = math.isqrt(tokens)  # average-pooled to this many tokens a side: the grid must be a multiple of it
        if factor is None or ((size // patch) % factor == 0 and size // patch >= factor):
            continue
        side = max(factor, -(-(size // patch) // factor) * factor)
        with tolerant():
            vision.image_size = side * patch
            changes.append(f"{type(vision).__name__}.image_size={side * patch} (a grid of {side} patches, which its connector pools by {factor})")
    return changes


def fit_rotary(config: Any, sections: tuple[int, ...], width: int) -> list[str]:
    """Make the rotary width of the sub-config whose rotary gives ``width`` frequencies fill the multimodal
    rotary ``sections``, in place; what was set. GLM-V's text rotary splits its ``head_dim * partial_rotary_factor / 2``
    frequencies by ``mrope_section`` (default [8, 12, 12], glm4v/modeling_glm4v.py ``recomposition_frequencies``),
    but the default configs leave out what the checkpoints set: glm4v_text and glm_image_text have no
    ``partial_rotary_factor`` (GLM-4.1V's is 0.5), glm4v_moe_text no ``head_dim`` (GLM-4.5V's is 128). The field
    the config lacks is set: the head width given a partial factor, else the factor given the head width."""
    half = sum(sections)
    changes: list[str] = []
    for sub in sub_configs(config):
        rope, hidden, heads = getattr(sub, "rope_parameters", None), getattr(sub, "hidden_size", None), getattr(sub, "num_attention_heads", None)
        if not (isinstance(rope, dict) and isinstance(hidden, int) and isinstance(heads, int) and heads > 0):
            continue
        head = getattr(sub, "head_dim", None) or hidden // heads
        partial = rope.get("partial_rotary_factor")
        if (int(head * (partial or 1.0)) + 1) // 2 != width or half <= 0:  # arange(0, dim, 2): that many frequencies
            continue
        with tolerant():
            if (partial and partial < 1) or 2 * half > head:  # the head grows to hold the sections (a shrunken head too)
                sub.head_dim = int(2 * half / (partial or 1.0))
                changes.append(f"head_dim={sub.head_dim}")
            else:
                sub.rope_parameters = {**rope, "partial_rotary_factor": 2 * half / head}
                sub.head_dim = head  # kept when the shrunken config narrows the heads
                changes.append(f"partial_rotary_factor={2 * half / head:g}")
    return changes


def may_need_unset_fields(message: str, config: Callable[[], Any]) -> bool:
    """The forward failed on a None, and the config has an unset field neuronprobe knows a value for.

    ``config`` builds the config: only called when the message is of that kind.
    """
    if not error_text("unset-field").search(message):
        return False
    return bool(complete_config(config()))


def tolerant() -> contextlib.suppress:
    """A context that swallows a strict config's refusal of one field (an Exception; never a KeyboardInterrupt
    or a caller's timeout, which are BaseExceptions)."""
    return contextlib.suppress(Exception)


def shrink_config(config: Any, narrow: bool = True, depths: dict[int, int] | None = None) -> tuple[Any, list[str]]:
    """A copy with fewer layers and experts and (``narrow``) narrower layers, and what changed (said in the report).

    ``narrow=False`` keeps every width: for a component whose inputs are recorded
    from its parent at the parent's widths. Each stack keeps a layer of every kind its config's fields
    name (:func:`kind_depth`), and at least ``depths[full count]`` layers (found on the built modules: shrink.py).
    """
    small = copy.deepcopy(config)
    changes: list[str] = []
    subs = sub_configs(small)
    widths = {id(sub): getattr(sub, "hidden_size", None) for sub in subs}
    for sub in subs:
        changes.extend(_shrink_one(sub, narrow, depths))
    # A sub-config that names another's width (a Q-Former's encoder_hidden_size is the vision hidden_size) follows it.
    narrowed = {old: getattr(sub, "hidden_size", None) for sub in subs if (old := widths[id(sub)]) != getattr(sub, "hidden_size", None)}
    for sub in subs:
        for name, value in list(vars(sub).items()):
            follows = name.endswith(("hidden_size", "hidden_dim", "embed_dim")) or name == "latent_channels"  # glm_image's VQ reads the vision width
            if name != "hidden_size" and follows and value in narrowed and isinstance(value, int):
                with tolerant():
                    setattr(sub, name, narrowed[value])
                    changes.append(f"{name} {value}->{narrowed[value]}")
    return small, changes


def ancestor_configs(config_class: type, depth: int = 3) -> list[Any]:
    """Default configs of the model types that nest ``config_class``, directly or through up to ``depth`` levels."""
    from transformers import CONFIG_MAPPING

    found: list[Any] = []
    classes = [config_class]
    for _ in range(depth):
        owners = [t for cls in classes for t, _attr in _sub_config_owners().get(cls, [])]
        classes = []
        for owner in dict.fromkeys(owners):
            with tolerant():
                found.append(CONFIG_MAPPING[owner]())
                classes.append(CONFIG_MAPPING[owner])
    return found


def fill_from_parent(config: Any, error: BaseException) -> list[str]:
    """A sub-config type whose modeling code reads a field only its parent config sets: "'T5Gemma2TextConfig' object
    has no attribute 'dropout_rate'" (``T5Gemma2Config.__post_init__`` sets ``encoder.text_config.dropout_rate``,
    transformers/models/t5gemma2/configuration_t5gemma2.py). The field gets the value the nearest ancestor's default
    config gives its nested config of that class, in place; what was set (empty when no ancestor sets it)."""
    m = error_text("missing-attribute").search(str(error))
    if not isinstance(error, AttributeError) or m is None:
        return []
    class_name, name = m.groups()
    lacking = [sub for sub in sub_configs(config) if type(sub).__name__ == class_name and not hasattr(sub, name)]
    if not lacking:
        return []
    for ancestor in ancestor_configs(type(lacking[0])):
        values = [getattr(sub, name) for sub in sub_configs(ancestor) if type(sub).__name__ == class_name and hasattr(sub, name)]
        if values:
            for sub in lacking:
                with tolerant():
                    setattr(sub, name, values[0])
            if any(not hasattr(sub, name) for sub in lacking):  # a strict config refused it: nothing was filled
                return []
            return [f"{class_name}.{name}={values[0]!r} (as hf:{ancestor.model_type} sets it)"]
    return []


def _enclosing(config: Any, sub: Any) -> list[Any]:
    """The configs of ``config``'s tree that nest ``sub`` directly, then their own enclosing configs, nearest first."""
    from transformers import PretrainedConfig

    found: list[Any] = []
    todo = [sub]
    while todo:
        current = todo.pop(0)
        for owner in sub_configs(config):
            if any(v is current for v in vars(owner).values() if isinstance(v, PretrainedConfig)) and not any(owner is f for f in found):
                found.append(owner)
                todo.append(owner)
    return found


def fill_from_enclosing(config: Any, error: BaseException) -> list[str]:
    """A nested config whose modeling code reads a field the enclosing config holds: "'DbrxAttentionConfig' object
    has no attribute 'rope_theta'" (``DbrxAttention`` reads ``attn_config.rope_theta``, but ``DbrxConfig`` keeps the
    theta in its own ``rope_parameters``, which is what its rotary embedding uses: transformers/models/dbrx/
    modeling_dbrx.py). The field gets the enclosing config's value (or its ``rope_parameters`` entry), in place."""
    m = error_text("missing-attribute").search(str(error))
    if not isinstance(error, AttributeError) or m is None:
        return []
    class_name, name = m.groups()
    lacking = [sub for sub in sub_configs(config) if type(sub).__name__ == class_name and not hasattr(sub, name)]
    for sub in lacking:
        for owner in _enclosing(config, sub):
            rope = getattr(owner, "rope_parameters", None)
            value = vars(owner).get(name, rope.get(name) if isinstance(rope, dict) else None)
            if value is not None:
                with tolerant():
                    setattr(sub, name, value)
                    return [f"{class_name}.{name}={value!r} (as its enclosing {type(owner).__name__} holds it)"]
    return []


def _derived_defaults(config: Any, error: BaseException) -> list[str]:
    """A field the config does not declare, or leaves None, that transformers' configs document a default for in
    terms of another field: ``num_key_value_heads`` "defaults to ``num_attention_heads``" (no grouped-query
    attention; e.g. transformers/models/llama/configuration_llama.py). nemotron's default config leaves it None
    (``num_heads // None`` in NemotronAttention); moonshine_streaming's decoder reads it from a config that has no
    such field (transformers/models/moonshine_streaming/modeling_moonshine_streaming.py)."""
    m = error_text("missing-attribute").search(str(error))
    named = m.group(2) if isinstance(error, AttributeError) and m else None
    if named not in (None, "num_key_value_heads") or (named is None and not error_text("unset-field").search(str(error))):
        return []
    changes: list[str] = []
    for sub in sub_configs(config):
        heads = vars(sub).get("num_attention_heads")
        unset = "num_key_value_heads" in vars(sub) and vars(sub)["num_key_value_heads"] is None
        missing = named is not None and m is not None and type(sub).__name__ == m.group(1) and not hasattr(sub, "num_key_value_heads")
        if isinstance(heads, int) and (unset or missing):
            with tolerant():
                sub.num_key_value_heads = heads
                changes.append(f"{type(sub).__name__}.num_key_value_heads={heads} (as num_attention_heads: no grouped-query attention)")
    return changes


# Fields a forecasting model's default config leaves None, with the value its published checkpoints use: the
# huggingface/{time-series-transformer,autoformer,informer}-tourism-monthly models forecast 24 months ahead.
_FORECAST_FIELDS: dict[str, int] = {"prediction_length": 24}


def fill_forecast_horizon(config: Any, error: BaseException) -> list[str]:
    """ "The `prediction_length` config needs to be specified." (TimeSeriesTransformerModel, AutoformerModel,
    InformerModel: transformers/models/time_series_transformer/modeling_time_series_transformer.py): the horizon
    of :data:`_FORECAST_FIELDS`, and ``context_length``, which "defaults to ``prediction_length``" in those configs
    but was derived from the unset horizon when the config was made."""
    m = error_text("config-needs-field").search(str(error))
    if m is None or m.group(1) not in _FORECAST_FIELDS:
        return []
    name, value = m.group(1), _FORECAST_FIELDS[m.group(1)]
    changes: list[str] = []
    for sub in sub_configs(config):
        if name in vars(sub) and vars(sub)[name] is None:
            with tolerant():
                setattr(sub, name, value)
                changes.append(f"{name}={value}")
                if vars(sub).get("context_length") is None and "context_length" in vars(sub):
                    sub.context_length = value
                    changes.append(f"context_length={value} (its documented default: prediction_length)")
    return changes


def lists_for_tuples(config: Any, error: BaseException) -> list[str]:
    """A constructor that concatenates a list field to a list, where the default config holds a tuple: vitmatte's
    ``[config.hidden_size] + config.fusion_hidden_sizes`` (transformers/models/vitmatte/modeling_vitmatte.py). A
    config loaded from a checkpoint's config.json always holds lists, so the tuple fields become lists, in place."""
    if not isinstance(error, TypeError) or not error_text("tuple-concatenated-to-list").search(str(error)):
        return []
    changes: list[str] = []
    for sub in sub_configs(config):
        for name, value in list(vars(sub).items()):
            if isinstance(value, tuple) and not hasattr(value, "_fields"):
                with tolerant():
                    setattr(sub, name, list(value))
                    changes.append(f"{type(sub).__name__}.{name} as a list")
    return changes


def rope_per_layer_type(config: Any, error: BaseException) -> list[str]:
    """KeyError: 'full_attention': a rotary embedding that reads ``rope_parameters[layer_type]`` for each of the
    config's ``layer_types``, where the default config declares no RoPE parameters at all (cohere_compass_text:
    ``rope_parameters`` is ``{}``; transformers/models/cohere_compass/modeling_cohere_compass.py,
    CohereCompassRotaryEmbedding). Each layer type gets the config class's default RoPE (``default_rope_type``
    at its ``default_theta``, transformers/modeling_rope_utils.py), in place."""
    if not isinstance(error, KeyError) or not error.args or not isinstance(error.args[0], str):
        return []
    key = error.args[0]
    changes: list[str] = []
    for sub in sub_configs(config):
        types = vars(sub).get("layer_types")
        rope = vars(sub).get("rope_parameters")
        if isinstance(types, list) and key in types and isinstance(rope, dict) and key not in rope and not rope:
            default = {"rope_type": getattr(sub, "default_rope_type", "default"), "rope_theta": float(getattr(sub, "default_theta", 10000.0))}
            with tolerant():
                sub.rope_parameters = {t: dict(default) for t in dict.fromkeys(types)}
                changes.append(f"{type(sub).__name__}.rope_parameters={{{', '.join(dict.fromkeys(types))}: {default}}} (the default config declares none)")
    return changes


def empty_architectures(config: Any, error: BaseException) -> list[str]:
    """ "'NoneType' object is not iterable" from the auto class's choice among a type's several models (funnel:
    FunnelModel, FunnelBaseModel): ``_get_model_class`` loops over ``config.architectures``, None in a default
    config (transformers/models/auto/auto_factory.py). An empty list, with which it takes the type's first model,
    its documented default."""
    if not (isinstance(error, TypeError) and bool(error_text("none-not-iterable").search(str(error)))):
        return []
    if "architectures" not in vars(config) or vars(config)["architectures"] is not None:
        return []
    tb = error.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_name != "_get_model_class":
        tb = tb.tb_next
    if tb is None:
        return []
    with tolerant():
        config.architectures = []
        return ["architectures=[] (the auto class then takes the type's first model)"]
    return []


# A docstring example's keyword (``vocab_size=33``), not an error text.
_EXAMPLE_ARGUMENT = re.compile(r"(\w+)=(\d+(?:\.\d+)?)\b")


def docstring_example_values(config: Any, error: BaseException) -> list[str]:
    """A size the default config leaves None that the config class's own docstring example gives: "empty():
    argument 'size' ... found element of type NoneType" from ``nn.Embedding(config.vocab_size, ...)``, where
    EsmConfig's example is ``EsmConfig(vocab_size=33)`` (transformers/models/esm/configuration_esm.py; the ESM-2
    checkpoints' 33 tokens). Numbers only, and only for fields that are None, in place."""
    if not error_text("unset-field").search(str(error)):
        return []
    changes: list[str] = []
    for sub in sub_configs(config):
        doc = type(sub).__doc__ or ""
        calls = re.findall(rf"{type(sub).__name__}\(([^)]*)\)", doc)
        for name, text in (pair for call in calls for pair in _EXAMPLE_ARGUMENT.findall(call)):
            if name in vars(sub) and vars(sub)[name] is None:
                value = float(text) if "." in text else int(text)
                with tolerant():
                    setattr(sub, name, value)
                    changes.append(f"{type(sub).__name__}.{name}={value} (its docstring's example)")
    return changes


def mlp_layer_types_from_dense_count(config: Any, error: BaseException) -> list[str]:
    """'NoneType' object is not subscriptable at ``config.mlp_layer_types[layer_idx]`` (DeepseekOcr2TextDecoderLayer,
    transformers/models/deepseek_ocr2/modeling_deepseek_ocr2.py): a MoE config (``n_routed_experts``) whose default
    leaves the per-layer MLP kinds None. The DeepSeek family's rule, as DeepseekV32Config.__post_init__ writes it
    (transformers/models/deepseek_v32/configuration_deepseek_v32.py): the first ``first_k_dense_replace`` layers
    dense (DeepseekV2Config's default 0), the rest sparse; in place."""
    if not (isinstance(error, TypeError) and bool(error_text("none-not-subscriptable").search(str(error)))):
        return []
    changes: list[str] = []
    for sub in sub_configs(config):
        layers, experts = vars(sub).get("num_hidden_layers"), vars(sub).get("n_routed_experts")
        if "mlp_layer_types" in vars(sub) and vars(sub)["mlp_layer_types"] is None and isinstance(layers, int) and experts:
            dense = min(int(getattr(sub, "first_k_dense_replace", 0) or 0), layers)
            with tolerant():
                sub.mlp_layer_types = ["dense"] * dense + ["sparse"] * (layers - dense)
                changes.append(f"{type(sub).__name__}.mlp_layer_types={dense} dense then sparse (the DeepSeek first_k_dense_replace rule)")
    return changes


def timm_model_name(config: Any, error: BaseException) -> list[str]:
    """ "backbone is not set in the config. Please set it to a timm model name." (TimmBackbone, transformers/models/
    timm_backbone/modeling_timm_backbone.py): the name transformers' own timm config defaults to
    (``TimmWrapperConfig.architecture``, "resnet50"; the timm_wrapper type is analysed with it), untrained weights."""
    m = error_text("timm-name-unset").search(str(error))
    if m is None or m.group(1) not in vars(config) or vars(config)[m.group(1)] is not None:
        return []
    try:
        from transformers import TimmWrapperConfig

        name = TimmWrapperConfig().architecture
    except Exception:  # no timm config in this transformers
        return []
    with tolerant():
        setattr(config, m.group(1), name)
        return [f"{m.group(1)}={name!r} (transformers' TimmWrapperConfig default)"]
    return []


def complete_for_build(config: Any, error: BaseException) -> list[str]:
    """What a constructor that raised on the default config lacks, filled in place: a field its parent config sets
    (:func:`fill_from_parent`) or its enclosing config holds (:func:`fill_from_enclosing`), one documented in terms
    of another (:func:`_derived_defaults`), a forecast horizon (:func:`fill_forecast_horizon`), lists where the
    default config holds tuples (:func:`lists_for_tuples`), RoPE per layer type (:func:`rope_per_layer_type`), a timm model name (:func:`timm_model_name`), empty ``architectures`` (:func:`empty_architectures`), a value the config's docstring example gives
    (:func:`docstring_example_values`), MoE layer kinds (:func:`mlp_layer_types_from_dense_count`), or a size left unset (:func:`complete_config`:
    "empty(): argument 'size' ... found element of type NoneType", diffusion_gemma_text's router and experts);
    what was set, empty when nothing was."""
    for fill in (
        fill_from_parent,
        fill_from_enclosing,
        _derived_defaults,
        fill_forecast_horizon,
        lists_for_tuples,
        rope_per_layer_type,
        timm_model_name,
        empty_architectures,
        docstring_example_values,
        mlp_layer_types_from_dense_count,
    ):
        changes = fill(config, error)
        if changes:
            return changes
    if error_text("unset-field").search(str(error)):
        return [f"{c} (unset in the default config)" for c in complete_config(config)]
    return []


def _sub_config_owners() -> dict[type, list[tuple[str, str]]]:
    """config class -> [(parent model_type, attribute)] for every config that nests it as a sub-config."""
    from transformers import CONFIG_MAPPING

    owners: dict[type, list[tuple[str, str]]] = {}
    for model_type in list(CONFIG_MAPPING.keys()):
        try:
            config_class = CONFIG_MAPPING[model_type]
        except Exception:  # a type whose config module cannot import here
            continue
        for attr, sub in (getattr(config_class, "sub_configs", None) or {}).items():
            if isinstance(sub, type):
                owners.setdefault(sub, []).append((model_type, attr))
    return owners


def parents_of(model_type: str, config_class: type) -> list[tuple[str, str]]:
    """The model types that nest this config, the one whose name starts the component's first."""
    found = [p for p in _sub_config_owners().get(config_class, []) if p[0] != model_type]
    return sorted(found, key=lambda p: (not model_type.startswith(p[0]), len(p[0]), p[0]))


def has_parent(model_type: str) -> bool:
    from transformers import CONFIG_MAPPING

    try:
        return bool(parents_of(model_type, CONFIG_MAPPING[model_type]))
    except Exception:  # an unknown type or one whose config cannot import
        return False


def parse_override(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` with VALUE read as JSON when it parses (ints, floats, bools, lists), else a string."""
    import json

    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise InputError(f"--set {text!r}: expected KEY=VALUE, e.g. --set num_hidden_layers=2")
    raw = raw.strip()
    lowered = raw.lower()
    if lowered in ("true", "false"):
        return key, lowered == "true"
    try:
        return key, json.loads(raw)
    except json.JSONDecodeError:
        return key, raw


def first_field(configs: list[Any], names: Iterable[str]) -> Any:
    for config in configs:
        for name in names:
            value = getattr(config, name, None)
            if value is not None:
                return value
    return None


def vocab_of(config: Any) -> int:
    for sub in sub_configs(config):
        vocab = getattr(sub, "vocab_size", None)
        if isinstance(vocab, int) and vocab > 1:
            return vocab
    return TEXT_ID_LIMIT
