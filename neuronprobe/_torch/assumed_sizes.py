"""Branches on data-dependent sizes followed with an assumed size (the ``fake`` capture strategy).

A detection model filters boxes (``torch.where(keep)``, ``torchvision::nms``)
and then branches on how many are left (``if boxes.numel() == 0``). On fake
tensors that count is an unbacked symbol, the branch raises
``GuardOnDataDependentSymNode`` and both torch.export and dynamo lose every op
after it, the custom ops the user most needs to hear about included. Inside
:func:`assumed_sizes`, a guard on a *size* symbol is decided with a small
assumed size instead (a few elements survive), and each such decision is
recorded so that the report names the branch and says it was assumed. Value
reads (``.item()`` symbols, not size-like) are left alone: a branch on a
tensor value stays a failed export and a control-flow finding.

Checked on torch 2.13.0 (not used by the xla-cpu worker). Internals used:
``ShapeEnv.__init__`` (wrapped inside the block, put back on exit), the env's
``real_tensor_prop_unbacked_vals`` table (what ``propagate_real_tensors`` fills
with real values; torch resolves a guard on unbacked symbols from it as a last
resort and turns it into a runtime assertion), ``size_like``, ``var_to_range``
and ``is_unbacked_symint``. Without them a guard on a size stays a failed capture.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from neuronprobe._torch.check import Check, MissingInternal, run_check

INTERNAL = "torch.fx.experimental.symbolic_shapes.ShapeEnv.real_tensor_prop_unbacked_vals"
DEGRADES = "following a branch on a data-dependent size (detection models' nms and roi_align after it) in the fake capture"
LOGGER = "torch.fx.experimental.symbolic_shapes"  # warns "propagate_real_tensors ..." at each decision
ASSUMED_SIZE = 2  # not 0 or 1: torch specialises those, and one survivor hides size-1 broadcasting


@dataclass(frozen=True)
class Assumption:
    """One size symbol a guard was decided with: its name, the size assumed, the stack when it was asked."""

    symbol: str
    size: int
    stack: traceback.StackSummary


class _AssumedTable(dict[Any, Any]):
    """Stands in for the env's real-value table: knows every size-like unbacked symbol while the block is open."""

    def __init__(self, env: Any, record: list[Assumption], open_flag: threading.Event) -> None:
        super().__init__()
        self._env = env
        self._record = record
        self._open = open_flag

    def __bool__(self) -> bool:
        return self._open.is_set()

    def __contains__(self, symbol: object) -> bool:
        if not self._open.is_set():
            return False
        try:
            return bool(self._env.is_unbacked_symint(symbol)) and symbol in self._env.size_like
        except Exception:  # not a sympy symbol
            return False

    def __getitem__(self, symbol: Any) -> Any:
        import sympy

        if symbol not in self:
            raise KeyError(symbol)
        size = ASSUMED_SIZE
        bounds = self._env.var_to_range.get(symbol)
        if bounds is not None and bounds.lower.is_Integer:
            size = max(size, int(bounds.lower))
        if bounds is not None and bounds.upper.is_Integer:
            size = min(size, int(bounds.upper))
        self._record.append(Assumption(str(symbol), size, _asking_stack()))
        return sympy.Integer(size)


@contextlib.contextmanager
def assumed_sizes() -> Iterator[list[Assumption]]:
    """Every ShapeEnv made inside (export's, dynamo's) decides guards on size symbols with an assumed size.

    Yields the list that receives each decision. On exit the constructor is put
    back and the tables go quiet: shapes read after the trace print as ``u0``
    again, never as the assumed size.
    """
    try:
        from torch.fx.experimental.symbolic_shapes import ShapeEnv
    except ImportError as exc:
        raise MissingInternal(INTERNAL, DEGRADES, str(exc)) from exc
    original = ShapeEnv.__init__
    record: list[Assumption] = []
    open_flag = threading.Event()
    open_flag.set()

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        if not isinstance(getattr(self, "real_tensor_prop_unbacked_vals", None), dict) or not hasattr(self, "size_like"):
            return  # a changed torch: guards on sizes raise as before (the self-check names it)
        if not self.real_tensor_prop_unbacked_vals:  # propagate_real_tensors already fills it with real values
            self.real_tensor_prop_unbacked_vals = _AssumedTable(self, record, open_flag)

    logger = logging.getLogger(LOGGER)
    ShapeEnv.__init__ = init
    logger.addFilter(_not_propagation)
    try:
        yield record
    finally:
        ShapeEnv.__init__ = original
        logger.removeFilter(_not_propagation)
        open_flag.clear()


def _asking_stack() -> traceback.StackSummary:
    """The stack down to the guard: the frames of sympy's substitution (and this table) are cut off."""
    frames = traceback.extract_stack()
    cut = next((i for i, fr in enumerate(frames) if f"{os.sep}sympy{os.sep}" in fr.filename), len(frames))
    return traceback.StackSummary.from_list(frames[:cut])


def _not_propagation(record: logging.LogRecord) -> bool:
    """The report names each assumed size; torch's own warning about it would only reach the user's console."""
    return not str(record.msg).startswith("propagate_real_tensors")


def self_check() -> Check:
    def probe() -> None:
        import torch
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.fx.experimental.symbolic_shapes import ShapeEnv

        with assumed_sizes() as record:
            mode = FakeTensorMode(shape_env=ShapeEnv(), allow_non_fake_inputs=True)
            with mode:
                kept = torch.nonzero(mode.from_tensor(torch.ones(4)))
                if kept.shape[0] == 0:  # the guard the table decides
                    raise MissingInternal(INTERNAL, DEGRADES, "the assumed size was not used")
        if not record:
            raise MissingInternal(INTERNAL, DEGRADES, "no guard consulted the table")

    return run_check(INTERNAL, DEGRADES, probe)
