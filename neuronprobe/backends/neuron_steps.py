"""The SDK work itself: the functions neuronprobe's live backend runs in a forked child.

Each step gets the user's module and example inputs (inherited through the
fork, never pickled), the step's working folder and the Neuron target, plus a
``progress`` callback; it returns plain data (dicts of str/int/list) for the
parent. Only these functions import torch_neuronx / torch_xla, and only in the
child, so neither the SDK's import time nor its crashes reach neuronprobe.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

FAKE_DEVICE_ATTR = "__neuronprobe_fake_device__"  # the fake TorchNeuron runs on this device (the CPU)


def _log_sdk() -> None:
    """Send the SDK's "Neuron" logger (analyze's summary, the trace warnings) to the captured output."""
    import logging

    logger = logging.getLogger("Neuron")
    logger.setLevel(logging.INFO)
    if not logger.handlers:
        logger.addHandler(logging.StreamHandler())


def _materialise(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    """A model built on the meta device (hf: specs) gets real, uninitialised CPU storage: the SDK needs values."""
    import torch

    def real(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.device.type == "meta":
            return torch.zeros(value.shape, dtype=value.dtype)
        return value

    if any(p.device.type == "meta" for p in module.parameters()) or any(b.device.type == "meta" for b in module.buffers()):
        module = module.to_empty(device="cpu")
    return module, tuple(real(a) for a in args), {k: real(v) for k, v in kwargs.items()}


def positional_model(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, tuple[Any, ...]]:
    """analyze and trace take positional tensors only: wrap keyword and non-tensor inputs as constants."""
    import torch

    if not kwargs and all(isinstance(a, torch.Tensor) for a in args):
        return module, tuple(args)
    slots: list[tuple[str, Any]] = [("arg", a) for a in args] + [(k, v) for k, v in kwargs.items()]
    tensor_positions = [i for i, (_, v) in enumerate(slots) if isinstance(v, torch.Tensor)]

    class KeywordForward(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = module

        def forward(self, *tensors: Any) -> Any:
            values = [v for _, v in slots]
            for position, tensor in zip(tensor_positions, tensors, strict=False):
                values[position] = tensor
            positional = values[: len(args)]
            keywords = {k: values[len(args) + i] for i, (k, _) in enumerate(slots[len(args) :])}
            return self.inner(*positional, **keywords)

    return KeywordForward(), tuple(slots[i][1] for i in tensor_positions)


def _to_device(value: Any, device: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(_to_device(v, device) for v in value)
    if isinstance(value, dict):
        return {k: _to_device(v, device) for k, v in value.items()}
    return value


def _to_cpu(value: Any) -> Any:
    return _to_device(value, "cpu")


def step_analyze(module: Any, args: tuple, kwargs: dict, workdir: str, target: str, progress: Callable) -> Any:
    import torch_neuronx

    _log_sdk()
    module, args, kwargs = _materialise(module, args, kwargs)
    model, inputs = positional_model(module, args, kwargs)
    is_hf = type(module).__module__.startswith("transformers")
    return torch_neuronx.analyze(model, inputs, compiler_workdir=os.path.join(workdir, "analyze"), is_hf_transformers=is_hf)


def step_trace(module: Any, args: tuple, kwargs: dict, workdir: str, target: str, progress: Callable) -> Any:
    import torch_neuronx

    _log_sdk()
    module, args, kwargs = _materialise(module, args, kwargs)
    model, inputs = positional_model(module, args, kwargs)
    torch_neuronx.trace(model, inputs, compiler_workdir=os.path.join(workdir, "trace"), compiler_args=["--target", target])
    return {"traced": True}


def step_xla_run(module: Any, args: tuple, kwargs: dict, workdir: str, target: str, progress: Callable) -> Any:
    """One forward on the XLA device, observed by the code the xla-cpu backend uses (xla_observe)."""
    import torch
    import torch_xla.core.xla_model as xm

    from neuronprobe.backends import xla_observe

    module, args, kwargs = _materialise(module, args, kwargs)
    device = xm.xla_device()
    module = module.to(device)
    args, kwargs = _to_device(args, device), _to_device(kwargs, device)

    def forward() -> Any:
        with torch.no_grad():
            return module(*args, **kwargs)

    value = xla_observe.observe(forward, save_file="")
    value["source"] = "torch-xla fallback counters"
    return value


_US = 1e-6


def dynamo_metrics_rows(metrics: Any) -> list[dict[str, Any]]:
    """``torch_neuronx.get_dynamo_metrics()`` as plain rows (the fields of :class:`~neuronprobe.report.model.CompiledGraph`).

    Each item is a ``NeuronCompilationMetrics`` (a dataclass in ``torch_neuronx/neuron_dynamo_backend/metrics.py``,
    TorchNeuron source at parmoham-aws/test-repo-parmoham@5577a2d8): ``graph_id`` (the cache key), ``graph_name``,
    ``model_name``, ``has_collectives``, ``graph_node_count``, ``timestamp`` and three times in microseconds,
    ``torch_neuronx_fx_passes_us``, ``torch_neuronx_lower_us`` and ``torch_neuronx_compile_us`` (the NEFF compile,
    filled after a synchronize). Fields are read by name, so a release that adds fields still reads.
    """
    rows = []
    for m in metrics or []:
        rows.append(
            {
                "name": str(getattr(m, "graph_name", "") or getattr(m, "graph_id", "")),
                "nodes": int(getattr(m, "graph_node_count", 0) or 0),
                "has_collectives": bool(getattr(m, "has_collectives", False)),
                "fx_passes_seconds": round(int(getattr(m, "torch_neuronx_fx_passes_us", 0) or 0) * _US, 6),
                "lower_seconds": round(int(getattr(m, "torch_neuronx_lower_us", 0) or 0) * _US, 6),
                "compile_seconds": round(int(getattr(m, "torch_neuronx_compile_us", 0) or 0) * _US, 6),
            }
        )
    return rows


def _dynamo_metrics(torch_neuronx: Any) -> list[dict[str, Any]]:
    return dynamo_metrics_rows(torch_neuronx.get_dynamo_metrics()) if hasattr(torch_neuronx, "get_dynamo_metrics") else []


def step_native_run(module: Any, args: tuple, kwargs: dict, workdir: str, target: str, progress: Callable) -> Any:
    """One eager forward on the neuron device: the ops it executed there and on the CPU, and the graphs the
    model's own ``torch.compile(backend="neuron")`` calls compiled on the way (``get_dynamo_metrics()``)."""
    import torch
    import torch_neuronx

    module, args, kwargs = _materialise(module, args, kwargs)
    device = torch.device(getattr(torch_neuronx, FAKE_DEVICE_ATTR, "neuron"))
    module = module.to(device)
    args, kwargs = _to_device(args, device), _to_device(kwargs, device)
    torch_neuronx.clear_op_tracking()
    if hasattr(torch_neuronx, "reset_dynamo_metrics"):
        from neuronprobe._torch.dynamo_isolation import forget_all_compiles

        forget_all_compiles()  # this forked worker compiles as the user's process would, not from the capture's caches
        torch_neuronx.reset_dynamo_metrics()
    with torch.no_grad():
        out = module(*args, **kwargs)
    if hasattr(torch_neuronx, "synchronize"):
        torch_neuronx.synchronize()
    _to_cpu(out)
    return {
        "fallback": sorted(torch_neuronx.get_fallback_ops()),
        "executed": sorted(torch_neuronx.get_executed_ops()),
        "graphs": _dynamo_metrics(torch_neuronx),
    }


