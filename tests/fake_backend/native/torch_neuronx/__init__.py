"""FAKE TorchNeuron (the native torch-neuronx of trn2/trn3) for neuronprobe's tests: NOT the Neuron SDK.

It exports what the native package exports and neuronprobe reads:
``get_fallback_ops()``, ``get_executed_ops()``, ``clear_op_tracking()``,
``get_dynamo_metrics()`` / ``reset_dynamo_metrics()`` (one
``NeuronCompilationMetrics`` per graph compiled by ``torch.compile(backend="neuron")``, in the source's
shape; the fixture's ``dynamo_compile_us`` is the recorded NEFF compile time),
``device_count()``, ``synchronize()``. A real "neuron" device cannot exist in a
CPU-only torch, so models run on the CPU (``__neuronprobe_fake_device__``): from
``clear_op_tracking()`` on, every aten op the process runs counts as executed on
Neuron, and those in the fixture's ``fallback_ops`` as CPU fallbacks.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__neuronprobe_fake__ = True
__neuronprobe_fake_device__ = "cpu"
__version__ = "2.14.3.0+fake"

try:
    import fake_neuron_common as _common
except ImportError:  # the native layout alone on the path: the helper lives two folders up
    sys.path.append(str(Path(__file__).resolve().parents[2]))
    import fake_neuron_common as _common


@dataclass
class NeuronCompilationMetrics:
    """As the TorchNeuron source defines it (``torch_neuronx/neuron_dynamo_backend/metrics.py``,
    parmoham-aws/test-repo-parmoham@5577a2d8): a dataclass, ``graph_id`` the graph's cache key, times in microseconds,
    ``torch_neuronx_compile_us`` filled lazily by ``get_dynamo_metrics()`` once the compile finished."""

    graph_id: str
    graph_name: str = ""
    model_name: str = ""
    has_collectives: bool = False
    graph_node_count: int = 0
    timestamp: str = ""
    torch_neuronx_fx_passes_us: int = 0
    torch_neuronx_lower_us: int = 0
    torch_neuronx_compile_us: int = 0


_METRICS: list[NeuronCompilationMetrics] = []


def clear_op_tracking() -> None:
    _common.recorder().take()


def _tracked() -> list[str]:
    return [op for op, _ in _common.recorder().ops]


def get_fallback_ops() -> list[str]:
    """A list of op names, as the source's ``_C._get_fallback_ops()`` returns (``torch_neuronx/__init__.py``)."""
    fallback = _common.fixture().get("fallback_ops", [])
    return sorted({op for op in _tracked() if _common.lookup(op, fallback)})


def get_executed_ops() -> list[str]:
    return sorted(set(_tracked()))


def device_count() -> int:
    return 1


def is_available() -> bool:
    return True


def synchronize(device: Any = None) -> None:
    if _common.hangs("run"):
        _common.hang_forever()


def get_dynamo_metrics() -> list[NeuronCompilationMetrics]:
    """The metrics so far; a graph's NEFF compile time is filled here, as the source fills it after a synchronize
    (the fixture's ``dynamo_compile_us``: one number for every graph, or a list by graph order)."""
    recorded = _common.fixture().get("dynamo_compile_us", 0)
    for i, m in enumerate(_METRICS):
        if m.torch_neuronx_compile_us == 0:
            m.torch_neuronx_compile_us = int(recorded[i] if isinstance(recorded, list) and i < len(recorded) else recorded if isinstance(recorded, int) else 0)
    return list(_METRICS)


def reset_dynamo_metrics() -> None:
    _METRICS.clear()


def _neuron_backend(gm: Any, example_inputs: Any) -> Any:
    """torch.compile(backend="neuron"): one compile per Dynamo graph (a new static shape is a new graph)."""
    started = time.perf_counter()
    nodes = sum(1 for n in gm.graph.nodes if n.op == "call_function")
    nth = len(_METRICS)
    _METRICS.append(
        NeuronCompilationMetrics(
            graph_id=f"fake-cache-key-{nth}",
            graph_name=f"{type(gm).__name__}_0_inference_{nth}",  # {model_name}_{aot_id}_{graph_type}_{nth}
            model_name=type(gm).__name__,
            has_collectives=False,
            graph_node_count=nodes,
            timestamp=str(nth),
            torch_neuronx_fx_passes_us=int((time.perf_counter() - started) * 1e6),
            torch_neuronx_lower_us=0,
            torch_neuronx_compile_us=0,  # filled by get_dynamo_metrics(), as the source does
        )
    )
    return gm.forward


def _register() -> None:
    import torch._dynamo
    from torch._dynamo.backends import registry

    if "neuron" not in torch._dynamo.list_backends(exclude_tags=()):
        torch._dynamo.register_backend(_neuron_backend, name="neuron")
    else:
        # neuronprobe's pass-through for analyses without TorchNeuron, or an earlier import of this fake, took the name
        # in this test process first; the package imported now owns it (on a real host its entry point does)
        _neuron_backend._tags = ()  # type: ignore[attr-defined]  # what register_backend sets
        registry._COMPILER_FNS["neuron"] = _neuron_backend


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
