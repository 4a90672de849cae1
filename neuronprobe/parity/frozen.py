"""The parity run's side of frozen references: which tensors a run freezes or compares, and on which backend.

:mod:`neuronprobe.parity.reference` knows the folder format and the comparison; this
module takes a parity run (:class:`~neuronprobe.parity.run.ParityResult`: the model as it
ran with real weights, its inputs, the fp32 outputs and, with ``keep_outputs``, every
module call's fp32 output) and turns it into the named tensors and the identity of the
run. On the CPU the tensors are the fp32 reference run's (backend ``cpu-fp32``); with a
live Neuron backend (``--backend neuron`` on a Neuron host, or the test fake in CI) the
final outputs come from one forward on the device per input (backend ``neuron``), so the
same command freezes or checks the device's numbers.

Several inputs (``sample_inputs()``) name their tensors ``output (sample 2)``; one input
keeps the plain names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from neuronprobe.errors import InputError
from neuronprobe.parity.reference import (
    FrozenReference,
    RunIdentity,
    check_identity,
    compare_reference,
    current_versions,
    inputs_hash,
    model_hash,
    model_library_versions,
    named_outputs,
    reference_files,
)
from neuronprobe.report.reference_model import ReferenceComparison
from neuronprobe.vocabulary import ReferenceBackend

# Versions a live backend's detection knows, recorded in a reference produced on it.
_SDK_VERSIONS = ("torch-neuronx", "neuronx-cc", "torch-xla", "libneuronxla")


@dataclass
class RunTensors:
    """A parity run as a reference sees it: who produced the tensors, the tensors, and where each module was called."""

    identity: RunIdentity
    outputs: dict[str, Any]
    modules: dict[str, Any] | None  # None: this run kept no per-module outputs (or ran on a device)
    module_lines: dict[str, tuple[str | None, int | None]]


def _named(i: int, n: int, name: str) -> str:
    return name if n == 1 else f"{name} (sample {i + 1})"


def run_tensors(result: Any, *, live: Any = None, target: str = "trn1", timeout: float = 600.0) -> RunTensors:
    """The tensors and identity of a parity run ``result`` (a :class:`~neuronprobe.parity.run.ParityResult`).

    ``live``: a :class:`~neuronprobe.backends.neuron.NeuronLiveBackend`; the final outputs are then
    the device's. Per-module outputs exist only on the CPU (``result.per_module``).
    """
    loaded = result.loaded
    inputs = list(result.inputs)
    n = len(inputs)
    digest = inputs_hash(tuple(a for a, _ in inputs), {str(i): k for i, (_, k) in enumerate(inputs)})
    extra: dict[str, str | None] = dict(model_library_versions(loaded.source))
    outputs: dict[str, Any] = {}
    if live is not None:
        import dataclasses

        detection = live.detection
        extra.update({k: detection.versions.get(k) for k in _SDK_VERSIONS})
        backend, fake = ReferenceBackend.NEURON, bool(detection.fake)
        for i, (args, kwargs) in enumerate(inputs):
            one = dataclasses.replace(loaded, args=tuple(args), kwargs=dict(kwargs))
            for name, tensor in live.run_outputs(one, target, timeout=timeout).items():
                outputs[_named(i, n, name)] = tensor
    else:
        backend, fake = ReferenceBackend.CPU_FP32, False
        for i, value in enumerate(result.reference_outputs):
            for name, tensor in named_outputs(value).items():
                outputs[_named(i, n, name)] = tensor
    modules = None
    if result.per_module and live is None:
        modules = {_named(i, n, key): t for i, per_input in enumerate(result.per_module) for key, t in per_input.items()}
    lines: dict[str, tuple[str | None, int | None]] = {}
    for run in result.section.runs:
        for row in run.modules:
            lines.setdefault(row.module, (row.file, row.line))
    module_lines = {_named(i, n, key): where for i in range(n) for key, where in lines.items()}
    digest_of, what = model_hash(loaded)
    identity = RunIdentity(loaded.source, digest_of, what, digest, backend, fake, current_versions(backend, extra))
    return RunTensors(identity, outputs, modules, module_lines)


def freeze(
    result: Any, *, per_module: bool, live: Any = None, target: str = "trn1", timeout: float = 600.0, rtol: float | None = None, atol: float | None = None
) -> list[tuple[str, bytes]]:
    """The files of a reference folder for this run (``--save-reference``): the CLI writes them, in order."""
    if per_module and live is not None:
        raise InputError(
            "--per-module: a Neuron device returns the model's final outputs only; save per-module references on the CPU (without --backend neuron)"
        )
    tensors = run_tensors(result, live=live, target=target, timeout=timeout)
    return reference_files(tensors.outputs, tensors.identity, modules=tensors.modules if per_module else None, rtol=rtol, atol=atol)


def check_frozen(
    result: Any,
    reference: FrozenReference,
    *,
    live: Any = None,
    target: str = "trn1",
    timeout: float = 600.0,
    cross_backend: bool = False,
    rtol: float | None = None,
    atol: float | None = None,
) -> ReferenceComparison:
    """This run against a frozen reference (``--reference``); refusals are :class:`InputError` (exit 2)."""
    tensors = run_tensors(result, live=live, target=target, timeout=timeout)
    check_identity(reference, tensors.identity, cross_backend)
    return compare_reference(
        reference,
        tensors.outputs,
        tensors.identity,
        modules=tensors.modules,
        module_lines=tensors.module_lines,
        rtol=rtol,
        atol=atol,
        cross_backend=cross_backend,
    )


__all__ = ["RunTensors", "check_frozen", "freeze", "run_tensors"]
