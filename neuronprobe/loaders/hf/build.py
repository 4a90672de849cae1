"""The module: built from a config (head, base, a class found by its config class, a parent's build)."""

from __future__ import annotations

import contextlib
import copy
import functools
import inspect
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from neuronprobe.errors import error_line
from neuronprobe.loaders.hf.config import BuildError, build_config, complete_for_build, parents_of, shrink_config, sub_configs, tolerant
from neuronprobe.loaders.hf.error_texts import error_text

WRAPPER_KEYWORDS = ("use_cache", "return_dict")  # what forward_wrapper adds; repair_duplicate_keyword drops them


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
        with tolerant():
            cls = getattr(transformers, name)
            if isinstance(cls, type) and issubclass(cls, torch.nn.Module) and cls not in found:
                found.append(cls)
    package = config_class.__module__.rpartition(".")[0]
    pretrained: list[type] = []
    plain: list[type] = []
    with tolerant():
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


def _modeling_modules(model_type: str) -> list[Any]:
    """The modeling modules of a model type's package (``transformers.models.<name>.modeling_*``), imported."""
    import importlib
    import pkgutil

    from transformers import CONFIG_MAPPING

    package = CONFIG_MAPPING[model_type].__module__.rpartition(".")[0]
    found = []
    for info in pkgutil.iter_modules(importlib.import_module(package).__path__):
        if info.name.startswith("modeling_"):
            with tolerant():  # a modeling module that needs what is not installed
                found.append(importlib.import_module(f"{package}.{info.name}"))
    return found


def _borrowed_modeling_modules(parent_config: Any) -> list[Any]:
    """The modeling modules of the classes a parent type without its own builds with: ``pp_chart2table`` has no
    ``modeling_*`` module, its model is another type's classes (transformers/models/pp_chart2table/ holds only the
    configuration, processing and a modular file), so the watched constructors are those of the module its built
    model's class comes from (built once on the meta device to find it)."""
    import sys

    import torch

    with torch.device("meta"):
        built = _build_model(copy.deepcopy(parent_config), "meta")
    module = sys.modules.get(type(built.inner).__module__)
    return [module] if module is not None else []


@contextlib.contextmanager
def _constructors_watched(modules: list[Any], config_class: type, got: list[Any]) -> Iterator[None]:
    """While the block runs, every ``torch.nn.Module`` class of ``modules`` that defines its own ``__init__``
    puts the first module built with a config of exactly ``config_class`` (positional or keyword) in ``got``:
    the outermost, since a constructor is entered before those of the modules it builds. Restored after."""
    import torch

    def watched(init: Callable[..., None]) -> Callable[..., None]:
        @functools.wraps(init)
        def init_watched(self: Any, *args: Any, **kwargs: Any) -> None:
            if not got and any(type(a) is config_class for a in (*args, *kwargs.values())):
                got.append(self)
            init(self, *args, **kwargs)

        return init_watched

    classes = {c for m in modules for c in vars(m).values() if isinstance(c, type) and issubclass(c, torch.nn.Module) and "__init__" in vars(c)}
    originals = {c: vars(c)["__init__"] for c in classes}
    try:
        for cls, init in originals.items():
            cls.__init__ = watched(init)  # type: ignore[misc]
        yield
    finally:
        for cls, init in originals.items():
            cls.__init__ = init  # type: ignore[misc]


def built_by_parent(config: Any) -> Any:
    """The module a parent model builds from this sub-config, when no class builds from it alone: the outermost
    module whose constructor gets a config of this class while the parent (its default config with this config in
    place; on the CPU, shrunk) is built. Gemma 4 Unified's vision embedder is ``Gemma4UnifiedVisionEmbedder(config.vision_config,
    config.text_config)`` (transformers/models/gemma4_unified/modeling_gemma4_unified.py); VibeVoice's diffusion head
    is ``VibeVoiceDiffusionHead(config.diffusion_head_config)``, a constructor without a typed config
    (transformers/models/vibevoice/modeling_vibevoice.py). The constructors watched are those of the module classes
    in the parent's own modeling modules, wrapped for the parent's build only (:func:`_constructors_watched`);
    matched by config class, since the parent's model constructors build from a deep copy of its config
    (``_from_config``). None when no parent builds one."""
    import torch

    for parent_type, attr in parents_of(getattr(config, "model_type", ""), type(config)):
        got: list[Any] = []
        try:
            on_meta = torch.empty(0).is_meta  # the device the component is being built on
            parent_config = build_config(parent_type, [])
            if not on_meta:  # real weights: the parent's other parts small
                parent_config, _ = shrink_config(parent_config)
            setattr(parent_config, attr, config)
            modules = _modeling_modules(parent_type) or _borrowed_modeling_modules(parent_config)
            with _constructors_watched(modules, type(config), got):
                _build_model(parent_config, "meta" if on_meta else "cpu")
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
            if isinstance(exc, ValueError) and bool(error_text("unrecognized-config-class").search(str(exc))):
                return _build_by_class(config, exc, filled)  # a sub-config type: its class is found by its config class
            changes = complete_for_build(config, exc)
            if changes:
                filled.extend(changes)
                continue
            others = _own_classes(config)
            if others and (bool(error_text("auto-class-not-found").search(str(exc))) or not _auto_takes(config)):
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
    if head_error is not None and not (isinstance(head_error, ValueError) and bool(error_text("unrecognized-config-class").search(str(head_error)))):
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


def entry_params(inner: Any) -> Any:
    return inspect.signature(getattr(inner, entry_point(inner))).parameters


def forward_wrapper(inner: Any, drop: tuple[str, ...] = ()) -> Any:
    """A module whose forward calls the model with its cache off and returns its first output tensor."""
    import torch

    params = entry_params(inner)
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
