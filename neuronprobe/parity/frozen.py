"""The parity run's side of frozen references: which tensors a run freezes or compares, and on which backend.

:mod:`neuronprobe.parity.reference` knows the folder format and the comparison; this
module takes a parity run (:class:`~neuronprobe.parity.result.ParityResult`: the model as it
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
from pathlib import Path
from typing import Any

from neuronprobe.errors import InputError
from neuronprobe.file_reads import file_sha256
from neuronprobe.parity.reference import (
    MANIFEST_NAME,
    NEVER_RECOMPUTED,
    TENSORS_NAME,
    FrozenReference,
    RunIdentity,
    check_identity,
    check_new_folder,
    compare_reference,
    current_versions,
    inputs_hash,
    load_reference,
    model_hash,
    model_library_versions,
    named_outputs,
    reference_files,
    resolve_tolerances,
)
from neuronprobe.report.schema.reference import ReferenceComparison
from neuronprobe.vocabulary import ReferenceBackend

DEVICE_PER_MODULE = "--per-module: a Neuron device returns the model's final outputs only; save per-module references on the CPU (without --backend neuron)"
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
    """The tensors and identity of a parity run ``result`` (a :class:`~neuronprobe.parity.result.ParityResult`).

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
        raise InputError(DEVICE_PER_MODULE)
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


@dataclass(frozen=True)
class ReferenceOptions:
    """The frozen-reference options of ``neuronprobe parity``."""

    save_reference: Path | None = None  # --save-reference DIR
    per_module: bool = False  # --per-module: also every module's output (with --save-reference)
    reference: Path | None = None  # --reference DIR
    cross_backend: bool = False  # --cross-backend: compare a reference made on another backend (reported, never gated)
    rtol: float | None = None  # --rtol / --atol: override the per-dtype tolerances
    atol: float | None = None

    @property
    def any(self) -> bool:
        return self.save_reference is not None or self.reference is not None

    def outputs(self) -> list[tuple[str, Path]]:
        """The files ``--save-reference`` writes, as (option, path) for the output guard."""
        if self.save_reference is None:
            return []
        return [("--save-reference", self.save_reference / TENSORS_NAME), ("--save-reference", self.save_reference / MANIFEST_NAME)]

    def reads(self) -> list[Path]:
        """The files ``--reference`` reads: no output may be one of them."""
        if self.reference is None:
            return []
        return [self.reference / TENSORS_NAME, self.reference / MANIFEST_NAME]


def prepare(options: ReferenceOptions, model: str) -> FrozenReference | None:
    """Check the options and read ``--reference`` before any work; everything wrong is one sentence (exit 2).

    A missing reference is refused here, never recomputed; a model file whose bytes changed since
    the reference was saved is refused before the model runs (an ``hf:`` config is checked once built).
    """

    if options.cross_backend and options.reference is None:
        raise InputError("--cross-backend compares with a frozen reference: give --reference DIR")
    if options.per_module and options.save_reference is None:
        raise InputError(
            "--per-module saves every module's output into a new reference: give --save-reference DIR (a --reference says itself whether it has them)"
        )
    if (options.rtol is not None or options.atol is not None) and not options.any:
        raise InputError("--rtol and --atol are the tolerances of a frozen reference: give --reference DIR or --save-reference DIR")
    resolve_tolerances([], options.rtol, options.atol)  # negative or non-finite values: exit 2
    if options.save_reference is not None and options.reference is not None and Path(options.save_reference).resolve() == Path(options.reference).resolve():
        raise InputError(f"--save-reference and --reference are both {options.reference}; {NEVER_RECOMPUTED}: save into another folder")
    if options.save_reference is not None:
        check_new_folder(options.save_reference)
    if options.reference is None:
        return None
    frozen = load_reference(options.reference)
    path = Path(model)
    if path.is_file() and frozen.identity.model_hash.startswith("sha256:"):
        now = f"sha256:{file_sha256(str(path))}"  # read 1 MiB at a time, judged on the open descriptor
        if frozen.identity.model_hash_of.startswith("the model file") and now != frozen.identity.model_hash:
            check_identity(
                frozen, RunIdentity(model, now, frozen.identity.model_hash_of, frozen.identity.inputs_hash, frozen.identity.backend, frozen.identity.fake)
            )
    return frozen


