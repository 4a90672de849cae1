"""FAKE torch_neuronx.trace / dynamic_batch / move_trace_to_device.

``trace`` writes what the real one writes to the compiler workdir
(model/graph.hlo, model/metadata.json, command.txt), runs the (fake)
``neuronx-cc compile`` as a subprocess whose output goes to this process's
stdout/stderr, and raises ``RuntimeError(f"neuronx-cc failed with {status}")``
on a non-zero exit. The traced module runs the original model on the CPU but,
like a NEFF, only accepts its example input shapes, unless ``dynamic_batch``
was applied (then dim 0 may differ; another dim gives ValueError).
"""

from __future__ import annotations

import json
import shlex
import tempfile
import warnings
from pathlib import Path
from typing import Any

import torch

from torch_neuronx.xla_impl.compiler import as_tuple, aten_nodes, logger, require_compiler, run_compiler

MAX_EXTRA_POSITIONAL = 5
_KILLED_HINTS = {
    -9: "neuronx-cc was forcefully killed, likely because the host ran out of memory",
    -6: "neuronx-cc was aborted (SIGABRT): an internal compiler error",
    -11: "neuronx-cc crashed (SIGSEGV)",
}


class _ModelBinding:
    """Stands for the stateful ``neuron::Model`` TorchScript class a real trace holds."""

    def __init__(self, shapes: list[list[int]]) -> None:
        self.shapes = shapes
        self.dynamic_batching = False
        self.devices: list[int] = []

    def set_neuron_devices(self, devices: list[int]) -> None:
        self.devices = list(devices)

    def set_dynamic_batching(self, flag: bool) -> None:
        self.dynamic_batching = bool(flag)


class TracedNeuronModule(torch.nn.Module):
    """What ``trace`` returns: runs on the CPU, checks shapes like the NEFF's metaneff does."""

    def __init__(self, func: Any, example_inputs: tuple[Any, ...], neff: bytes) -> None:
        super().__init__()
        self.func = func
        self.neff = neff
        self.model = _ModelBinding([list(t.shape) for t in example_inputs if isinstance(t, torch.Tensor)])

    def _check(self, inputs: tuple[Any, ...]) -> None:
        shapes = [list(t.shape) for t in inputs if isinstance(t, torch.Tensor)]
        if len(shapes) != len(self.model.shapes):
            raise RuntimeError(f"forward() expected {len(self.model.shapes)} tensor argument(s), got {len(shapes)} [fake torch_neuronx]")
        if self.model.dynamic_batching:
            batches = {s[0] for s in shapes if s}
            if len(batches) > 1:
                raise ValueError(f"dynamic batching needs one batch size across inputs, got {sorted(batches)} [fake torch_neuronx]")
            for i, (got, want) in enumerate(zip(shapes, self.model.shapes, strict=False)):
                if got[1:] != want[1:]:
                    raise ValueError(f"input {i} has shape {got}; dynamic batching only varies dim 0 of the traced shape {want} [fake torch_neuronx]")
            return
        for i, (got, want) in enumerate(zip(shapes, self.model.shapes, strict=False)):
            if got != want:
                raise RuntimeError(
                    "The following operation failed in the TorchScript interpreter.\n"
                    f"RuntimeError: [fake torch_neuronx] input {i} has shape {got} but the model was traced with "
                    f"{want}: a traced Neuron model runs only its example input shapes "
                    "(use torch_neuronx.dynamic_batch to vary the batch dimension)"
                )

    def forward(self, *inputs: Any) -> Any:
        self._check(inputs)
        return self.func(*inputs)


def _compiler_args(compiler_args: Any) -> list[str]:
    if compiler_args is None:
        return []
    if isinstance(compiler_args, str):
        return shlex.split(compiler_args)
    return [str(a) for a in compiler_args]


def _target(args: list[str]) -> str:
    for i, a in enumerate(args):
        if a == "--target" and i + 1 < len(args):
            return args[i + 1]
        if a.startswith("--target="):
            return a.split("=", 1)[1]
    return "trn1"


def trace(
    func: Any,
    example_inputs: Any,
    *_: Any,
    input_output_aliases: dict = {},  # noqa: B006 - the documented default
    compiler_workdir: Any = None,
    compiler_args: Any = None,
    partitioner_config: Any = None,
    inline_weights_to_neff: bool = True,
    cpu_backend: bool = False,
    **kwargs: Any,
) -> TracedNeuronModule:
    if _:
        if len(_) > MAX_EXTRA_POSITIONAL:
            raise RuntimeError(f"Received {len(_) + 2} positional arguments but expected 2")
        warnings.warn(
            f"Received {len(_) + 2} positional arguments but expected 2. Use of positional arguments after `func` "
            "and `example_inputs` is deprecated. Please specify keyword arguments instead.",
            DeprecationWarning,
            stacklevel=2,
        )
    if kwargs:
        warnings.warn(f"Unexpected keyword arguments: {list(kwargs)}", UserWarning, stacklevel=2)
    if partitioner_config is not None:
        from torch_neuronx.xla_impl.partitioner import partition

        options = dict(partitioner_config.__dict__)
        if options.get("trace_kwargs") is None and (compiler_args is not None or compiler_workdir is not None):
            options["trace_kwargs"] = {"compiler_args": compiler_args, "compiler_workdir": compiler_workdir}
        return partition(func, example_inputs, **options)
    require_compiler()
    inputs = as_tuple(example_inputs)
    args = _compiler_args(compiler_args)
    workdir = Path(compiler_workdir) if compiler_workdir else Path(tempfile.mkdtemp(prefix="neuronx-trace-"))
    model_dir = workdir / "model"
    model_dir.mkdir(parents=True, exist_ok=True)
    nodes = aten_nodes(func, inputs)
    (model_dir / "graph.hlo").write_text(json.dumps({"ops": [n.kind for n in nodes]}), encoding="utf-8")
    (model_dir / "metadata.json").write_text(json.dumps({"model_files": "graph.hlo", "version": "1.0", "weights": {}}), encoding="utf-8")
    neff = workdir / "graph.neff"
    command = ["compile", str(model_dir), "--framework", "XLA", "--target", _target(args), "--output", str(neff), *args]
    (workdir / "command.txt").write_text("neuronx-cc " + " ".join(command) + "\n", encoding="utf-8")
    status = run_compiler(command).returncode
    if status != 0:
        if status in _KILLED_HINTS:
            logger.warning(_KILLED_HINTS[status])
        raise RuntimeError(f"neuronx-cc failed with {status}")
    return TracedNeuronModule(func, inputs, neff.read_bytes())


def dynamic_batch(neuron_script: Any, enable_dynamic_batch: bool = True) -> Any:
    """Let the traced module take any batch size (dim 0); modifies it in place and returns it."""
    for module in neuron_script.modules():
        for value in vars(module).values():
            if hasattr(value, "set_neuron_devices"):
                value.set_dynamic_batching(enable_dynamic_batch)
    return neuron_script


def move_trace_to_device(trace: Any, device_id: int) -> None:
    for module in trace.modules():
        for value in vars(module).values():
            if hasattr(value, "set_neuron_devices"):
                value.set_neuron_devices([device_id])
