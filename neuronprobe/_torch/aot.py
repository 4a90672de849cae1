"""``torch._dynamo.backends.common.aot_autograd``: a dynamo backend that hands over aten-level graphs.

Checked on torch 2.13.0 (not used by the xla-cpu worker). The dynamo fallback
capture records the forward graphs it receives; without it a model whose export
fails has no op list.
"""

from __future__ import annotations

from collections.abc import Callable

from neuronprobe._torch.check import Check, MissingInternal, run_check

INTERNAL = "torch._dynamo.backends.common.aot_autograd"
DEGRADES = "the dynamo fallback capture (models torch.export cannot capture)"


def aot_backend(fw_compiler: Callable[..., object]) -> Callable[..., object]:
    """A dynamo backend that lowers to aten and calls ``fw_compiler(graph_module, example_inputs)``."""
    try:
        from torch._dynamo.backends.common import aot_autograd
    except ImportError as exc:
        raise MissingInternal(INTERNAL, DEGRADES, str(exc)) from exc
    backend: Callable[..., object] = aot_autograd(fw_compiler=fw_compiler)
    return backend


def self_check() -> Check:
    def probe() -> None:
        import torch

        from neuronprobe._torch.dynamo_isolation import compile_isolated, isolated_compiles

        graphs: list[object] = []

        def record(gm: torch.fx.GraphModule, example_inputs: object) -> Callable[..., object]:
            graphs.append(gm)
            return gm.forward

        def double(x: torch.Tensor) -> torch.Tensor:
            return x * 2

        with isolated_compiles(), torch.no_grad():
            compile_isolated(double, aot_backend(record), dynamic=False)(torch.ones(2))
        if not graphs:
            raise MissingInternal(INTERNAL, DEGRADES, "the backend received no graph")

    return run_check(INTERNAL, DEGRADES, probe)
