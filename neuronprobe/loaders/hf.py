"""``hf:<model_type>``: a transformers architecture built from its config alone, offline.

Three things make "any architecture" work here, each kept small and separate:

* the config, with ``--set`` overrides that reach nested sub-configs
  (``text_config.num_hidden_layers=1``) and a *shrunken* copy for the real-CPU
  capture strategy (fewer layers and experts, narrower layers);
* the head: the class a user would deploy (causal LM, seq2seq LM), falling back
  to the base model when the head refuses the config, with the reason kept;
* the example inputs every forward needs: text ids, pixels at the config's image
  size, audio features, and for vision-language models the image tokens and
  image grids that must agree with the pixels.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import inspect
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from neuronprobe.errors import InputError, error_line
from neuronprobe.loaders import fired

DEFAULT_IMAGE_SIZE = 224
DEFAULT_CHANNELS = 3
DEFAULT_MEL_BINS = 80
AUDIO_SAMPLES = 16000  # one second at 16 kHz: what wav2vec-style encoders take
ALT_AUDIO_FRAMES = 128
LONG_SERIES = 2048  # time-series contexts above this are cut to the sequence length
TEXT_ID_LIMIT = 1000  # ids well below every special token of the zoo's vocabularies
QWEN_GRID = 4  # an image grid of 4x4 patches (divisible by the spatial merge of 2)

# Shrinking for the real-CPU strategy: ops and their lines do not depend on these sizes.
SHRUNK_LAYERS = 2
SHRUNK_EXPERTS = 4
SHRUNK_HEADS = 4
SHRUNK_HEAD_DIM = 32
WIDE_HIDDEN = 512  # hidden sizes above this are narrowed

_LAYER_FIELD = re.compile(
    r"^(\w+_)?(num_hidden_layers|num_layers)$|^(n_layer|n_layers|encoder_layers|decoder_layers|num_decoder_layers|num_encoder_layers|depth)$"
)
_EXPERT_FIELDS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
_TOPK_FIELDS = ("num_experts_per_tok", "moe_topk", "num_experts_per_token", "top_k")
_WIDTH_FIELDS = ("intermediate_size", "moe_intermediate_size", "shared_expert_intermediate_size", "ffn_hidden_size")
_IMAGE_TOKEN_FIELDS = ("image_token_id", "image_token_index")
_SPECIAL_TOKEN_FIELDS = (
    *_IMAGE_TOKEN_FIELDS,
    "video_token_id",
    "video_token_index",
    "audio_token_id",
    "audio_token_index",
    "boi_token_id",
    "eoi_token_id",
    "vision_start_token_id",
    "vision_end_token_id",
)
_IMAGE_COUNT_FIELDS = ("mm_tokens_per_image", "image_seq_length", "num_image_tokens", "num_query_tokens")


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
    from neuronprobe.loading import parse_override

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
                with _ignore():
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


def _shrink_one(config: Any, narrow: bool = True) -> list[str]:
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
        if _LAYER_FIELD.match(name):
            cap(name, SHRUNK_LAYERS)
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
            with _ignore():
                config.head_dim = head_dim
                changes.append(f"head_dim {head_dim} (kept: its rotary sections are sized by it)")
        new_heads = min(heads, SHRUNK_HEADS)
        kv = getattr(config, "num_key_value_heads", None)
        if not (isinstance(head_dim, int) and head_dim > 0) and hidden % heads == 0 and hidden // heads != SHRUNK_HEAD_DIM:
            with _ignore():
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
_UNSET_ERROR = re.compile(
    r"NoneType|is not set|not be None|must be int, not None|'bool' object has no attribute|index out of range in self|both min and max are none|empty\(\) takes 1 positional argument but \d+ were given"
)  # ids == None is False


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
        vocab = _vocab(sub)
        if hasattr(sub, "vision_config") and vocab > TEXT_ID_LIMIT + 1:
            for name in (
                *_IMAGE_TOKEN_FIELDS,
                "video_token_id",
                "video_token_index",
            ):  # blip-2, instructblipvideo: where the query outputs go; an id the text ids never use
                fills[name] = vocab - 1
        for name, value in fills.items():
            if name in vars(sub) and vars(sub)[name] is None:  # vars: a per-layer config refuses a global head_dim read
                with _ignore():
                    setattr(sub, name, value)
                    changes.append(f"{name}={value}")
    # A special token id past the text vocabulary (idefics3's image token 128257 with 32000 ids): the embedding grows to hold it.
    special = [v for v in (_field([config], (name,)) for name in _SPECIAL_TOKEN_FIELDS) if isinstance(v, int)]
    for sub in sub_configs(config):
        size = getattr(sub, "vocab_size", None)
        if special and isinstance(size, int) and "vocab_size" in vars(sub) and hasattr(sub, "hidden_size") and max(special) >= size:
            with _ignore():
                sub.vocab_size = max(special) + 1
                changes.append(f"{type(sub).__name__}.vocab_size={sub.vocab_size} (to hold token id {max(special)})")
    return changes


_POOL_FIELDS = ("scale_factor", "pixel_shuffle_factor", "downsample_factor")  # a connector's pixel shuffle: patches per side it folds into one token


def _pooled_image_size(config: Any) -> list[str]:
    """A vision image size whose patch grid the connector can pool, in place; what was set.

    Some default configs pair a vision tower with a connector that cannot fold its patch grid:
    gemma3 and shieldgemma2 (224 px in patches of 16 is 14 a side, pooled to ``mm_tokens_per_image``
    256 = 16 a side: ``Gemma3MultiModalProjector`` gets an AvgPool2d of kernel 0, "stride should not be
    zero"), idefics3 and smolvlm (7 patches a side, pixel shuffle ``scale_factor`` 2), modernvbert and
    ultravbert (14 a side, ``pixel_shuffle_factor`` 4: "shape [.., 7, 3, ..] is invalid for input of size").
    The checkpoints use sizes that fit (gemma3 896 px in 64 patches of 14); the default config gets the
    smallest size at or above its own whose patch grid is a whole multiple of what the connector needs.
    No input runs on such a config (the connector is built from it), so :func:`load` checks it every time."""
    import math

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
        with _ignore():
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
        with _ignore():
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
    if not _UNSET_ERROR.search(message):
        return False
    return bool(complete_config(config()))


def _ignore() -> contextlib.suppress:
    """A context that swallows a strict config's refusal of one field (an Exception; never a KeyboardInterrupt
    or a caller's timeout, which are BaseExceptions)."""
    return contextlib.suppress(Exception)


def shrink_config(config: Any, narrow: bool = True) -> tuple[Any, list[str]]:
    """A copy with fewer layers and experts and (``narrow``) narrower layers, and what changed (said in the report).

    ``narrow=False`` keeps every width: for a component whose inputs are recorded
    from its parent at the parent's widths.
    """
    small = copy.deepcopy(config)
    changes: list[str] = []
    subs = sub_configs(small)
    widths = {id(sub): getattr(sub, "hidden_size", None) for sub in subs}
    for sub in subs:
        changes.extend(_shrink_one(sub, narrow))
    # A sub-config that names another's width (a Q-Former's encoder_hidden_size is the vision hidden_size) follows it.
    narrowed = {old: getattr(sub, "hidden_size", None) for sub in subs if (old := widths[id(sub)]) != getattr(sub, "hidden_size", None)}
    for sub in subs:
        for name, value in list(vars(sub).items()):
            follows = name.endswith(("hidden_size", "hidden_dim", "embed_dim")) or name == "latent_channels"  # glm_image's VQ reads the vision width
            if name != "hidden_size" and follows and value in narrowed and isinstance(value, int):
                with _ignore():
                    setattr(sub, name, narrowed[value])
                    changes.append(f"{name} {value}->{narrowed[value]}")
    return small, changes


# --- model ---------------------------------------------------------------------------


@dataclass
class BuiltModel:
    inner: Any  # transformers PreTrainedModel
    head: str  # its class name
    head_note: str | None = None  # why the deploy head was not used
    filled: tuple[str, ...] = ()  # config fields the default config lacks, given for the build (complete_for_build)


def _auto_class_names(model_type: str) -> list[str]:
    """Every class a transformers auto mapping names for this model type (depth estimation, segmentation, ...)."""
    from transformers.models.auto import modeling_auto

    names: list[str] = []
    for attr in sorted(dir(modeling_auto)):
        mapping = getattr(modeling_auto, attr)
        if attr.startswith("MODEL") and attr.endswith("_MAPPING_NAMES") and isinstance(mapping, dict):
            value = mapping.get(model_type)
            for name in value if isinstance(value, (list, tuple)) else [value]:
                if isinstance(name, str) and name not in names:
                    names.append(name)
    return names


def _takes_config(cls: type, config_class: type) -> bool:
    """A plain module whose constructor's ``config`` is annotated with this config class."""
    try:
        param = inspect.signature(cls).parameters.get("config")
    except (TypeError, ValueError):
        return False
    if param is None:
        return False
    annotation = param.annotation
    return annotation is config_class or annotation == config_class.__name__


# Modules of a model package that hold no model classes; the others (modeling_*.py, and idefics' vision.py and
# perceiver.py, transformers/models/idefics/) are searched for the classes that take a config.
_NOT_MODEL_MODULES = (
    "configuration_",
    "processing_",
    "tokenization_",
    "image_processing_",
    "video_processing_",
    "feature_extraction_",
    "convert_",
    "modular_",
    "generation_",
    "_",
)


def model_classes_for(config: Any) -> list[type]:
    """The classes that take this config, when no auto class does: a sub-config model type
    (``align_vision_model`` -> ``AlignVisionModel``), found by the auto mappings of its type and
    by the ``config_class`` of the classes in its modeling modules; base models first."""
    import importlib
    import pkgutil

    import torch
    import transformers
    from transformers import PreTrainedModel

    config_class = type(config)
    found: list[type] = []
    for name in _auto_class_names(getattr(config, "model_type", "")):
        with _ignore():
            cls = getattr(transformers, name)
            if isinstance(cls, type) and issubclass(cls, torch.nn.Module) and cls not in found:
                found.append(cls)
    package = config_class.__module__.rpartition(".")[0]
    pretrained: list[type] = []
    plain: list[type] = []
    with _ignore():
        for info in pkgutil.iter_modules(importlib.import_module(package).__path__):
            if info.name.startswith(_NOT_MODEL_MODULES):
                continue
            try:
                module = importlib.import_module(f"{package}.{info.name}")
            except Exception:  # a modeling file whose optional dependency is missing
                continue
            for cls in vars(module).values():
                if not (isinstance(cls, type) and cls.__module__ == module.__name__ and issubclass(cls, torch.nn.Module)):
                    continue
                if issubclass(cls, PreTrainedModel) and getattr(cls, "config_class", None) is config_class:
                    pretrained.append(cls)
                elif not issubclass(cls, PreTrainedModel) and _takes_config(cls, config_class):
                    plain.append(cls)

    def rank(cls: type) -> int:
        name = cls.__name__
        return 2 if name.endswith("PreTrainedModel") else 0 if name.endswith("Model") else 1

    for cls in sorted(pretrained, key=rank) + plain:
        if cls not in found:
            found.append(cls)
    return found


_MISSING_FIELD = re.compile(r"'(\w+)' object has no attribute '(\w+)'")


def _ancestor_configs(config_class: type, depth: int = 3) -> list[Any]:
    """Default configs of the model types that nest ``config_class``, directly or through up to ``depth`` levels."""
    from transformers import CONFIG_MAPPING

    from neuronprobe.loaders.hf_parent import _sub_config_owners

    found: list[Any] = []
    classes = [config_class]
    for _ in range(depth):
        owners = [t for cls in classes for t, _attr in _sub_config_owners().get(cls, [])]
        classes = []
        for owner in dict.fromkeys(owners):
            with _ignore():
                found.append(CONFIG_MAPPING[owner]())
                classes.append(CONFIG_MAPPING[owner])
    return found


def fill_from_parent(config: Any, error: BaseException) -> list[str]:
    """A sub-config type whose modeling code reads a field only its parent config sets: "'T5Gemma2TextConfig' object
    has no attribute 'dropout_rate'" (``T5Gemma2Config.__post_init__`` sets ``encoder.text_config.dropout_rate``,
    transformers/models/t5gemma2/configuration_t5gemma2.py). The field gets the value the nearest ancestor's default
    config gives its nested config of that class, in place; what was set (empty when no ancestor sets it)."""
    m = _MISSING_FIELD.search(str(error))
    if not isinstance(error, AttributeError) or m is None:
        return []
    class_name, name = m.groups()
    lacking = [sub for sub in sub_configs(config) if type(sub).__name__ == class_name and not hasattr(sub, name)]
    if not lacking:
        return []
    for ancestor in _ancestor_configs(type(lacking[0])):
        values = [getattr(sub, name) for sub in sub_configs(ancestor) if type(sub).__name__ == class_name and hasattr(sub, name)]
        if values:
            for sub in lacking:
                with _ignore():
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
    m = _MISSING_FIELD.search(str(error))
    if not isinstance(error, AttributeError) or m is None:
        return []
    class_name, name = m.groups()
    lacking = [sub for sub in sub_configs(config) if type(sub).__name__ == class_name and not hasattr(sub, name)]
    for sub in lacking:
        for owner in _enclosing(config, sub):
            rope = getattr(owner, "rope_parameters", None)
            value = vars(owner).get(name, rope.get(name) if isinstance(rope, dict) else None)
            if value is not None:
                with _ignore():
                    setattr(sub, name, value)
                    return [f"{class_name}.{name}={value!r} (as its enclosing {type(owner).__name__} holds it)"]
    return []


def _derived_defaults(config: Any, error: BaseException) -> list[str]:
    """A field the config does not declare, or leaves None, that transformers' configs document a default for in
    terms of another field: ``num_key_value_heads`` "defaults to ``num_attention_heads``" (no grouped-query
    attention; e.g. transformers/models/llama/configuration_llama.py). nemotron's default config leaves it None
    (``num_heads // None`` in NemotronAttention); moonshine_streaming's decoder reads it from a config that has no
    such field (transformers/models/moonshine_streaming/modeling_moonshine_streaming.py)."""
    m = _MISSING_FIELD.search(str(error))
    named = m.group(2) if isinstance(error, AttributeError) and m else None
    if named not in (None, "num_key_value_heads") or (named is None and not _UNSET_ERROR.search(str(error))):
        return []
    changes: list[str] = []
    for sub in sub_configs(config):
        heads = vars(sub).get("num_attention_heads")
        unset = "num_key_value_heads" in vars(sub) and vars(sub)["num_key_value_heads"] is None
        missing = named is not None and m is not None and type(sub).__name__ == m.group(1) and not hasattr(sub, "num_key_value_heads")
        if isinstance(heads, int) and (unset or missing):
            with _ignore():
                sub.num_key_value_heads = heads
                changes.append(f"{type(sub).__name__}.num_key_value_heads={heads} (as num_attention_heads: no grouped-query attention)")
    return changes


_NEEDS_CONFIG = re.compile(r"The `(\w+)` config needs to be specified")
# Fields a forecasting model's default config leaves None, with the value its published checkpoints use: the
# huggingface/{time-series-transformer,autoformer,informer}-tourism-monthly models forecast 24 months ahead.
_FORECAST_FIELDS: dict[str, int] = {"prediction_length": 24}


def fill_forecast_horizon(config: Any, error: BaseException) -> list[str]:
    """ "The `prediction_length` config needs to be specified." (TimeSeriesTransformerModel, AutoformerModel,
    InformerModel: transformers/models/time_series_transformer/modeling_time_series_transformer.py): the horizon
    of :data:`_FORECAST_FIELDS`, and ``context_length``, which "defaults to ``prediction_length``" in those configs
    but was derived from the unset horizon when the config was made."""
    m = _NEEDS_CONFIG.search(str(error))
    if m is None or m.group(1) not in _FORECAST_FIELDS:
        return []
    name, value = m.group(1), _FORECAST_FIELDS[m.group(1)]
    changes: list[str] = []
    for sub in sub_configs(config):
        if name in vars(sub) and vars(sub)[name] is None:
            with _ignore():
                setattr(sub, name, value)
                changes.append(f"{name}={value}")
                if vars(sub).get("context_length") is None and "context_length" in vars(sub):
                    sub.context_length = value
                    changes.append(f"context_length={value} (its documented default: prediction_length)")
    return changes


_TUPLE_CONCAT = re.compile(r'can only concatenate list \(not "tuple"\) to list')


def lists_for_tuples(config: Any, error: BaseException) -> list[str]:
    """A constructor that concatenates a list field to a list, where the default config holds a tuple: vitmatte's
    ``[config.hidden_size] + config.fusion_hidden_sizes`` (transformers/models/vitmatte/modeling_vitmatte.py). A
    config loaded from a checkpoint's config.json always holds lists, so the tuple fields become lists, in place."""
    if not isinstance(error, TypeError) or not _TUPLE_CONCAT.search(str(error)):
        return []
    changes: list[str] = []
    for sub in sub_configs(config):
        for name, value in list(vars(sub).items()):
            if isinstance(value, tuple) and not hasattr(value, "_fields"):
                with _ignore():
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
            with _ignore():
                sub.rope_parameters = {t: dict(default) for t in dict.fromkeys(types)}
                changes.append(f"{type(sub).__name__}.rope_parameters={{{', '.join(dict.fromkeys(types))}: {default}}} (the default config declares none)")
    return changes


def empty_architectures(config: Any, error: BaseException) -> list[str]:
    """ "'NoneType' object is not iterable" from the auto class's choice among a type's several models (funnel:
    FunnelModel, FunnelBaseModel): ``_get_model_class`` loops over ``config.architectures``, None in a default
    config (transformers/models/auto/auto_factory.py). An empty list, with which it takes the type's first model,
    its documented default."""
    if not (isinstance(error, TypeError) and "'NoneType' object is not iterable" in str(error)):
        return []
    if "architectures" not in vars(config) or vars(config)["architectures"] is not None:
        return []
    tb = error.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_name != "_get_model_class":
        tb = tb.tb_next
    if tb is None:
        return []
    with _ignore():
        config.architectures = []
        return ["architectures=[] (the auto class then takes the type's first model)"]
    return []


_EXAMPLE_ARGUMENT = re.compile(r"(\w+)=(\d+(?:\.\d+)?)\b")


def docstring_example_values(config: Any, error: BaseException) -> list[str]:
    """A size the default config leaves None that the config class's own docstring example gives: "empty():
    argument 'size' ... found element of type NoneType" from ``nn.Embedding(config.vocab_size, ...)``, where
    EsmConfig's example is ``EsmConfig(vocab_size=33)`` (transformers/models/esm/configuration_esm.py; the ESM-2
    checkpoints' 33 tokens). Numbers only, and only for fields that are None, in place."""
    if not _UNSET_ERROR.search(str(error)):
        return []
    changes: list[str] = []
    for sub in sub_configs(config):
        doc = type(sub).__doc__ or ""
        calls = re.findall(rf"{type(sub).__name__}\(([^)]*)\)", doc)
        for name, text in (pair for call in calls for pair in _EXAMPLE_ARGUMENT.findall(call)):
            if name in vars(sub) and vars(sub)[name] is None:
                value = float(text) if "." in text else int(text)
                with _ignore():
                    setattr(sub, name, value)
                    changes.append(f"{type(sub).__name__}.{name}={value} (its docstring's example)")
    return changes


def mlp_layer_types_from_dense_count(config: Any, error: BaseException) -> list[str]:
    """'NoneType' object is not subscriptable at ``config.mlp_layer_types[layer_idx]`` (DeepseekOcr2TextDecoderLayer,
    transformers/models/deepseek_ocr2/modeling_deepseek_ocr2.py): a MoE config (``n_routed_experts``) whose default
    leaves the per-layer MLP kinds None. The DeepSeek family's rule, as DeepseekV32Config.__post_init__ writes it
    (transformers/models/deepseek_v32/configuration_deepseek_v32.py): the first ``first_k_dense_replace`` layers
    dense (DeepseekV2Config's default 0), the rest sparse; in place."""
    if not (isinstance(error, TypeError) and "'NoneType' object is not subscriptable" in str(error)):
        return []
    changes: list[str] = []
    for sub in sub_configs(config):
        layers, experts = vars(sub).get("num_hidden_layers"), vars(sub).get("n_routed_experts")
        if "mlp_layer_types" in vars(sub) and vars(sub)["mlp_layer_types"] is None and isinstance(layers, int) and experts:
            dense = min(int(getattr(sub, "first_k_dense_replace", 0) or 0), layers)
            with _ignore():
                sub.mlp_layer_types = ["dense"] * dense + ["sparse"] * (layers - dense)
                changes.append(f"{type(sub).__name__}.mlp_layer_types={dense} dense then sparse (the DeepSeek first_k_dense_replace rule)")
    return changes


_TIMM_NAME = re.compile(r"(\w+) is not set in the config\. Please set it to a timm model name")


def timm_model_name(config: Any, error: BaseException) -> list[str]:
    """ "backbone is not set in the config. Please set it to a timm model name." (TimmBackbone, transformers/models/
    timm_backbone/modeling_timm_backbone.py): the name transformers' own timm config defaults to
    (``TimmWrapperConfig.architecture``, "resnet50"; the timm_wrapper type is analysed with it), untrained weights."""
    m = _TIMM_NAME.search(str(error))
    if m is None or m.group(1) not in vars(config) or vars(config)[m.group(1)] is not None:
        return []
    try:
        from transformers import TimmWrapperConfig

        name = TimmWrapperConfig().architecture
    except Exception:  # no timm config in this transformers
        return []
    with _ignore():
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
    if _UNSET_ERROR.search(str(error)):
        return [f"{c} (unset in the default config)" for c in complete_config(config)]
    return []


def _build_by_class(config: Any, first_error: BaseException, filled: list[str] | None = None, classes: list[type] | None = None) -> Any:
    """The first class that takes this config builds it (of ``classes``, by default :func:`model_classes_for`'s);
    the auto class's error when none does. ``filled`` gets the fields :func:`complete_for_build` set on the way."""
    import torch

    plain: list[Any] = []
    classes = model_classes_for(config) if classes is None else classes
    # A class with a forward of its own, or a pretrained model that encodes (a VQ-VAE: its encode is analysed).
    runnable = [c for c in classes if getattr(c, "forward", None) is not torch.nn.Module.forward or callable(getattr(c, "encode", None))]
    for cls in runnable or classes:
        for _ in range(2):  # again once what the default config lacks is filled in
            try:
                if hasattr(cls, "_from_config"):
                    return cls._from_config(config)
                plain.append(cls(config))
                break
            except Exception as exc:
                first_error = exc
                changes = complete_for_build(config, exc)
                if not changes:
                    break
                if filled is not None:
                    filled.extend(changes)
    if plain:  # plain modules that take the config: the outermost (most modules), not a rotary embedding inside it
        return max(plain, key=lambda m: len(list(m.modules())))
    built = built_by_parent(config)
    if built is not None:
        return built
    raise BuildError(error_line(first_error)) from first_error


def built_by_parent(config: Any) -> Any:
    """The module a parent model builds from this sub-config, when no class builds from it alone: the outermost
    module whose constructor gets a config of this class while the parent (its default config with this config in
    place; on the CPU, shrunk) is built. Gemma 4 Unified's vision embedder is ``Gemma4UnifiedVisionEmbedder(config.vision_config,
    config.text_config)`` (transformers/models/gemma4_unified/modeling_gemma4_unified.py); VibeVoice's diffusion head
    is ``VibeVoiceDiffusionHead(config.diffusion_head_config)``, a constructor without a typed config
    (transformers/models/vibevoice/modeling_vibevoice.py). None when no parent builds one."""
    import sys

    import torch

    from neuronprobe.loaders.hf_parent import parents_of

    for parent_type, attr in parents_of(getattr(config, "model_type", ""), type(config)):
        got: list[Any] = []

        def watch(frame: Any, event: str, arg: Any, got: list[Any] = got) -> None:
            if event != "call" or frame.f_code.co_name != "__init__" or got:
                return
            names = frame.f_code.co_varnames[: frame.f_code.co_argcount]
            module = frame.f_locals.get(names[0]) if names else None
            # by class: the parent's model constructors build from a deep copy of its config (_from_config)
            if isinstance(module, torch.nn.Module) and any(type(frame.f_locals.get(n)) is type(config) for n in names[1:]):
                got.append(module)

        try:
            on_meta = torch.empty(0).is_meta  # the device the component is being built on
            parent_config = build_config(parent_type, [])
            if not on_meta:  # real weights: the parent's other parts small
                parent_config, _ = shrink_config(parent_config)
            setattr(parent_config, attr, config)
            previous = sys.getprofile()
            sys.setprofile(watch)
            try:
                _build_model(parent_config, "meta" if on_meta else "cpu")
            finally:
                sys.setprofile(previous)
        except Exception:  # this parent does not build: the next one may
            continue
        if got:
            got[0]._neuronprobe_built_by = parent_type  # said in the report (_build_model)
            return got[0]
    return None


BUILD_FILLS = 3  # fields filled in one after another before the constructor's error is final


def _own_classes(config: Any) -> list[type]:
    """The pretrained classes made for exactly this config class, found in its modeling modules."""
    return [c for c in model_classes_for(config) if getattr(c, "config_class", None) is type(config)]


def _build_base(config: Any, filled: list[str]) -> Any:
    """The base model: AutoModel, again once what the default config lacks is filled in (``filled`` gets it), else
    a class found by the config class: for a sub-config type AutoModel does not know ("Unrecognized configuration
    class"), one whose AutoModel class is not exported ("Could not find VoxtralRealtimeTextModel",
    transformers/models/voxtral_realtime/modeling_voxtral_realtime.py's ``__all__``), or a composite config whose
    AutoModel class takes another config (``MusicgenModel`` takes the decoder's ``MusicgenDecoderConfig``; the
    ``MusicgenConfig`` is ``MusicgenForConditionalGeneration``'s, transformers/models/musicgen/modeling_musicgen.py)."""
    from transformers import AutoModel

    error: BaseException | None = None
    for _ in range(BUILD_FILLS + 1):
        try:
            return AutoModel.from_config(config)
        except Exception as exc:
            error = exc
            if isinstance(exc, ValueError) and "Unrecognized configuration class" in str(exc):
                return _build_by_class(config, exc, filled)  # a sub-config type: its class is found by its config class
            changes = complete_for_build(config, exc)
            if changes:
                filled.extend(changes)
                continue
            others = _own_classes(config)
            if others and ("Could not find" in str(exc) or not _auto_takes(config)):
                try:
                    return _build_by_class(config, exc, filled, others)
                except BuildError:
                    pass
            raise BuildError(error_line(exc)) from exc
    assert error is not None  # each pass returns, raises or records its error
    raise BuildError(f"{error_line(error)} (still, after {', '.join(filled)})") from error


def _auto_takes(config: Any) -> bool:
    """Whether AutoModel's class for this model type is made for this config class (musicgen's is not)."""
    import transformers
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    name = MODEL_MAPPING_NAMES.get(getattr(config, "model_type", ""))
    try:
        cls = getattr(transformers, name) if isinstance(name, str) else None
    except Exception:  # not exported
        return False
    return cls is None or getattr(cls, "config_class", None) in (None, type(config))


def build_model(config: Any, device: str) -> BuiltModel:
    """The deploy head (causal LM / seq2seq LM) when it takes the config, else the base model."""
    built = _build_model(config, device)
    if device == "meta":
        _weights_on_meta(built.inner)
    return built


def _weights_on_meta(module: Any) -> None:
    """Parameters a constructor made on the CPU despite the meta device, moved there: ``nn.Parameter(torch.Tensor(dim))``
    (lw_detr's layer scales, transformers/models/lw_detr/modeling_lw_detr.py) ignores the device context, and a
    CPU weight next to meta activations fails the forward. Weights only: buffers may hold values the forward reads."""
    import torch

    for sub in module.modules():
        for name, param in list(sub._parameters.items()):
            if param is not None and not param.is_meta:
                sub._parameters[name] = torch.nn.Parameter(param.to("meta"), requires_grad=param.requires_grad)


def _build_model(config: Any, device: str) -> BuiltModel:
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM

    transformers.logging.set_verbosity_error()  # its advice on standalone heads is noise here
    head = AutoModelForSeq2SeqLM if getattr(config, "is_encoder_decoder", False) else AutoModelForCausalLM
    head_error: BaseException | None = None
    filled: list[str] = []
    with torch.device(device):
        for _ in range(2):  # again once what the default config lacks is filled in
            try:
                inner = head.from_config(config)
                return BuiltModel(inner.eval(), type(inner).__name__, filled=tuple(filled))
            except Exception as exc:  # no such head for this type, or the head refuses the config
                head_error = exc
                changes = complete_for_build(config, exc)
                if not changes:
                    break
                filled.extend(changes)
        inner = _build_base(config, filled)
    note = None
    if head_error is not None and not (isinstance(head_error, ValueError) and "Unrecognized configuration class" in str(head_error)):
        note = f"the {head.__name__.replace('AutoModelFor', '')} head refused the config ({error_line(head_error)}); the base model {type(inner).__name__} was analysed"
    if parent := getattr(inner, "_neuronprobe_built_by", None):
        note = f"no class builds from this config alone; {type(inner).__name__} was built as hf:{parent} builds it from this config"
    return BuiltModel(inner.eval(), type(inner).__name__, note, tuple(filled))


def _first_tensor(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
    for item in items:
        found = _first_tensor(item)
        if found is not None:
            return found
    return None


def entry_point(inner: Any) -> str:
    """The method the capture calls: ``forward``, or ``encode`` for a model with no forward of its own
    (a VQ image tokenizer such as chameleon's: ``encode`` is what the vision-language model calls)."""
    import torch

    if getattr(type(inner), "forward", None) is torch.nn.Module.forward and callable(getattr(inner, "encode", None)):
        return "encode"
    return "forward"


def _entry_params(inner: Any) -> Any:
    return inspect.signature(getattr(inner, entry_point(inner))).parameters


def forward_wrapper(inner: Any, drop: tuple[str, ...] = ()) -> Any:
    """A module whose forward calls the model with its cache off and returns its first output tensor."""
    import torch

    params = _entry_params(inner)
    entry = entry_point(inner)
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    extra: dict[str, Any] = {}
    if "return_dict" in params or takes_any:
        extra["return_dict"] = False
    config = getattr(inner, "config", None)
    # A vision-language config without use_cache whose text config has one (lfm3_vl): its text model would make a
    # cache (lfm3's get_seq_length raises on one of linear-attention layers only); said only to a forward that names it.
    below = "use_cache" in params and hasattr(config, "to_dict") and any(getattr(sub, "use_cache", None) is not None for sub in sub_configs(config))
    if (getattr(config, "use_cache", None) is not None and ("use_cache" in params or takes_any)) or below:
        extra["use_cache"] = False
    for name in drop:  # a forward taking **kwargs that passes its own on (mimi's encoder: use_cache twice)
        extra.pop(name, None)

    class HFModel(torch.nn.Module):
        """Calls the transformers model with cache off and returns the first output tensor."""

        def __init__(self, model: torch.nn.Module) -> None:
            super().__init__()
            self.model = model

        def forward(self, **inputs: Any) -> Any:
            call = self.model if entry == "forward" else getattr(self.model, entry)
            return _first_tensor(call(**fresh_inputs(inputs), **extra))

    return HFModel(inner)


# --- inputs --------------------------------------------------------------------------


class StatefulInput:
    """An input object the forward changes as it runs: a video tracker's inference session records each frame's
    outputs in it and consumes its new prompts (modeling_sam2_video.py ``Sam2VideoModel.forward``), so a second
    run of the same session (export, then the eager check or dynamo) would find frame 0 done and compute nothing.
    Each call gets a fresh copy (:func:`fresh_inputs`): new containers, the same tensors. torch.export takes it
    as a constant input (its tensors are the session's, not the graph's inputs)."""

    def __init__(self, value: Any) -> None:
        from neuronprobe._torch import pytree

        pytree.register_constant(StatefulInput)
        self.value = value

    def fresh(self) -> Any:
        """A copy for one call: new containers, every tensor shared (a copied tensor would be an op in the graph)."""
        return copy.deepcopy(self.value, {id(t): t for t in self._tensors()})

    def _tensors(self) -> list[Any]:
        import torch

        found: dict[int, Any] = {}
        seen: set[int] = set()
        todo = [self.value]
        while todo:
            item = todo.pop()
            if id(item) in seen:
                continue
            seen.add(id(item))
            if isinstance(item, torch.Tensor):
                found[id(item)] = item
            elif isinstance(item, dict):
                todo.extend(item.values())
            elif isinstance(item, (list, tuple, set)):
                todo.extend(item)
            elif hasattr(item, "__dict__") and not isinstance(item, type):
                todo.extend(vars(item).values())
        return list(found.values())

    def __eq__(self, other: object) -> bool:
        return other is self

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        return f"StatefulInput({type(self.value).__name__})"


def fresh_inputs(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The inputs for one call of the forward: each :class:`StatefulInput` as a fresh copy of its value."""
    return {k: v.fresh() if isinstance(v, StatefulInput) else v for k, v in inputs.items()}


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


def _field(configs: list[Any], names: Iterable[str]) -> Any:
    for config in configs:
        for name in names:
            value = getattr(config, name, None)
            if value is not None:
                return value
    return None


def _image_size(config: Any) -> tuple[int, int]:
    """The config's image size; a detector with none of its own takes its backbone's (lw_detr's ViT windows tile
    1024-pixel images: transformers/models/lw_detr/configuration_lw_detr.py), else 224."""
    size = getattr(config, "image_size", None) or getattr(getattr(config, "backbone_config", None), "image_size", None) or DEFAULT_IMAGE_SIZE
    if isinstance(size, dict):
        size = size.get("height") or size.get("shortest_edge") or DEFAULT_IMAGE_SIZE
    if isinstance(size, (list, tuple)):
        return int(size[0]), int(size[-1])
    return int(size), int(size)


def _channels(config: Any) -> int:
    return int(_field([config], ("num_channels", "in_channels", "in_chans")) or DEFAULT_CHANNELS)


def _pixels(config: Any, batch: int, device: str) -> Any:
    import torch

    h, w = _image_size(config)
    return torch.randn(batch, _channels(config), h, w, device=device)


def _vocab(config: Any) -> int:
    for sub in sub_configs(config):
        vocab = getattr(sub, "vocab_size", None)
        if isinstance(vocab, int) and vocab > 1:
            return vocab
    return TEXT_ID_LIMIT


def text_ids(config: Any, batch: int, seq: int, device: str) -> Any:
    """Random token ids that avoid every special (image, audio, video) token id of the config."""
    import torch

    limit = max(2, min(_vocab(config), TEXT_ID_LIMIT))
    ids = torch.randint(0, limit, (batch, seq), device=device) if device != "meta" else torch.zeros(batch, seq, dtype=torch.long, device=device)
    if device != "meta":
        for value in {_field(sub_configs(config), (name,)) for name in _SPECIAL_TOKEN_FIELDS}:
            if isinstance(value, int):
                ids[ids == value] = (value + 1) % limit
    return ids


def _image_token_count(config: Any, vision: Any) -> int:
    count = _field([config], _IMAGE_COUNT_FIELDS)
    if isinstance(count, int) and count > 0:
        return count
    h, w = _image_size(vision)
    patch = getattr(vision, "patch_size", 14) or 14
    if isinstance(patch, (list, tuple)):  # a patch size per stage (florence2's DaViT): the strides downsample together
        strides = getattr(vision, "patch_stride", None)
        patch = math.prod(strides) if isinstance(strides, (list, tuple)) and strides else patch[0]
    patch = int(patch)
    return max(1, (h // patch) * (w // patch))


def _vision_inputs(config: Any, vision: Any, params: Any, batch: int, device: str, plan: InputPlan) -> tuple[dict[str, Any], int]:
    """Pixels (or flattened patches with their grid) and how many image tokens stand for them."""
    import torch

    if "image_grid_thw" in params:  # Qwen-VL: patches flattened, with their (t, h, w) grid
        patch = int(getattr(vision, "patch_size", 14) or 14)
        # A tower without a temporal patch (ernie4_5_vl, cosmos3_edge, hy_v4_vl, dots3: SigLIP-style) takes C*P*P per patch.
        temporal = _int_field([vision], ("temporal_patch_size", "patch_temporal")) or 1
        merge = int(getattr(vision, "spatial_merge_size", 2) or 2)
        grid = QWEN_GRID * merge // 2 if merge > 2 else QWEN_GRID
        patches = grid * grid
        width = _channels(vision) * temporal * patch * patch
        inputs = {
            "pixel_values": torch.randn(batch * patches, width, device=device),
            "image_grid_thw": torch.tensor([[1, grid, grid]] * batch, device="cpu" if device == "meta" else device),
        }
        return inputs, plan.image_tokens or patches // (merge * merge)
    if "spatial_shapes" in params:  # NaViT (siglip2): a sequence of flattened patches, a mask over it and its (h, w)
        patch_inputs = _patch_sequence(vision, batch, device)
        side = int(patch_inputs["spatial_shapes"][0, 0])
        return patch_inputs, plan.image_tokens or side * side
    return {"pixel_values": _pixels(vision, batch, device)}, plan.image_tokens or _image_token_count(config, vision)


def _patch_sequence(vision: Any, batch: int, device: str) -> dict[str, Any]:
    """siglip2-style inputs: ``num_patches`` patches of C*P*P pixels as one sequence, all valid, on a square grid."""
    import math

    import torch

    patch = int(getattr(vision, "patch_size", 16) or 16)
    side = max(1, math.isqrt(int(getattr(vision, "num_patches", 256) or 256)))
    width = _channels(vision) * patch * patch
    return {
        "pixel_values": torch.randn(batch, side * side, width, device=device),
        "pixel_attention_mask": torch.ones(batch, side * side, dtype=torch.long, device=device),
        "spatial_shapes": torch.tensor([[side, side]] * batch, device="cpu" if device == "meta" else device),
    }


def _audio_features(config: Any, batch: int, device: str, plan: InputPlan) -> Any:
    import torch

    mel = int(_field([config], ("num_mel_bins", "feature_size", "input_feat_per_channel")) or DEFAULT_MEL_BINS)
    if plan.audio_time_major:
        return torch.randn(batch, ALT_AUDIO_FRAMES, mel, device=device)
    frames = 2 * int(getattr(config, "max_source_positions", ALT_AUDIO_FRAMES // 2) or ALT_AUDIO_FRAMES // 2)
    return torch.randn(batch, mel, frames, device=device)


def _audio_values(config: Any, batch: int, device: str) -> Any:
    """Raw audio, or (frames, mel bins) for spectrogram encoders (audio-spectrogram-transformer) that take ``input_values``."""
    import torch

    mel = getattr(config, "num_mel_bins", None)
    if isinstance(mel, int) and mel > 0:
        frames = int(getattr(config, "max_length", None) or ALT_AUDIO_FRAMES)
        return torch.randn(batch, frames, mel, device=device)
    return torch.randn(batch, AUDIO_SAMPLES, device=device)


_MAIN_INPUTS = ("input_ids", "pixel_values", "input_values", "input_features", "inputs_embeds", "hidden_states")


def _main_input(inner: Any, params: Any) -> str:
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


def _width(config: Any) -> int:
    return int(_field([config], ("hidden_size", "d_model", "embed_dim", "hidden_dim", "dim")) or 64)


def _by_name(name: str, config: Any, batch: int, seq: int, device: str, done: dict[str, Any]) -> Any:
    """An input the forward needs, by its name and the config; None for one neuronprobe does not know how to make."""
    import torch

    text = next((v for k, v in done.items() if k in ("input_ids", "decoder_input_ids")), None)
    length = text.shape[-1] if text is not None else seq
    if name in ("input_ids", "decoder_input_ids"):
        return text_ids(config, batch, seq, device)
    if name in ("attention_mask", "decoder_attention_mask"):
        return torch.ones(batch, length, dtype=torch.long, device=device)
    if name == "pixel_values":
        return _pixels(getattr(config, "vision_config", None) or config, batch, device)
    if name == "pixel_mask":
        h, w = _image_size(getattr(config, "vision_config", None) or config)
        return torch.ones(batch, h, w, dtype=torch.long, device=device)
    if name == "image_sizes" and "pixel_values" in done and done["pixel_values"].dim() == 4:
        h, w = done["pixel_values"].shape[-2:]
        return torch.tensor([[h, w]] * batch, device="cpu" if device == "meta" else device)
    if name == "input_values":
        return _audio_values(config, batch, device)
    if name == "input_features":  # an audio codec's features next to its raw audio (xcodec2, neucodec)
        return _audio_features(config, batch, device, InputPlan())
    if name in ("input_features_mask", "feature_attention_mask") and "input_features" in done:
        features = done["input_features"]
        return torch.ones(batch, features.shape[-1], dtype=torch.long, device=device)
    if name in ("inputs_embeds", "hidden_states"):  # features in: a speech encoder's input_dim before its width
        return torch.randn(batch, length, int(_field([config], ("input_dim",)) or _width(config)), device=device)
    if name == "encoder_hidden_states":  # what a cross-attending module (Q-Former) reads from the vision side
        return torch.randn(batch, length, int(_field([config], ("encoder_hidden_size",)) or _width(config)), device=device)
    if name == "query_embeds":
        queries = int(getattr(config, "num_query_tokens", None) or 32)
        return torch.randn(batch, queries, _width(config), device=device)
    return _by_name_more(name, config, batch, seq, device, done, length)


def _int_field(configs: list[Any], names: Iterable[str]) -> int | None:
    value = _field(configs, names)
    if isinstance(value, (list, tuple)) and value:
        value = value[0]
    return int(value) if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _count(dim: str, config: Any) -> int:
    """How many of a dimension the forward unpacks by this name: frames from the config (video), channels of
    raw audio from ``audio_channels``; one image, one sequence, one of anything else."""
    dim = dim.lower()
    if dim.isdigit():
        return int(dim)
    configs = sub_configs(config) if hasattr(config, "__dict__") else []
    if "frame" in dim or "video" in dim or dim in ("t", "time"):
        return _int_field(configs, ("num_frames", "frames_per_clip", "tubelet_size")) or 1
    if "channel" in dim:
        return _int_field(configs, ("audio_channels",)) or 1
    return 1


def _boxes(batch: int, length: int, device: str) -> Any:
    """One box per token, (x0, y0, x1, y1) with x0 <= x1 and y0 <= y1 in 0..1000: what layout models read."""
    import torch

    if device == "meta":
        return torch.zeros(batch, length, 4, dtype=torch.long, device=device)
    corner = torch.randint(0, 500, (batch, length, 2), device=device)
    return torch.cat([corner, corner + torch.randint(0, 500, (batch, length, 2), device=device)], dim=-1)


def _by_name_more(name: str, config: Any, batch: int, seq: int, device: str, done: dict[str, Any], length: int) -> Any:
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
        pixels = _pixels(vision, batch, device)
        return pixels.unsqueeze(1).expand(batch, _count("frames", config), *pixels.shape[1:]).contiguous() if "video" in name else pixels
    if name.endswith("_masks") and isinstance(done.get("pixel_values"), torch.Tensor):  # prompt_masks: a mask image per image
        return torch.zeros_like(done["pixel_values"])
    if name in ("past_values", "future_values"):  # time series: (B, context, channels) or (B, context)
        # The config's context (patchtst checks it), but a long one is the sequence length in whole patches
        # (timesfm2_5's 16384 steps take minutes on meta; a model that wants its full context says so, see repairs).
        context = _int_field(configs, ("context_length",)) or seq
        patch = _int_field(configs, ("patch_length",)) or 1
        if context > LONG_SERIES:
            context = -(-seq // patch) * patch
        channels = _int_field(configs, ("num_input_channels",))
        if name == "future_values":
            context = _int_field(configs, ("prediction_length",)) or context
        return torch.randn(batch, context, *([channels] if channels else []), device=device)
    if name.endswith(("observed_mask", "_padding")) and isinstance(past := done.get("past_values"), torch.Tensor):
        return (torch.ones_like if "observed" in name else torch.zeros_like)(past)
    if name == "image_attention_mask" and isinstance(pixels := done.get("pixel_values"), torch.Tensor) and pixels.dim() == 5:
        return torch.ones(batch, length, pixels.shape[1], dtype=torch.long, device=device)  # which images each token sees
    if name == "freq":  # a frequency class per series (timesfm)
        return torch.zeros(batch, 1, dtype=torch.long, device=device)
    if name == "latents":  # codec decoders: (B, hidden, frames)
        return torch.randn(batch, _width(config), length, device=device)
    if name == "flattened_patches":  # pix2struct, kosmos-2.5: (B, patches, row + column + the patch's pixels)
        width = _int_field(configs, ("patch_embed_hidden_size",)) or _width(config)
        patches = torch.randn(batch, length, 2 + width, device=device)
        if device != "meta":
            patches[:, :, :2] = 0  # row and column ids: the first patch's, valid for any table of positions
        return patches
    if "spectrogram" in name:  # vocoders (hifigan): (B, frames, mel bins)
        return torch.randn(batch, length, _int_field(configs, ("model_in_dim", "num_mel_bins")) or DEFAULT_MEL_BINS, device=device)
    for field_name in (f"{name}_dim", f"{name.removesuffix('s')}_dim"):  # features by a config width: visual_feats, visual_pos (lxmert), states
        dim = _int_field(configs, (field_name,))
        if dim:
            return torch.randn(batch, length, dim, device=device)
    return None


def _conv_stem(inner: Any) -> bool:
    """The model's first layer with weights is a 2-D convolution: what it reads first is an image."""
    import torch

    first = next((m for m in inner.modules() if any(True for _ in m.parameters(recurse=False))), None)
    return isinstance(first, torch.nn.Conv2d)


def tokens_before(ids: Any, token: int, count: int) -> Any:
    """``ids`` (batch, length) with ``count`` copies of ``token`` in front: how image (or query) placeholders precede
    the text in every vision-language input made here."""
    import torch

    return torch.cat([torch.full((ids.shape[0], count), token, dtype=ids.dtype, device=ids.device), ids], dim=1)


def make_inputs(inner: Any, config: Any, batch: int, seq: int, device: str, plan: InputPlan | None = None) -> dict[str, Any]:
    """Every input the forward needs, from the config alone: its main input, then each required one by name."""
    import torch

    plan = plan or InputPlan()
    params = _entry_params(inner)
    main = _main_input(inner, params)
    inputs: dict[str, Any] = {}
    if main == "pixel_values":
        inputs["pixel_values"] = _pixels(getattr(config, "vision_config", None) or config, batch, device)
    elif main == "input_values":
        inputs["input_values"] = _audio_values(config, batch, device)
    elif main == "input_features":
        inputs["input_features"] = _audio_features(config, batch, device, plan)
    elif main in ("hidden_states", "inputs_embeds") and main in params and ("grid_thw" in params or "image_grid_thw" in params):
        grid_name = "grid_thw" if "grid_thw" in params else "image_grid_thw"
        patches, _ = _vision_inputs(config, config, {"image_grid_thw": None}, batch, device, plan)
        inputs[main] = patches["pixel_values"]
        inputs[grid_name] = patches["image_grid_thw"]
    elif main == "hidden_states" and main in params and getattr(inner, "main_input_name", None) == "pixel_values" and _conv_stem(inner):
        inputs[main] = _pixels(config, batch, device)  # a conv backbone that names its images hidden_states (florence_vision)
    elif main in ("hidden_states", "inputs_embeds", "query_embeds") and main in params:
        inputs[main] = _by_name(main, config, batch, seq, device, inputs)
    elif main in params and main != "input_ids" and (made := _by_name(main, config, batch, seq, device, inputs)) is not None:
        inputs[main] = made  # a main input known by name (past_values, pixel_values_videos, latents)
    else:
        ids = text_ids(config, batch, seq, device)
        vision = getattr(config, "vision_config", None)
        image_token = _field([config, getattr(config, "text_config", None)] if hasattr(config, "text_config") else [config], _IMAGE_TOKEN_FIELDS)
        if vision is not None and isinstance(image_token, int) and "pixel_values" in params:
            pixel_inputs, count = _vision_inputs(config, vision, params, batch, device, plan)
            inputs.update(pixel_inputs)
            ids = tokens_before(ids, image_token, count)
        elif vision is not None and "pixel_values" in params:  # a dual encoder (CLIP-style): text and image side by side
            inputs["pixel_values"] = _pixels(vision, batch, device)
        inputs[main if main in params else "input_ids"] = ids
    if getattr(config, "is_encoder_decoder", False) and "decoder_input_ids" in params:
        inputs["decoder_input_ids"] = text_ids(getattr(config, "decoder", None) or config, batch, seq, device)
    required = [n for n, p in params.items() if p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    # Inputs some forwards read without a None check: image sizes next to pixels, masks next to audio features.
    needed = [n for n in ("image_sizes", "input_features_mask") if n in params]
    if "encoder_hidden_states" in params and getattr(config, "encoder_hidden_size", None) and "pixel_values" not in inputs:
        needed.append("encoder_hidden_states")
    if "spatial_shapes" in params and "spatial_shapes" not in inputs and ("pixel_values" in inputs or "pixel_values" in required):
        inputs.update(_patch_sequence(getattr(config, "vision_config", None) or config, batch, device))
    for name in inputs:
        if plan.shape(name) is not None:
            inputs[name] = _reshaped(inputs[name], plan.shape(name), device)
    for name in (*required, *needed, *(n for n in plan.extra if n in params)):
        if name not in inputs:
            value = _by_name(name, config, batch, seq, device, inputs)
            if value is not None:
                inputs[name] = value if plan.shape(name) is None else _reshaped(value, plan.shape(name), device)
    from neuronprobe.loaders.hf_families import family_inputs

    inputs.update(family_inputs(inner, config, params, batch, seq, device, inputs, plan))
    for name in plan.floats:
        if isinstance(inputs.get(name), torch.Tensor):
            inputs[name] = inputs[name].float()
    for name in plan.dropped:  # an input the forward refuses (repair_refused_input)
        inputs.pop(name, None)
    return inputs


def _reshaped(value: Any, shape: tuple[int, ...] | None, device: str) -> Any:
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
        signature = _entry_params(inner)
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


def _target(info: InputsInfo, ndim: int | None = None, floats: bool = False, name: str | None = None) -> str | None:
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


def _pixel_target(info: InputsInfo) -> str | None:
    found = [n for n in info.shapes if "pixel_values" in n and len(info.shapes[n]) >= 4]
    return info.main_input if info.main_input in found else found[0] if found else None


_FEATURE_COUNT = re.compile(r"image (?:features|tokens).*?features:? (\d+)", re.I | re.S)


def repair_image_tokens(message: str, plan: InputPlan, info: InputsInfo) -> InputPlan | None:
    """As many image tokens as the vision tower gave features ("Image features and image tokens do not
    match: tokens: 1, features 576"): llava-style vision-language models whose count the config does not say."""
    m = _FEATURE_COUNT.search(message)
    if m and plan.image_tokens != int(m.group(1)):
        return replace(plan, image_tokens=int(m.group(1)))
    return None


_UNPACK = re.compile(r"not enough values to unpack \(expected (\d+), got (\d+)\)")
_UNPACK_LINE = re.compile(r"^\s*\(?\s*([\w\s,]+?)\s*\)?\s*=\s*([\w.]+?)\.(?:shape|size\(\))")
_STATED_SHAPE = re.compile(r"must be an? (\d)D tensor of shape \(([^)]*)\)")


def _insert_dims(old: tuple[int, ...], dims: list[str], config: Any) -> tuple[int, ...]:
    """``old`` (with its batch) given the dims the forward wanted: the missing ones go right after the batch,
    as many of each as its name says (``num_frames`` from the config, ``2`` for an image pair, else one)."""
    missing = len(dims) - len(old)
    return tuple(_count(d, config) for d in dims[1 : 1 + missing]) + old[1:]


def repair_missing_dims(message: str, plan: InputPlan, info: InputsInfo) -> InputPlan | None:
    """An input with too few dims: video and multi-image pixels (B, frames|images, C, H, W) and raw audio
    (B, channels, T), read from "not enough values to unpack (expected 5, got 4)" and the line that raised
    (``batch_size, num_frames, num_channels, height, width = pixel_values.shape``), or from "Input must be a 5D
    tensor of shape (batch_size, 2, num_channels, height, width)". Learned from videomae, vivit, timesformer,
    xclip, idefics2, idefics3, smolvlm, modernvbert, ultravbert (frames, images); encodec, mimi, mimi_encoder,
    pocket_tts_audio_tokenizer (audio channels); superglue, lightglue, efficientloftr (image pairs); idefics
    (images flattened into the batch before the unpack: a dim of one)."""
    m = _UNPACK.search(message)
    stated = _STATED_SHAPE.search(message)
    if m:
        want, got = int(m.group(1)), int(m.group(2))
        line = _UNPACK_LINE.match(info.line)
        dims = [d.strip() for d in line.group(1).split(",")] if line else []
        name = _target(info, got, name=line.group(2).rpartition(".")[2] if line else None)
    elif stated:
        dims = [d.strip() for d in stated.group(2).split(",")]
        want, got = int(stated.group(1)), len(dims) - 1
        name = _pixel_target(info) or _target(info, got)
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


_DIM_RANGE = re.compile(r"Dimension out of range \(expected to be in range of \[-(\d+), \d+\], but got (\d+)\)")
_MONO = re.compile(r"must be mono, but got (\d+)")
_BROADCAST_LENGTH = re.compile(r"broadcast a dimension of length (\d+)")


def repair_audio_channels(message: str, plan: InputPlan, info: InputsInfo) -> InputPlan | None:
    """Raw audio (B, T) where the model wants (B, channels, T), channels from ``audio_channels``: "Dimension out
    of range (expected to be in range of [-2, 1], but got 2)", "Audio must be mono, but got 16000", and a conv
    run unbatched on (B, T) ("Attempting to broadcast a dimension of length 16000"). Learned from omniasr_audio,
    omniasr_ctc, vibevoice_acoustic_tokenizer, xcodec, dac, pe_audio, pe_audio_encoder. A 3-D input indexed at
    dim 3 ("expected to be in range of [-3, 2], but got 3") gets a channel dim of one (clap_audio_model)."""
    m = _DIM_RANGE.search(message)
    if m and int(m.group(1)) == int(m.group(2)) > 2:  # features (B, T, mel) the forward reads as (B, 1, T, mel)
        name = _target(info, int(m.group(2)), floats=True)
        return plan.with_shape(name, (1, *info.shapes[name][1:])) if name in info.floats else None
    name = _target(info, 2, floats=True)
    if name is None or name not in info.floats:
        return None
    length = info.shapes[name][-1]
    if m and int(m.group(1)) == 2 and int(m.group(2)) == 2:
        pass
    elif not (any(int(x.group(1)) == length for x in (_MONO.search(message), _BROADCAST_LENGTH.search(message)) if x)):
        return None
    return plan.with_shape(name, (_count("channels", info.config), length))


_SIZE_MISMATCH = re.compile(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\) at non-singleton dimension")
_PER_CODEBOOK = re.compile(
    r"broadcast a dimension of length (\d+) at -1! Mismatching argument at index \d+ had torch\.Size\(\[(\d+)\]\); but expected shape should be broadcastable to \[([\d, ]+)\]"
)


def repair_codebook_ids(message: str, plan: InputPlan, info: InputsInfo) -> InputPlan | None:
    """Token ids (B, seq) where the model embeds one id per codebook at each step, (B, seq, codebooks): its
    embedding adds a per-codebook offset buffer of shape (codebooks,) to the ids, "Attempting to broadcast a
    dimension of length 33 at -1! Mismatching argument at index 1 had torch.Size([33]); but expected shape should
    be broadcastable to [1, 32]", or on real tensors "The size of tensor a (32) must match the size of tensor b (33)"
    at a line adding ``offsets`` (kyutai_speech_to_text: the text token and 32 audio codebooks,
    ``input_ids + self.audio_tokens_offsets``; inkling_audio: a mel-bin token per bin; dia_decoder: its 9
    channels, ``audio_codes + self.offsets``, after its ``batch_size, seq_length = input_ids.size()[:-1]`` had
    a dim of one put in). The input is the integer one whose elements and last dim the broadcast target has."""
    m = _PER_CODEBOOK.search(message)
    real = _SIZE_MISMATCH.search(message) if "offsets" in info.line else None  # real tensors say it this way
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


_IMAGE_SIZE = re.compile(r"Input image size \((\d+)\*(\d+)\) doesn't match model \((\d+)\*(\d+)\)")
_TOO_SMALL = re.compile(r"Image size (\d+)x(\d+) is too small to be scaled with \w+=\(([\d., ]+)\) when patch_size=(\d+)")
_SIDE = re.compile(r"Input (height|width) \((\d+)\) doesn't match model \((\d+)\)", re.I)
_BROADCAST_OURS = re.compile(
    r"broadcast a dimension of length \d+ at -\d+! Mismatching argument at index \d+ had torch\.Size\(\[([\d, ]+)\]\); but expected shape should be broadcastable to \[([\d, ]+)\]"
)
_CHANNELS = re.compile(r"expected input\[([\d, ]+)\] to have (\d+) channels, but got (\d+) channels")


def repair_stated_size(message: str, plan: InputPlan, info: InputsInfo) -> InputPlan | None:
    """Pixels at the size or channels the error states: "Input image size (224*224) doesn't match model
    (256*192)" (vitpose; seggpt, whose pixels are joined to its prompt's), "Input height (224) doesn't match
    model (336)" (timm towers: pe_video), "Image size 224x224 is too small to be scaled with scaled_images_ratios=(0.25, 0.5, 1)
    when patch_size=384" (depth_pro), "expected input[1, 1, 32] to have 80 channels, but got 1 channels" when
    that input is one of ours, or ours with its time padded (qwen2_5_omni_bigvgan, voxtral_realtime,
    vibevoice_acoustic_tokenizer_encoder; not a feature map inside: edgetam), and "Attempting to broadcast a
    dimension of length 448 at -1! ... had torch.Size([448, 448]); but expected shape should be broadcastable
    to [1, 3, 224, 224]" when that shape is our input's (tvp's image prompt)."""
    if m := _CHANNELS.search(message):  # our input as it is, or with its last dim padded by the forward
        shape = tuple(int(d) for d in m.group(1).split(","))
        same = [n for n, s in info.shapes.items() if s == shape and n in info.floats]
        padded = [n for n, s in info.shapes.items() if len(s) == len(shape) > 2 and s[:-1] == shape[:-1] and n in info.floats]
        ours = (same or padded)[0] if same or padded else None
        return plan.with_shape(ours, (int(m.group(2)), *info.shapes[ours][2:])) if ours else None
    if m := _BROADCAST_OURS.search(message):  # a parameter sized for the input's trailing dims (tvp's 448x448 prompt)
        theirs = tuple(int(d) for d in m.group(1).split(","))
        target = tuple(int(d) for d in m.group(2).split(","))
        sized = next((n for n, s in info.shapes.items() if s == target and n in info.floats), None)
        if sized and len(theirs) < len(target):
            return plan.with_shape(sized, (*target[1 : len(target) - len(theirs)], *theirs))
        return None
    name = _pixel_target(info)
    if name is None:
        return None
    h, w = info.shapes[name][-2:]
    if m := _IMAGE_SIZE.search(message):  # the size it saw may be ours joined with another image (seggpt): scale ours
        got_h, got_w, want_h, want_w = (int(g) for g in m.groups())
        size = (h * want_h // got_h, w * want_w // got_w) if got_h and got_w else (want_h, want_w)
    elif m := _SIDE.search(message):
        side, got, want = m.group(1).lower(), int(m.group(2)), int(m.group(3))
        size = (h * want // got, w) if side == "height" and got else (h, w * want // got) if got else (h, w)
    elif m := _TOO_SMALL.search(message):
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


_SEQUENCE = re.compile(r"[Ii]nput sequence length \((\d+)\) doesn't match model configuration \((\d+)\)")
_MULTIPLE = re.compile(r"(?:length (\d+) is not a multiple of (\d+))|(?:multiple of [^(]*\((\d+)\), but got (\d+))")


def repair_stated_length(message: str, plan: InputPlan, info: InputsInfo) -> InputPlan | None:
    """A length the error states: "Input sequence length (16) doesn't match model configuration (32)"
    (patchtst, patchtsmixer: the dim that has the wrong length gets the right one), "`input_values` length
    16000 is not a multiple of 1920" (muse_spark_audio), "`padded_feature_length` to be a multiple of
    `n_window * 2` (100), but got 128" (qwen3_asr_encoder): rounded up to the multiple."""
    if m := _SEQUENCE.search(message):
        got, want = int(m.group(1)), int(m.group(2))
    elif m := _MULTIPLE.search(message):
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


_NORMALIZED = re.compile(r"normalized_shape=\[(\d+)\], expected input with shape \[(?:\*, )?\d+\], but got input of size ?(?:torch\.Size\()?\[([\d, ]+)\]")
_LAST_DIM = re.compile(r"Last dimension of the (\w+): (\d+) doesn't correspond to [^:]*: (\d+)")
_REDUCTION = re.compile(r"(?:same reduction dim, but got \[(\d+), (\d+)\] X \[(\d+), \d+\])|(?:cannot be multiplied \((\d+)x(\d+) and (\d+)x\d+\))")
_TOO_LONG = re.compile(r"broadcast a dimension of length (\d+) at -\d+! .*?broadcastable to \[([\d, ]+)\]")


def repair_feature_width(message: str, plan: InputPlan, info: InputsInfo) -> InputPlan | None:
    """Features (our own input, found by its shape in the message) whose last dim is not what the first layer
    takes: "Given normalized_shape=[768], expected input with shape [768], but got input of size
    torch.Size([1, 128, 80])" (speecht5, wav2vec2-bert), "a and b must have same reduction dim, but got
    [128, 80] X [320, 1024]" (granite_speech5_ctc, granite_speech5_encoder; flattened patches of cosmos3_edge,
    ernie4_5_vl_moe); and text longer than the position table: "Attempting to broadcast a dimension of length
    16 at -2! ... broadcastable to [1, 32, 512]" (owlvit, owlv2: their text has 16 positions); "Last dimension of
    the inputs: 32 doesn't correspond to config.d_model: 768" (perceiver: features, not ids)."""
    if m := _NORMALIZED.search(message):
        shape = tuple(int(d) for d in m.group(2).split(","))
        name = next((n for n, s in info.shapes.items() if s == shape and n in info.floats), None)
        return plan.with_shape(name, (*shape[1:-1], int(m.group(1)))) if name else None
    if (m := _LAST_DIM.search(message)) and m.group(1) in info.shapes:  # ids where the forward wants features
        name, got, want = m.group(1), int(m.group(2)), int(m.group(3))
        old = info.shapes[name]
        if name in info.floats:
            return plan.with_shape(name, (*old[1:-1], want)) if old[-1] == got else None
        better = plan.with_shape(name, (*old[1:], want))
        return better.with_float(name) if better else None
    if m := _REDUCTION.search(message):
        rows, got, want = (int(g) for g in (m.groups()[:3] if m.group(1) else m.groups()[3:]))
        for name, shape in info.shapes.items():
            lead = 1
            for d in shape[:-1]:
                lead *= d
            if name in info.floats and len(shape) <= 3 and shape[-1] == got and lead == rows:
                return plan.with_shape(name, (*shape[1:-1], want))
        return None
    if m := _TOO_LONG.search(message):
        length, target = int(m.group(1)), [int(d) for d in m.group(2).split(",")]
        text = next((n for n in ("input_ids", "decoder_input_ids") if n in info.shapes), None)
        if text and len(target) >= 2 and target[1] == info.shapes[text][-1] > length:
            return plan.with_shape(text, (length,))
    return None


_NEEDS = re.compile(r"specify|required|must be (?:provided|passed|given)|cannot be `?None|needs? to be (?:passed|provided)|are passed", re.I)
_NOT_BOTH = re.compile(r"\bboth\b|only one|not both", re.I)


def repair_needed_input(message: str, plan: InputPlan, info: InputsInfo) -> InputPlan | None:
    """An optional input the forward says it needs, by its parameter name in the message: "You have to specify
    bbox" (bros), "Bbox is required for horizontal relative position bias" (udop), "`visual_feats` cannot be
    `None`" (lxmert), "You have to specify either pixel_values or image_embeds" (vilt: the first one named,
    the next on the next try). Messages about giving two at once are not this kind."""
    if not _NEEDS.search(message) or _NOT_BOTH.search(message):
        return None
    params = {p.lower(): p for p in info.params}
    for word in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", message):
        name = params.get(word.lower())
        if name and name not in info.shapes and name not in plan.extra and name not in ("kwargs", "args"):
            return plan.with_extra(name)
    return None


_IS_MISSING = re.compile(r"`(\w+)` is missing")


def repair_missing_input(message: str, plan: InputPlan, info: InputsInfo) -> InputPlan | None:
    """An optional input the forward says is missing by its name in backticks: "Multimodal data was passed (via
    `image_grid_thw` or `video_grid_thw`) but `mm_token_type_ids` is missing" (ernie4_5_vl_moe's M-RoPE index)."""
    m = _IS_MISSING.search(message)
    if m is None or m.group(1) not in info.params or m.group(1) in info.shapes:
        return None
    return plan.with_extra(m.group(1))


def _read_side(line: str) -> str:
    """What a source line reads: the right of its assignment (``inputs_embeds = embed(input_ids)`` reads ``input_ids``)."""
    parts = re.split(r"(?<![=!<>:+\-*/])=(?!=)", line, maxsplit=1)
    return parts[-1]


_NONE_ATTRIBUTE = re.compile(
    r"'NoneType' object (?:has no attribute|is not (?:subscriptable|iterable))|must be Tensor, not NoneType|invalid combination of arguments - got \(NoneType,"
)


def repair_none_input(message: str, plan: InputPlan, info: InputsInfo) -> InputPlan | None:
    """An optional input the forward reads without a None check, named by the line that raised:
    "'NoneType' object has no attribute 'size'" at ``num_images = image_attention_mask.size(-1)`` (idefics),
    "... 'shape'" at ``input_shape = pixel_values_videos.shape`` (pe_audio_video_encoder), "embedding():
    argument 'indices' (position 2) must be Tensor, not NoneType" at an embedding of ``input_ids`` (instructblip),
    "conv1d() received an invalid combination of arguments - got (NoneType, Parameter, ..." at
    ``mel_spec = self.mel_conv(input_features)`` (clvp: its optional log-mel input)."""
    if not _NONE_ATTRIBUTE.search(message):
        return None
    for word in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", _read_side(info.line)):
        if word in info.params and word not in info.shapes and word not in plan.extra and word not in ("kwargs", "args", "self"):
            return plan.with_extra(word)
    return None


_OBJECT_ATTRIBUTE = re.compile(r"'(\w+)' object has no attribute '\w+'")


def repair_misread_input(message: str, plan: InputPlan, info: InputsInfo) -> InputPlan | None:
    """An optional input that sends the forward down a path its model does not have, named by the line that
    raised: llava with ``image_sizes`` splits its features by ``self.vision_tower.patch_size``, which only a
    pixtral tower has ("'CLIPVisionModel' object has no attribute 'patch_size'"); without them it takes
    the image whole (transformers/models/llava/modeling_llava.py, get_image_features). Left out, once."""
    m = _OBJECT_ATTRIBUTE.search(message)
    if m is None or m.group(1) == "NoneType":
        return None
    for word in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", info.line):  # the whole line: its keywords (device=...) are no assignment
        if word in info.shapes and word in info.optional and word != info.main_input and word not in plan.dropped:
            return replace(plan, dropped=(*plan.dropped, word))
    return None


_NOT_FLOAT = re.compile(
    r"Input dtype must be either a floating point|expected scalar type Float but found Long|expected .*?Float.*? but (?:found|got) .*?Long", re.I
)


def repair_float_input(message: str, plan: InputPlan, info: InputsInfo) -> InputPlan | None:
    """An input made as integers that the forward averages or multiplies as floats, named by the line that
    raised: "mean(): could not infer output dtype. Input dtype must be either a floating point or complex
    dtype. Got: Long" at ``bbox[:, :, [0, 2]].mean(dim=-1)`` (udop's boxes)."""
    if not _NOT_FLOAT.search(message):
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
WRAPPER_KEYWORDS = ("use_cache", "return_dict")  # what forward_wrapper adds; repair_duplicate_keyword drops them
_DUPLICATE_KEYWORD = re.compile(r"got multiple values for keyword argument '(\w+)'")


def repair_duplicate_keyword(message: str, plan: InputPlan, info: InputsInfo) -> InputPlan | None:
    """A keyword the wrapper adds (``use_cache=False``) that a forward taking ``**kwargs`` also passes on
    itself: "got multiple values for keyword argument 'use_cache'" (mimi_encoder, pocket_tts_audio_tokenizer)."""
    m = _DUPLICATE_KEYWORD.search(message)
    if m is None or m.group(1) in plan.dropped or m.group(1) not in WRAPPER_KEYWORDS:
        return None
    return replace(plan, dropped=(*plan.dropped, m.group(1)))


_REFUSED = re.compile(r"`(\w+)` is expected to be `?None`?")


def repair_refused_input(message: str, plan: InputPlan, info: InputsInfo) -> InputPlan | None:
    """Token ids a forward refuses because its caller always gives embeddings: "`input_ids` is expected to be
    `None`" (qwen3_omni_moe_talker_code_predictor: the talker calls it with ``inputs_embeds``, its own hidden
    state and the embedded code). The ids are not made; ``inputs_embeds`` are, when the forward takes them."""
    m = _REFUSED.search(message)
    if m is None or m.group(1) not in info.shapes or m.group(1) in plan.dropped or "inputs_embeds" not in info.params:
        return None
    better = replace(plan, dropped=(*plan.dropped, m.group(1)))
    return better.with_extra("inputs_embeds") or better


_TUPLE_OUTPUT = re.compile(r"'tuple' object has no attribute '(\w+)'")


def repair_tuple_output(message: str, plan: InputPlan, info: InputsInfo) -> InputPlan | None:
    """The wrapper's ``return_dict=False`` reaching an inner model through a forward's ``**kwargs`` whose own code
    then reads the inner output by attribute: "'tuple' object has no attribute 'last_hidden_state'" at
    ``self.model(input_ids=input_ids, use_cache=False, **kwargs).last_hidden_state`` (jev: transformers/models/jev/
    modeling_jev.py). The forward returns what it returns; the wrapper takes its first tensor either way."""
    m = _TUPLE_OUTPUT.search(message)
    if m is None or "return_dict" in plan.dropped or m.group(1) not in info.line:
        return None
    return replace(plan, dropped=(*plan.dropped, "return_dict"))


_CONV_ON_ROWS = re.compile(r"Expected 3D \(unbatched\) or 4D \(batched\) input to conv2d, but got input of size: \[(\d+), (\d+)\]")
_PATCH_DIMS = re.compile(r"chan\w*\s*,\s*(?:height|h|patch\w*)\s*,\s*(?:width|w|patch\w*)\s*\)?\s*=", re.I)


def _patch_side(width: int, config: Any) -> tuple[int, int] | None:
    """(channels, patch side) of a flattened patch row ``width`` wide: ``C*P*P`` with the config's channels."""
    import math

    channels = _channels(config) if config is not None else DEFAULT_CHANNELS
    side = math.isqrt(width // channels) if width % channels == 0 else 0
    return (channels, side) if side and channels * side * side == width else None


def repair_patch_rows(message: str, plan: InputPlan, info: InputsInfo) -> InputPlan | None:
    """Flattened patch rows ``(N, C*P*P)`` where the tower takes each patch as an image ``(N, C, P, P)``: a conv2d
    given the rows ("Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: [16, 588]",
    kimi_k25/modeling_kimi_k25.py: ``self.proj(pixel_values)``), or an unpacking of the patches that ends in
    channels, height and width (``batch_size, sequence_len, channel, height, width = pixel_values.shape``,
    paddleocr_vl/modeling_paddleocr_vl.py, whose image processor gives ``(N, C, P, P)``)."""
    if m := _CONV_ON_ROWS.search(message):
        shape = (int(m.group(1)), int(m.group(2)))
        name = next((n for n, s in info.shapes.items() if s == shape and n in info.floats), None)
    elif _UNPACK.search(message) and _PATCH_DIMS.search(info.line) and (line := _UNPACK_LINE.match(info.line)):
        name = line.group(2).rpartition(".")[2]
        name = name if len(info.shapes.get(name, ())) == 2 and name in info.floats else None
    else:
        return None
    if name is None:
        return None
    found = _patch_side(info.shapes[name][-1], info.config)
    return plan.with_shape(name, (found[0], found[1], found[1])) if found else None


_SECTIONS = re.compile(
    r"split_with_sizes expects split_sizes to sum exactly to (\d+) \(input tensor's size at dimension -1\), but got split_sizes=\[([\d, ]+)\]"
)


def repair_rope_sections(message: str, plan: InputPlan, info: InputsInfo) -> InputPlan | None:
    """A multimodal rotary whose frequencies do not fill its sections: "split_with_sizes expects split_sizes to sum
    exactly to 64 (input tensor's size at dimension -1), but got split_sizes=[8, 12, 12]" at
    ``freq.split(self.mrope_section, dim=-1)`` (glm4v_text, glm_image_text, glm4v_moe_text): the config's rotary
    width is fitted to the sections (:func:`fit_rotary`). Kept as (the width seen, *the sections)."""
    m = _SECTIONS.search(message)
    if m is None or "section" not in info.line or plan.rope_sections:
        return None
    return replace(plan, rope_sections=(int(m.group(1)), *(int(d) for d in m.group(2).split(","))))


def repair_image_as_patches(message: str, plan: InputPlan, info: InputsInfo) -> InputPlan | None:
    """A linear patch embedding given a 4-D image: "a and b must have same reduction dim, but got [1134, 378] X
    [588, 1152]" where our pixels (1, 3, 378, 378) lie flat as 1134 rows of 378 and 588 is ``C*P*P`` for the
    config's patch size: the image as its sequence of flattened patches (B, H/P * W/P, C*P*P), what
    molmo2/image_processing_molmo2.py ``batch_pixels_to_patches`` gives the tower."""
    m = _REDUCTION.search(message)
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
            fired.repair(repair.__name__)  # the zoo tier's record of which repairs a real type exercises
            return better
    return None


# --- the LoadedModel ---------------------------------------------------------------


def load(
    model_type: str,
    overrides: Iterable[str],
    seq_len: int,
    batch: int,
    device: str = "meta",
    shrink: bool = False,
    plan: InputPlan | None = None,
) -> Any:
    """Build ``model_type`` on ``device`` (``shrink``: a smaller config, for real CPU weights) with its inputs.

    Raises :class:`BuildError` when the constructor raises; the caller decides
    whether that is bad input or a reason to try another way.
    """
    import torch

    from neuronprobe.loading import LoadedModel

    overrides = list(overrides)
    config = build_config(model_type, overrides)
    notes: list[str] = [note] if (note := misspelled_note(config)) else []
    plan = plan or InputPlan()
    user_sized = any(item.partition("=")[0].rsplit(".", 1)[-1] == "image_size" for item in overrides)
    if not user_sized and (pooled := _pooled_image_size(config)):  # no input runs on such a config: every strategy gets the fix
        notes.append(f"the config's vision image size does not fit its connector; the capture used {', '.join(pooled)} (give yours with --set)")
    if plan.fill_unset and (filled := complete_config(config)):
        notes.append(f"the default config leaves fields the forward needs unset; the capture used {', '.join(filled)} (give yours with --set)")
    if shrink:
        config, changes = shrink_config(config, narrow=not plan.from_parent)  # recorded inputs have the parent's widths
        if changes:
            notes.append(f"shrunken config ({', '.join(changes)}): shapes differ from the real model, op kinds and lines do not")
    if plan.rope_sections and (fitted := fit_rotary(config, plan.rope_sections[1:], plan.rope_sections[0])):  # the width seen: after any shrink
        notes.append(
            f"the default config's rotary width does not fill its rotary sections {list(plan.rope_sections[1:])}; the capture used {', '.join(fitted)} (give yours with --set)"
        )
    if plan.from_parent and device != "meta":  # full widths on the CPU: only for a component small enough
        from neuronprobe.loaders import hf_parent

        sized = build_model(config, "meta")  # fills the config in place: what it filled is said below
        early_filled: tuple[str, ...] = sized.filled
        size = hf_parent.weight_bytes(sized.inner)
        if size > hf_parent.MAX_CPU_RECORD_BYTES:
            raise hf_parent.NoParentInputs(f"at its parent's widths the component is too large to run on the CPU ({size / 2**30:.1f} GiB of weights)")
    else:
        early_filled = ()
    built = build_model(config, device)
    if built.head_note:
        notes.append(built.head_note)
    if filled_now := [*early_filled, *(f for f in built.filled if f not in early_filled)]:
        notes.append(f"the default config lacks fields its constructor reads; the build used {', '.join(filled_now)} (give yours with --set)")
    if entry_point(built.inner) != "forward":
        notes.append(f"{type(built.inner).__name__} has no forward of its own; its {entry_point(built.inner)}() was analysed")
    inner = built.inner
    recorder = None
    if plan.from_parent:
        from neuronprobe.loaders import hf_parent

        recorder = hf_parent.recorder_for(model_type, config, inner, device, batch, seq_len)
        notes.append(recorder.note)
    module = forward_wrapper(recorder.target if recorder is not None else inner, drop=plan.dropped)

    def inputs_for(batch_size: int, seq: int) -> dict[str, Any]:
        if recorder is not None:
            return recorder.inputs(batch_size, seq)
        with torch.no_grad():
            return make_inputs(inner, config, batch_size, seq, device, plan)

    return LoadedModel(
        name=f"hf_{model_type}",
        source=f"hf:{model_type}",
        module=module,
        kwargs=inputs_for(batch, seq_len),
        make_inputs=inputs_for,
        on_meta=device == "meta",
        overrides=overrides,
        input_plan=plan.to_json() if plan != InputPlan() else None,
        notes=notes,
    )