def _outputs_bytes(out: Any) -> bytes:
    """The named output tensors as safetensors bytes: a tensor sent through the pipe as itself would travel
    as a handle to the child's shared memory, which is gone once the child exits."""
    from safetensors.torch import save

    from neuronprobe.backends.outputs import named_outputs

    return save({name: t.contiguous().clone() for name, t in named_outputs(out).items()})


def step_xla_outputs(module: Any, args: tuple, kwargs: dict, workdir: str, target: str, progress: Callable) -> Any:
    """One forward on the XLA device, its outputs brought back to the CPU (``parity --reference`` on a Neuron host)."""
    import torch
    import torch_xla.core.xla_model as xm

    module, args, kwargs = _materialise(module, args, kwargs)
    device = xm.xla_device()
    module = module.to(device)
    with torch.no_grad():
        out = module(*_to_device(args, device), **_to_device(kwargs, device))
    xm.mark_step()  # execute the pending graph: the values come from the device, not from the trace
    return _outputs_bytes(_to_cpu(out))


def step_native_outputs(module: Any, args: tuple, kwargs: dict, workdir: str, target: str, progress: Callable) -> Any:
    """One forward on the native TorchNeuron device, its outputs brought back to the CPU."""
    import torch
    import torch_neuronx

    module, args, kwargs = _materialise(module, args, kwargs)
    device = torch.device(getattr(torch_neuronx, FAKE_DEVICE_ATTR, "neuron"))
    module = module.to(device)
    with torch.no_grad():
        out = module(*_to_device(args, device), **_to_device(kwargs, device))
    if hasattr(torch_neuronx, "synchronize"):
        torch_neuronx.synchronize()
    return _outputs_bytes(_to_cpu(out))


def _split(inputs: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    from neuronprobe.loaders.resolve import split_inputs

    return split_inputs(inputs, "inputs")


def step_xla_compiles(module: Any, calls: list, workdir: str, progress: Callable) -> Any:
    import torch
    import torch_xla.core.xla_model as xm

    from neuronprobe.backends import xla_observe

    module, _, _ = _materialise(module, (), {})
    device = xm.xla_device()
    module = module.to(device)

    def run_call(inputs: Any) -> Any:
        _, args, kwargs = _materialise(module, *_split(inputs))
        with torch.no_grad():
            return module(*_to_device(args, device), **_to_device(kwargs, device))

    value = xla_observe.count_compiles(run_call, calls, progress)
    return {**value, "compiles": value["uncached"]}


def step_native_compiles(module: Any, calls: list, workdir: str, progress: Callable) -> Any:
    import torch
    import torch_neuronx

    module, _, _ = _materialise(module, (), {})
    device = torch.device(getattr(torch_neuronx, FAKE_DEVICE_ATTR, "neuron"))
    module = module.to(device)
    torch_neuronx.reset_dynamo_metrics()
    compiled = torch.compile(module, backend="neuron", dynamic=False)
    for i, inputs in enumerate(calls):
        _, args, kwargs = _materialise(module, *_split(inputs))
        with torch.no_grad():
            _to_cpu(compiled(*_to_device(args, device), **_to_device(kwargs, device)))
        progress({"calls": i + 1, "compiles": len(torch_neuronx.get_dynamo_metrics())})
    graphs = _dynamo_metrics(torch_neuronx)
    return {"calls": len(calls), "compiles": len(graphs), "graphs": graphs}
