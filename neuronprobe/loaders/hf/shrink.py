"""A shrunken config that keeps every layer kind of the full one, checked on the built modules.

The real-CPU capture strategy and the xla-cpu backend's shrunken copy run fewer layers than the model has. That
holds the ops and their lines only while each kind of layer is still among them: nllb-moe's MoE layers come every
4th layer (``encoder_sparse_step``), so two layers hold no router at all. The config's own fields give a first
depth (:func:`~neuronprobe.loaders.hf.config.kind_depth`); this module builds the full-depth model on the meta
device, reads each layer stack's kinds from the built layers (their module classes and their flags, such as
gemma3's ``is_sliding``), and deepens the shrunken config until every kind is in it. What still differs (a module
class of the full build that the shrunken build lacks) is named, never hidden.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from neuronprobe.loaders.hf.build import build_model
from neuronprobe.loaders.hf.config import layer_counts, shrink_config

MAX_DEEPENINGS = 4  # rebuilds of the shrunken config (on the meta device) while a layer kind is still missing

Kind = frozenset[tuple[str, tuple[tuple[str, Any], ...]]]


@dataclass(frozen=True)
class ShrunkConfig:
    """A shrunken config, what changed, and what was checked against the full-depth build."""

    config: Any
    changes: list[str]
    full_classes: frozenset[str] = frozenset()  # module classes of the full-depth build (empty: it did not build)
    kinds: tuple[str, ...] = ()  # what tells the full build's layer kinds apart, for the report
    missing_kinds: tuple[str, ...] = field(default=())  # layer kinds the shrunken build still lacks

    @property
    def checked(self) -> bool:
        return bool(self.full_classes)


def module_classes(module: Any) -> frozenset[str]:
    """The class names of every module in ``module`` (itself included)."""
    return frozenset(type(m).__name__ for m in module.modules())


def _flags(module: Any) -> tuple[tuple[str, Any], ...]:
    """A module's public bool and str attributes (gemma3's ``is_sliding``, ``attention_type``): what sets apart two
    layers of one class. Widths and indices (ints) are left out: they differ in a shrunken build by design."""
    return tuple(sorted((k, v) for k, v in vars(module).items() if not k.startswith("_") and k != "training" and isinstance(v, (bool, str))))


def layer_kind(layer: Any) -> Kind:
    """One layer's kind: the set of (class, flags) of its modules. A set, so 128 experts and 4 are one kind."""
    return frozenset((type(m).__name__, _flags(m)) for m in layer.modules())


def layer_stacks(module: Any, counts: set[int]) -> dict[str, list[Any]]:
    """Every ModuleList or Sequential in ``module`` whose length is one of the config's layer counts, by path."""
    import torch

    return {
        path: list(sub)
        for path, sub in module.named_modules()
        if isinstance(sub, (torch.nn.ModuleList, torch.nn.Sequential)) and len(sub) in counts and len(sub) > 1
    }


def _describe(kinds: list[Kind]) -> list[str]:
    """What tells these layer kinds apart, in words: the classes some kinds have and others lack, else the flags
    (``Gemma3Attention.is_sliding=False``) some kinds have and others lack."""
    classes = [{name for name, _flags in kind} for kind in kinds]
    differing = sorted(set[str]().union(*classes) - classes[0].intersection(*classes[1:]))
    if differing:
        return differing
    values: dict[str, set[Any]] = {}
    for kind in kinds:
        for name, fl in kind:
            for k, v in fl:
                values.setdefault(f"{name}.{k}", set()).add(v)
    return sorted(flag for flag, seen in values.items() if len(seen) > 1)[:4]


def _distinct(layers: list[Any]) -> list[Kind]:
    return list(dict.fromkeys(layer_kind(layer) for layer in layers))


def _missing(full: dict[str, list[Any]], built: Any) -> dict[str, list[int]]:
    """Per stack path: the index of the first layer of each kind the shrunken build's stack at that path lacks."""
    modules = dict(built.named_modules())
    absent: dict[str, list[int]] = {}
    for path, layers in full.items():
        have = {layer_kind(layer) for layer in modules.get(path, [])}
        kinds = [layer_kind(layer) for layer in layers]
        if firsts := [i for i, kind in enumerate(kinds) if kind not in have and kinds.index(kind) == i]:
            absent[path] = firsts
    return absent


def shrink_keeping_kinds(config: Any, narrow: bool = True) -> ShrunkConfig:
    """The shrunken config (:func:`~neuronprobe.loaders.hf.config.shrink_config`), deepened until each layer stack
    of the shrunken build has a layer of every kind the same stack has at full depth.

    Both builds are on the meta device (no weights are made). When the full-depth model does not build there, the
    config's own kind fields are all that was used (``checked`` is False, and the report says so).
    """
    counts = layer_counts(config)
    small, changes = shrink_config(config, narrow)
    if not counts:
        return ShrunkConfig(small, changes)
    try:
        full = build_model(copy.deepcopy(config), "meta").inner
    except Exception:  # the full-depth model does not build on meta: the config's kind fields stand alone
        return ShrunkConfig(small, changes)
    stacks = layer_stacks(full, counts)
    described = tuple(dict.fromkeys(word for layers in stacks.values() if len(kinds := _distinct(layers)) > 1 for word in _describe(kinds)))
    depths: dict[int, int] = {}
    absent: dict[str, list[int]] = {}
    for attempt in range(MAX_DEEPENINGS + 1):
        try:
            built = build_model(copy.deepcopy(small), "meta").inner
        except Exception:  # the shrunken config does not build on meta: the caller's own build finds out why
            return ShrunkConfig(small, changes, module_classes(full), described)
        absent = _missing(stacks, built)
        grown = {len(stacks[p]): 1 + max(firsts) for p, firsts in absent.items() if 1 + max(firsts) > depths.get(len(stacks[p]), 0)}
        if not absent or not grown or attempt == MAX_DEEPENINGS:
            break
        for count, depth in grown.items():
            depths[count] = max(depth, depths.get(count, 0))
        small, changes = shrink_config(config, narrow, depths)
    missing = tuple(dict.fromkeys(word for path, firsts in absent.items() for word in _describe(_distinct(stacks[path]))))
    return ShrunkConfig(small, changes, module_classes(full), described, missing)