def apply(
    result: Any,
    options: ReferenceOptions,
    frozen: FrozenReference | None,
    *,
    live: Any = None,
    target: str = "trn1",
    timeout: float = 600.0,
) -> list[tuple[Path, bytes]]:
    """After the parity run: compare with ``frozen`` (sets ``result.section.frozen``) and return the files
    ``--save-reference`` must write, ``[(path, bytes)]`` in order (the CLI writes them atomically)."""
    if frozen is not None:
        result.section.frozen = check_frozen(
            result, frozen, live=live, target=target, timeout=timeout, cross_backend=options.cross_backend, rtol=options.rtol, atol=options.atol
        )
    if options.save_reference is None:
        return []
    files = freeze(result, per_module=options.per_module, live=live, target=target, timeout=timeout, rtol=options.rtol, atol=options.atol)
    return [(Path(options.save_reference) / name, data) for name, data in files]


def parity_with_references(
    spec: str,
    options: Any,
    references: ReferenceOptions,
    frozen: FrozenReference | None,
    *,
    live: Any = None,
    train: Any = None,
    train_tolerance: float | None = None,
    target: str = "trn1",
    command_line: str = "",
) -> tuple[Any, list[tuple[Path, bytes]]]:
    """``neuronprobe parity`` with the frozen-reference options and ``--train``: the report, and the files
    ``--save-reference`` must write (the CLI writes them). Runs where the parity run runs (the worker).

    ``options`` is the run's :class:`~neuronprobe.parity.run.ParityOptions`; per-module outputs are kept
    when a reference is saved with them or the reference compared holds them; ``train`` (TrainOptions)
    adds one training step per precision (:func:`neuronprobe.parity.train.train_parities`).
    """
    import dataclasses

    from neuronprobe.parity.precision import DEFAULT_PRECISIONS
    from neuronprobe.parity.run import parity_report

    files: list[tuple[Path, bytes]] = []
    keep = references.per_module or (frozen is not None and frozen.per_module and live is None)

    def then(result: Any) -> None:
        files.extend(apply(result, references, frozen, live=live, target=target, timeout=options.xla_timeout))
        if train is not None:
            from neuronprobe.parity.train import train_parities

            result.section.train = train_parities(result, options.precisions or list(DEFAULT_PRECISIONS), train, tolerance=train_tolerance)

    run_options = dataclasses.replace(options, keep_outputs=options.keep_outputs or keep, after_run=then)
    report = parity_report(spec, run_options, target=target, command_line=command_line)
    return report, files


def write_reference(folder: str | Path, files: list[tuple[Path, bytes]]) -> list[Path]:
    """Write a reference's files (the tensors, then the manifest) into ``folder``: for this run only, complete or absent.

    Two runs saving into one folder at once take turns on a lock of the folder; the second
    finds the first one's files and writes nothing (exit 2): neither overwrites the other,
    and a reference is never half one run's and half another's.
    """
    from neuronprobe.files import write_folder_exclusive

    return write_folder_exclusive(
        folder,
        [(Path(path).name, data) for path, data in files],
        "--save-reference",
        taken=f"the folder already holds a reference (another run saved it first); {NEVER_RECOMPUTED} in place: save into another folder",
    )


__all__ = [
    "DEVICE_PER_MODULE",
    "ReferenceOptions",
    "RunTensors",
    "apply",
    "check_frozen",
    "freeze",
    "parity_with_references",
    "prepare",
    "run_tensors",
    "write_reference",
]
