"""``torch.fx.experimental.symbolic_shapes.GuardOnDataDependentSymNode``: export stopped at a branch on data.

Checked on torch 2.13.0 (not used by the xla-cpu worker). Without the type, a
failed export is still classed by its message text.
"""

from __future__ import annotations

from neuronprobe._torch.check import Check, MissingInternal, run_check

INTERNAL = "torch.fx.experimental.symbolic_shapes.GuardOnDataDependentSymNode"
DEGRADES = "classing a failed export as control flow on tensor data by its exception type"


def data_dependent_error() -> type[BaseException]:
    try:
        from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode
    except ImportError as exc:
        raise MissingInternal(INTERNAL, DEGRADES, str(exc)) from exc
    return GuardOnDataDependentSymNode


def self_check() -> Check:
    def probe() -> None:
        if not issubclass(data_dependent_error(), Exception):
            raise MissingInternal(INTERNAL, DEGRADES, "is not an exception type")

    return run_check(INTERNAL, DEGRADES, probe)
