"""``torch.fx.proxy.TracerBase._filter_traceback_frames``: which frames a traced node's ``stack_trace`` keeps.

Checked on torch 2.13.0 (not used by the xla-cpu worker).

Non-strict ``torch.export`` records, for every node, only the frames of functions
named ``forward`` (``_ModuleStackTracer`` and ``PythonKeyTracer`` set
``_record_forward_stack_traces_only``). An op four calls deep in a helper function
of an imported model package (``_mask_points()`` called by ``PromptEncoder.forward``)
is then recorded at the line of the last ``forward`` that led to it: the caller's
line, not the line that runs the op. For the duration of :func:`keep_frames`, the
method is replaced by one that keeps the frames a caller chooses (the model's own
frames, decided by :mod:`neuronprobe.usercode`), and put back afterwards.
"""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Callable, Iterator

from neuronprobe._torch.check import Check, MissingInternal, run_check

INTERNAL = "torch.fx.proxy.TracerBase._filter_traceback_frames"
DEGRADES = "findings at the line that runs the op (ops in helper functions are placed at the last forward() that called them)"

FrameFilter = Callable[[list[traceback.FrameSummary]], list[traceback.FrameSummary]]


def _tracer_base() -> type:
    try:
        from torch.fx.proxy import TracerBase
    except ImportError as exc:
        raise MissingInternal(INTERNAL, DEGRADES, str(exc)) from exc
    if not callable(getattr(TracerBase, "_filter_traceback_frames", None)):
        raise MissingInternal(INTERNAL, DEGRADES, "TracerBase has no _filter_traceback_frames")
    return TracerBase


def keep_frames(choose: FrameFilter) -> contextlib.AbstractContextManager[None]:
    """Within the block, a traced node's ``stack_trace`` holds the frames ``choose`` keeps (outermost first).

    Raises :class:`MissingInternal` here, before the block, when this torch has no such method."""
    return _swapped(_tracer_base(), choose)


@contextlib.contextmanager
def _swapped(base: type, choose: FrameFilter) -> Iterator[None]:
    original = base.__dict__["_filter_traceback_frames"]

    def _filter(self: object, summary: traceback.StackSummary) -> traceback.StackSummary:
        return traceback.StackSummary.from_list(choose(list(summary)))

    base._filter_traceback_frames = _filter  # type: ignore[attr-defined]
    try:
        yield
    finally:
        base._filter_traceback_frames = original  # type: ignore[attr-defined]


def self_check() -> Check:
    def probe() -> None:
        import torch

        def helper(x: torch.Tensor) -> torch.Tensor:
            return x.sin()

        class M(torch.nn.Module):
            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return helper(x)

        def only_helper(frames: list[traceback.FrameSummary]) -> list[traceback.FrameSummary]:
            return [f for f in frames if f.name == "helper"]

        with keep_frames(only_helper):
            ep = torch.export.export(M(), (torch.ones(2),), strict=False)
        traces = [n.meta.get("stack_trace") or "" for n in ep.graph.nodes if n.op == "call_function"]
        if not traces or "in helper" not in traces[0]:
            raise MissingInternal(INTERNAL, DEGRADES, f"the recorded stack trace does not keep the chosen frame: {traces[:1]!r}")

    return run_check(INTERNAL, DEGRADES, probe)
