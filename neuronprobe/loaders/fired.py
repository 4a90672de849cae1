"""Which family recipes and input repairs made a capture's inputs: the loader's one recording point.

A recipe (a record of :mod:`neuronprobe.loaders.hf.inputs.recipes`) fires when it recognises the model's family and returns
inputs; a repair (:data:`hf.REPAIRS`) fires when it learns a better input plan from the forward's
error. Both are named by their function names. The capture opens a :func:`recording` around each
strategy's attempts, and the names of the strategy that captured become
``Report.capture.input_recipes`` / ``input_repairs`` (the zoo tier, ``tests/test_zoo_tier*.py``,
checks them per model type). Outside a recording, noting a name does nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field


@dataclass
class Fired:
    """The recipes and repairs that fired, each once, in the order they first fired."""

    recipes: list[str] = field(default_factory=list)
    repairs: list[str] = field(default_factory=list)


_CURRENT: ContextVar[Fired | None] = ContextVar("neuronprobe_fired", default=None)


def recipe(name: str) -> None:
    """Note that the family recipe ``name`` returned inputs (in the current recording, if any)."""
    if (current := _CURRENT.get()) is not None and name not in current.recipes:
        current.recipes.append(name)


def repair(name: str) -> None:
    """Note that the input repair ``name`` answered a forward's error (in the current recording, if any)."""
    if (current := _CURRENT.get()) is not None and name not in current.repairs:
        current.repairs.append(name)


@contextlib.contextmanager
def recording() -> Iterator[Fired]:
    """Record the recipes and repairs that fire inside the block (a nested recording hides the outer one)."""
    fired = Fired()
    token = _CURRENT.set(fired)
    try:
        yield fired
    finally:
        _CURRENT.reset(token)
