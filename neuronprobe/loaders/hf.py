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

import copy
import inspect
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from neuronprobe.errors import InputError, error_line

DEFAULT_IMAGE_SIZE = 224
DEFAULT_CHANNELS = 3
DEFAULT_MEL_BINS = 80
AUDIO_SAMPLES = 16000  # one second at 16 kHz: what wav2vec-style encoders take
ALT_AUDIO_FRAMES = 128
TEXT_ID_LIMIT = 1000  # ids well below every special token of the zoo's vocabularies
QWEN_GRID = 4  # an image grid of 4x4 patches (divisible by the spatial merge of 2)

# Shrinking for the real-CPU strategy: ops and their lines do not depend on these sizes.
SHRUNK_LAYERS = 2
SHRUNK_EXPERTS = 4
SHRUNK_HEADS = 4
SHRUNK_HEAD_DIM = 32
WIDE_HIDDEN = 512  # hidden sizes above this are narrowed

_LAYER_FIELD = re.compile(r"^(num_hidden_layers|num_layers|n_layer|n_layers|encoder_layers|decoder_layers|num_decoder_layers|num_encoder_layers|depth)$")
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
_IMAGE_COUNT_FIELDS = ("mm_tokens_per_image", "image_seq_length", "num_image_tokens")


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


def _shrink_one(config: Any, narrow: bool = True) -> list[str]:
    changes: list[str] = []

    def cap(name: str, limit: int) -> None:
        value = getattr(config, name, None)
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
        new_heads = min(heads, SHRUNK_HEADS)
        kv = getattr(config, "num_key_value_heads", None)
        if not (isinstance(head_dim, int) and head_dim > 0) and hidden % heads == 0 and hidden // heads != SHRUNK_HEAD_DIM:
            with _ignore():
                config.head_dim = SHRUNK_HEAD_DIM  # models that read head_dim from the config
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
_UNSET_FIELD_VALUES: dict[str, Any] = {"num_experts_per_tok": 2, "n_group": 1, "topk_group": 1, "sliding_window": 4096}
_UNSET_ERROR = re.compile(r"NoneType|is not set|not be None|must be int, not None")


def complete_config(config: Any) -> list[str]:
    """Give the unset fields of :data:`_UNSET_FIELD_VALUES` (and ``head_dim``) a value, in place; what was set."""
    changes: list[str] = []
    for sub in sub_configs(config):
        fills = dict(_UNSET_FIELD_VALUES)
        hidden, heads = getattr(sub, "hidden_size", None), getattr(sub, "num_attention_heads", None)
        if isinstance(hidden, int) and isinstance(heads, int) and heads > 0:
            fills["head_dim"] = hidden // heads
        for name, value in fills.items():
            if name in vars(sub) and getattr(sub, name) is None:
                with _ignore():
                    setattr(sub, name, value)
                    changes.append(f"{name}={value}")
    return changes


def may_need_unset_fields(message: str, config: Any) -> bool:
    """The forward failed on a None, and the config has an unset field neuronprobe knows a value for."""
    if not _UNSET_ERROR.search(message):
        return False
    probe = copy.deepcopy(config)
    return bool(complete_config(probe))


class _ignore:
    """A context that swallows a strict config's refusal of one field."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return True


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
            if name != "hidden_size" and name.endswith(("hidden_size", "hidden_dim", "embed_dim")) and value in narrowed and isinstance(value, int):
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
            if not info.name.startswith("modeling_"):
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


def _build_by_class(config: Any, first_error: BaseException) -> Any:
    """The first class that takes this config builds it; the auto class's error when none does."""
    import torch

    plain: list[Any] = []
    classes = model_classes_for(config)
    with_forward = [c for c in classes if getattr(c, "forward", None) is not torch.nn.Module.forward]
    for cls in with_forward or classes:  # one without a forward of its own (a VQ-VAE) only when there is no other
        try:
            if hasattr(cls, "_from_config"):
                return cls._from_config(config)
            plain.append(cls(config))
        except Exception as exc:
            first_error = exc
    if plain:  # plain modules that take the config: the outermost (most modules), not a rotary embedding inside it
        return max(plain, key=lambda m: len(list(m.modules())))
    raise BuildError(error_line(first_error)) from first_error


