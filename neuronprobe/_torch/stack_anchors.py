"""``torch.fx.proxy._STACK_TRACE_ANCHORS``: keep the frames of a method that is not ``forward`` in export's stack traces.

Checked on torch 2.13.0 (not used by the xla-cpu worker, which runs torch 2.9).

Non-strict ``torch.export`` records each node's stack trace with only the frames
named ``forward`` (``_ModuleStackTracer`` sets ``_record_forward_stack_traces_only``;
``TracerBase._filter_traceback_frames`` in ``torch/fx/proxy.py`` at v2.13.0), plus
the (file, function) pairs registered in ``_STACK_TRACE_ANCHORS``. An entry point
such as ``generate()`` is no ``forward``: without an anchor its own lines (the
sampling, the ``torch.cat`` that grows the ids) are dropped and its ops have no
line. The anchors are added for the capture and removed after it, so the user's
own exports are traced as before.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from neuronprobe._torch.check import Check, MissingInternal, run_check

INTERNAL = "torch.fx.proxy._STACK_TRACE_ANCHORS"
DEGRADES = "the lines of an entry point other than forward (--entry, ENTRY) in torch.export's capture"


def _anchors() -> set[tuple[str, str]]:
    import torch.fx.proxy

    anchors = getattr(torch.fx.proxy, "_STACK_TRACE_ANCHORS", None)
    if not isinstance(anchors, set):
        raise MissingInternal(INTERNAL, DEGRADES, "torch.fx.proxy has no _STACK_TRACE_ANCHORS set")
    return anchors


def anchored(functions: list[Callable[..., object]]) -> contextlib.AbstractContextManager[None]:
    """Inside the block, export keeps the frames of ``functions`` in its stack traces.

    Raises :class:`MissingInternal` here (not on entering the block) when torch has no anchors."""
    anchors = _anchors()
    keys = {(f.__code__.co_filename, f.__code__.co_name) for f in functions if hasattr(f, "__code__")}
    return _kept(anchors, keys - anchors)


@contextlib.contextmanager
def _kept(anchors: set[tuple[str, str]], added: set[tuple[str, str]]) -> Iterator[None]:
    anchors |= added
    try:
        yield
    finally:
        anchors -= added


def self_check() -> Check:
    def probe() -> None:
        import torch

        class Entry(torch.nn.Module):
            def run(self, x: torch.Tensor) -> torch.Tensor:
                return x.sin()

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return self.run(x)

        with anchored([Entry.run]):
            ep = torch.export.export(Entry(), (torch.ones(2),), strict=False)
        traces = [n.meta.get("stack_trace") or "" for n in ep.graph.nodes if n.op == "call_function"]
        if not any("in run" in t for t in traces):
            raise MissingInternal(INTERNAL, DEGRADES, "an anchored method's frame is not in export's stack traces")

    return run_check(INTERNAL, DEGRADES, probe)
