"""The op budget of a capture: a graph of millions of ops is a runaway loop, stopped where it runs.

A forward that loops for ever on fake or meta tensors allocates nothing real, so the
memory bound never fires; it ran to the 30-minute ``--timeout``. Every capture path
(``torch.export`` non-strict, dynamo, ``make_fx``) records each op as a node of a
``torch.fx.Graph`` through :meth:`torch.fx.Graph.create_node`; counting there bounds
them all with one hook. Past the budget the hook raises :class:`Runaway`, a
``BaseException`` so that no tracer's ``except Exception`` turns it into a fallback
(dynamo would otherwise run the same loop eagerly), carrying the stack at that op:
in a non-strict export the model's own frames are on it, so the stop names the line.

``torch.fx.Graph.create_node`` is public API; replacing it for the length of a capture
is the private part, which is why it lives here.
"""

from __future__ import annotations

import contextlib
import sys
import traceback
from collections.abc import Iterator
from typing import Any


class Runaway(BaseException):
    """More nodes than the budget were created: the stack where the last one was asked for."""

    def __init__(self, budget: int, stack: traceback.StackSummary) -> None:
        super().__init__(f"more than {budget:,} ops")
        self.budget = budget
        self.stack = stack


@contextlib.contextmanager
def op_budget(budget: int) -> Iterator[None]:
    """Raise :class:`Runaway` from the node past ``budget`` created in any FX graph while inside."""
    import torch.fx

    original = torch.fx.Graph.create_node
    count = 0

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal count
        count += 1
        if count > budget:
            raise Runaway(budget, traceback.extract_stack(sys._getframe(1)))  # from the caller: the model's line is innermost
        return original(self, *args, **kwargs)

    torch.fx.Graph.create_node = counted
    try:
        yield
    finally:
        torch.fx.Graph.create_node = original


__all__ = ["Runaway", "op_budget"]