def build_model(config: Any, device: str) -> BuiltModel:
    """The deploy head (causal LM / seq2seq LM) when it takes the config, else the base model."""
    import torch
    import transformers
    from transformers import AutoModel, AutoModelForCausalLM, AutoModelForSeq2SeqLM

    transformers.logging.set_verbosity_error()  # its advice on standalone heads is noise here
    head = AutoModelForSeq2SeqLM if getattr(config, "is_encoder_decoder", False) else AutoModelForCausalLM
    head_error: BaseException | None = None
    with torch.device(device):
        try:
            inner = head.from_config(config)
            return BuiltModel(inner.eval(), type(inner).__name__)
        except Exception as exc:  # no such head for this type, or the head refuses the config
            head_error = exc
        try:
            inner = AutoModel.from_config(config)
        except ValueError as exc:
            if "Unrecognized configuration class" not in str(exc):
                raise BuildError(error_line(exc)) from exc
            inner = _build_by_class(config, exc)  # a sub-config type: its class is found by its config class
        except Exception as exc:
            raise BuildError(error_line(exc)) from exc
    note = None
    if not (isinstance(head_error, ValueError) and "Unrecognized configuration class" in str(head_error)):
        note = f"the {head.__name__.replace('AutoModelFor', '')} head refused the config ({error_line(head_error)}); the base model {type(inner).__name__} was analysed"
    return BuiltModel(inner.eval(), type(inner).__name__, note)


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


def forward_wrapper(inner: Any) -> Any:
    """A module whose forward calls the model with its cache off and returns its first output tensor."""
    import torch

    params = inspect.signature(inner.forward).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    extra: dict[str, Any] = {}
    if "return_dict" in params or takes_any:
        extra["return_dict"] = False
    if getattr(getattr(inner, "config", None), "use_cache", None) is not None and ("use_cache" in params or takes_any):
        extra["use_cache"] = False

    class HFModel(torch.nn.Module):
        """Calls the transformers model with cache off and returns the first output tensor."""

        def __init__(self, model: torch.nn.Module) -> None:
            super().__init__()
            self.model = model

        def forward(self, **inputs: torch.Tensor) -> Any:
            return _first_tensor(self.model(**inputs, **extra))

    return HFModel(inner)


# --- inputs --------------------------------------------------------------------------


@dataclass
class InputPlan:
    """Choices an earlier attempt's error taught: how many image tokens, which audio layout."""

    image_tokens: int | None = None
    audio_time_major: bool = False
    from_parent: bool = False  # record the inputs from a parent model's call (hf_parent), not from the config
    fill_unset: bool = False  # give the config's unset fields a value (complete_config)


def _field(configs: list[Any], names: Iterable[str]) -> Any:
    for config in configs:
        for name in names:
            value = getattr(config, name, None)
            if value is not None:
                return value
    return None


