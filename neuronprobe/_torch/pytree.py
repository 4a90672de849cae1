"""``torch.utils._pytree``: walk nested inputs and outputs (tuples, dicts, dataclasses torch knows).

Checked on torch 2.13.0. The xla-cpu worker's modules (``backends/xla_*``,
``backends/train_program.py``) import ``torch.utils._pytree`` themselves under
torch 2.9 and are left as they are; this wrapper serves the analysis process.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from neuronprobe._torch.check import Check, MissingInternal, run_check

INTERNAL = "torch.utils._pytree"
DEGRADES = "reading nested model inputs and outputs (training step capture, output counts)"

T = TypeVar("T")


def _module() -> object:
    try:
        import torch.utils._pytree as pytree
    except ImportError as exc:
        raise MissingInternal(INTERNAL, DEGRADES, str(exc)) from exc
    return pytree


def tree_leaves(value: object) -> list[object]:
    leaves: list[object] = _module().tree_leaves(value)  # type: ignore[attr-defined]
    return leaves


def tree_map(fn: Callable[[object], object], value: T, is_leaf: Callable[[object], bool] | None = None) -> T:
    """``value`` with each leaf replaced by ``fn(leaf)``: the same containers, new leaves."""
    mapped: T = _module().tree_map(fn, value, is_leaf=is_leaf)  # type: ignore[attr-defined]
    return mapped


def leaves_with_names(value: object) -> list[tuple[str, object]]:
    """Each leaf with its access path as torch spells it (``[0]``, ``['logits']``); empty for the value itself."""
    pytree = _module()
    leaves, _ = pytree.tree_flatten_with_path(value)  # type: ignore[attr-defined]
    return [(str(pytree.keystr(path)), leaf) for path, leaf in leaves]  # type: ignore[attr-defined]


def register_constant(cls: type) -> None:
    """Let torch.export take instances of ``cls`` as inputs holding no tensors of the graph's own (once per class).

    ``cls`` defines ``__eq__`` and ``__hash__`` of its own, as torch requires of a constant.
    """
    pytree = _module()
    register = getattr(pytree, "register_constant", None)
    if not callable(register):
        raise MissingInternal(INTERNAL, "video trackers' inference sessions as export inputs", "no register_constant")
    if cls not in getattr(pytree, "SUPPORTED_NODES", {}):
        register(cls)


def self_check() -> Check:
    def probe() -> None:
        value = {"a": (1, [2, 3])}
        if tree_leaves(value) != [1, 2, 3] or tree_map(lambda v: v, value) != value:
            raise MissingInternal(INTERNAL, DEGRADES, "tree_leaves/tree_map return something else")
        if leaves_with_names(value)[0] != ("['a'][0]", 1):
            raise MissingInternal(INTERNAL, DEGRADES, "tree_flatten_with_path/keystr spell paths differently")
        if not callable(getattr(_module(), "register_constant", None)):
            raise MissingInternal(INTERNAL, DEGRADES, "no register_constant (video trackers' sessions as export inputs)")

    return run_check(INTERNAL, DEGRADES, probe)
