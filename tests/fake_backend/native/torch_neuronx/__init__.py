"""FAKE TorchNeuron (the native torch-neuronx of trn2/trn3) for neuronprobe's tests: NOT the Neuron SDK.

It exports what the native package exports and neuronprobe reads:
``get_fallback_ops()``, ``get_executed_ops()``, ``clear_op_tracking()``,
``get_dynamo_metrics()`` / ``reset_dynamo_metrics()`` (one
``NeuronCompilationMetrics`` per graph compiled by ``torch.compile(backend="neuron")``),
``device_count()``, ``synchronize()``. A real "neuron" device cannot exist in a
CPU-only torch, so models run on the CPU (``__neuronprobe_fake_device__``): from
``clear_op_tracking()`` on, every aten op the process runs counts as executed on
Neuron, and those in the fixture's ``fallback_ops`` as CPU fallbacks.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

__neuronprobe_fake__ = True
__neuronprobe_fake_device__ = "cpu"
__version__ = "2.14.3.0+fake"

try:
    import fake_neuron_common as _common
except ImportError:  # the native layout alone on the path: the helper lives two folders up
    sys.path.append(str(Path(__file__).resolve().parents[2]))
    import fake_neuron_common as _common


class NeuronCompilationMetrics(NamedTuple):
    graph_id: int
    graph_name: str
    model_name: str
    has_collectives: bool
    graph_node_count: int
    timestamp: float
    torch_neuronx_fx_passes_us: int
    torch_neuronx_lower_us: int
    torch_neuronx_compile_us: int


_METRICS: list[NeuronCompilationMetrics] = []


def clear_op_tracking() -> None:
    _common.recorder().take()


def _tracked() -> list[str]:
    return [op for op, _ in _common.recorder().ops]


def get_fallback_ops() -> set[str]:
    fallback = _common.fixture().get("fallback_ops", [])
    return {op for op in _tracked() if _common.lookup(op, fallback)}


def get_executed_ops() -> set[str]:
    return set(_tracked())


def device_count() -> int:
    return 1


def is_available() -> bool:
    return True


def synchronize(device: Any = None) -> None:
    if _common.hangs("run"):
        _common.hang_forever()


def get_dynamo_metrics() -> list[NeuronCompilationMetrics]:
    return list(_METRICS)


def reset_dynamo_metrics() -> None:
    _METRICS.clear()


def _neuron_backend(gm: Any, example_inputs: Any) -> Any:
    """torch.compile(backend="neuron"): one compile per Dynamo graph (a new static shape is a new graph)."""
    started = time.perf_counter()
    nodes = sum(1 for n in gm.graph.nodes if n.op == "call_function")
    _METRICS.append(
        NeuronCompilationMetrics(
            graph_id=len(_METRICS),
            graph_name=f"graph_{len(_METRICS)}",
            model_name=type(gm).__name__,
            has_collectives=False,
            graph_node_count=nodes,
            timestamp=time.time(),
            torch_neuronx_fx_passes_us=0,
            torch_neuronx_lower_us=0,
            torch_neuronx_compile_us=int((time.perf_counter() - started) * 1e6),
        )
    )
    return gm.forward


def _register() -> None:
    import torch._dynamo

    if "neuron" not in torch._dynamo.list_backends(exclude_tags=()):
        torch._dynamo.register_backend(_neuron_backend, name="neuron")


_register()


# The aten overloads the fake registers for the PrivateUse1 key, as the real package registers its Neuron kernels
# at import: `neuronprobe setup native-table` reads them back from the dispatcher. A fixture's "native_kernels"
# replaces the list. The kernels are never called (no tensor lives on a PrivateUse1 device here).
_KERNELS: list[Any] = []


def _fake_kernel(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("FAKE TorchNeuron: no neuron device exists in this process")


def _register_kernels() -> None:
    import torch

    lib = torch.library.Library("aten", "IMPL")
    for name in _common.fixture().get("native_kernels", ["mm", "addmm", "relu", "add.Tensor"]):
        lib.impl(name, _fake_kernel, "PrivateUse1")
    _KERNELS.append(lib)  # kept alive: a dropped Library unregisters its kernels


_register_kernels()