def _image_size(config: Any) -> tuple[int, int]:
    size = getattr(config, "image_size", None) or DEFAULT_IMAGE_SIZE
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
    patch = int(getattr(vision, "patch_size", 14) or 14)
    return max(1, (h // patch) * (w // patch))


def _vision_inputs(config: Any, vision: Any, params: Any, batch: int, device: str, plan: InputPlan) -> tuple[dict[str, Any], int]:
    """Pixels (or flattened patches with their grid) and how many image tokens stand for them."""
    import torch

    if "image_grid_thw" in params:  # Qwen-VL: patches flattened, with their (t, h, w) grid
        patch = int(getattr(vision, "patch_size", 14) or 14)
        temporal = int(getattr(vision, "temporal_patch_size", 2) or 2)
        merge = int(getattr(vision, "spatial_merge_size", 2) or 2)
        grid = QWEN_GRID * merge // 2 if merge > 2 else QWEN_GRID
        patches = grid * grid
        width = _channels(vision) * temporal * patch * patch
        inputs = {
            "pixel_values": torch.randn(batch * patches, width, device=device),
            "image_grid_thw": torch.tensor([[1, grid, grid]] * batch, device="cpu" if device == "meta" else device),
        }
        return inputs, plan.image_tokens or patches // (merge * merge)
    return {"pixel_values": _pixels(vision, batch, device)}, plan.image_tokens or _image_token_count(config, vision)


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
    return None


def make_inputs(inner: Any, config: Any, batch: int, seq: int, device: str, plan: InputPlan | None = None) -> dict[str, Any]:
    """Every input the forward needs, from the config alone: its main input, then each required one by name."""
    import torch

    plan = plan or InputPlan()
    params = inspect.signature(inner.forward).parameters
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
    elif main in ("hidden_states", "inputs_embeds", "query_embeds") and main in params:
        inputs[main] = _by_name(main, config, batch, seq, device, inputs)
    else:
        ids = text_ids(config, batch, seq, device)
        vision = getattr(config, "vision_config", None)
        image_token = _field([config, getattr(config, "text_config", None)] if hasattr(config, "text_config") else [config], _IMAGE_TOKEN_FIELDS)
        if vision is not None and isinstance(image_token, int) and "pixel_values" in params:
            pixel_inputs, count = _vision_inputs(config, vision, params, batch, device, plan)
            inputs.update(pixel_inputs)
            ids = torch.cat([torch.full((batch, count), image_token, dtype=ids.dtype, device=device), ids], dim=1)
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
    for name in (*required, *needed):
        if name not in inputs:
            value = _by_name(name, config, batch, seq, device, inputs)
            if value is not None:
                inputs[name] = value
    return inputs


_FEATURE_COUNT = re.compile(r"image (?:features|tokens).*?features:? (\d+)", re.I | re.S)


def learn_from_error(message: str, plan: InputPlan, main_input: str) -> InputPlan | None:
    """A better input plan from the forward's own complaint, or None when it teaches nothing new."""
    m = _FEATURE_COUNT.search(message)
    if m and plan.image_tokens != int(m.group(1)):
        return InputPlan(image_tokens=int(m.group(1)), audio_time_major=plan.audio_time_major)
    if main_input == "input_features" and not plan.audio_time_major:
        return InputPlan(image_tokens=plan.image_tokens, audio_time_major=True)
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
    notes: list[str] = []
    plan = plan or InputPlan()
    if plan.fill_unset and (filled := complete_config(config)):
        notes.append(f"the default config leaves fields the forward needs unset; the capture used {', '.join(filled)} (give yours with --set)")
    if shrink:
        config, changes = shrink_config(config, narrow=not plan.from_parent)  # recorded inputs have the parent's widths
        if changes:
            notes.append(f"shrunken config ({', '.join(changes)}): shapes differ from the real model, op kinds and lines do not")
    if plan.from_parent and device != "meta":  # full widths on the CPU: only for a component small enough
        from neuronprobe.loaders import hf_parent

        size = sum(p.numel() * p.element_size() for p in build_model(config, "meta").inner.parameters())
        if size > hf_parent.MAX_CPU_RECORD_BYTES:
            raise hf_parent.NoParentInputs(f"at its parent's widths the component is too large to run on the CPU ({size / 2**30:.1f} GiB of weights)")
    built = build_model(config, device)
    if built.head_note:
        notes.append(built.head_note)
    inner = built.inner
    recorder = None
    if plan.from_parent:
        from neuronprobe.loaders import hf_parent

        recorder = hf_parent.recorder_for(model_type, config, inner, device, batch, seq_len)
        notes.append(recorder.note)
    module = forward_wrapper(recorder.target if recorder is not None else inner)

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
        notes=notes,
    )
