"""``neuronprobe.parity(model, ...)``: the parity command's flags as keywords, and the checks the command shares.

The package ``neuronprobe.parity`` is itself callable (its ``__init__``), so ``neuronprobe.parity(...)`` is this
function whether or not the package was imported. It runs in this process; a failed gate raises
:class:`~neuronprobe.errors.GateFailed` with the report.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neuronprobe import defaults
from neuronprobe.errors import GateFailed, InputError

if TYPE_CHECKING:  # pragma: no cover
    from neuronprobe.report.model import Report


def _split(value: str | Sequence[str]) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()] if isinstance(value, str) else list(value)


def _rule_ids() -> Any:
    from neuronprobe.gates import known_rule_ids
    from neuronprobe.support import load_table

    return known_rule_ids(load_table())


def parity_options(
    set: Sequence[str] = (),
    auto_cast: str | None = None,
    auto_cast_type: str | None = None,
    dtype: str | None = None,
    mixed_precision_accumulation: str | None = None,
    sdk: Sequence[str] = (),
    precision: Sequence[str] = (),
    tolerance: float = defaults.DEFAULT_PARITY_RTOL,
    seed: int = defaults.DEFAULT_PARITY_SEED,
    backend: str = "cpu",
    timeout: float = defaults.DEFAULT_TIMEOUT_S,
) -> Any:
    """The ParityOptions ``neuronprobe parity``'s flags ask for; a bad one is one sentence (exit 2)."""
    from neuronprobe.parity.drift import Tolerance
    from neuronprobe.parity.precision import requested_precisions
    from neuronprobe.parity.run import ParityOptions

    if not math.isfinite(tolerance) or tolerance <= 0:
        raise InputError(f"--tolerance {tolerance:g}: give a relative tolerance above 0, e.g. 0.05")
    if backend not in ("cpu", "xla-cpu"):
        raise InputError(f"--backend {backend!r}: parity runs on cpu (the emulation) or xla-cpu (also torch-xla 2.9 in bf16)")
    precisions = requested_precisions(
        auto_cast=auto_cast, auto_cast_type=auto_cast_type, dtype=dtype, mixed_precision_accumulation=mixed_precision_accumulation, sdk=sdk, precision=precision
    )
    return ParityOptions(precisions, seed, Tolerance(rtol=tolerance), list(set), backend == "xla-cpu", timeout)


def frozen_options(
    save_reference: Path | None,
    per_module: bool,
    reference: Path | None,
    cross_backend: bool,
    rtol: float | None,
    atol: float | None,
    fail_on: Sequence[str],
    backend: str,
) -> tuple[Any, Any, Any]:
    """parity's frozen-reference options, its gates and (``backend="neuron"``) the live backend; one sentence for a bad combination."""
    from neuronprobe.gates import NEEDS_REFERENCE, PARITY_GATE, Gates, check_gates
    from neuronprobe.parity.frozen import ReferenceOptions

    options = ReferenceOptions(save_reference, per_module, reference, cross_backend, rtol, atol)
    gates = check_gates(Gates(tuple(fail_on)), _rule_ids)
    if PARITY_GATE in gates.fail_on and reference is None:
        raise InputError(NEEDS_REFERENCE)
    live = None
    if backend == "neuron":
        if not options.any:
            raise InputError("--backend neuron runs the model on the device for a frozen reference: give --reference DIR or --save-reference DIR")
        from neuronprobe.backends import resolve_backend

        live = resolve_backend("neuron").live  # BackendUnavailable (exit 2) off a Neuron host
        if per_module:
            from neuronprobe.parity.frozen import DEVICE_PER_MODULE

            raise InputError(DEVICE_PER_MODULE)  # before the run, not after it
    return options, gates, live


def check_parity_stack(stack: str | None, target: str, backend: str) -> str:
    """The stack a parity run describes (its --sdk lists precisions to emulate, not the release the stack runs)."""
    from neuronprobe.support import check_target
    from neuronprobe.support.native.stack import NATIVE, check_stack

    check_target(target)
    chosen = check_stack(stack, target)
    if chosen == NATIVE and backend == "xla-cpu":
        raise InputError("--backend xla-cpu runs torch-xla, the XLA stack; with --stack native use --backend cpu or neuron")
    return chosen


def check_train_flags(train: bool, optimizer: str, optimizer_impl: str, train_tolerance: float | None) -> Any:
    """parity's --train options checked: the TrainOptions, or None without --train."""
    if not train and (train_tolerance is not None or optimizer != "adamw" or optimizer_impl != "for-loop"):
        raise InputError("--optimizer, --optimizer-impl and --train-tolerance describe the training step: add --train")
    if train_tolerance is not None and not (train_tolerance >= 0 and train_tolerance != float("inf")):
        raise InputError(f"--train-tolerance {train_tolerance:g}: give a relative error >= 0, e.g. 0.01")
    if not train:
        return None
    from neuronprobe.training import TrainOptions, check_options

    return check_options(TrainOptions(optimizer, optimizer_impl))


def parity(
    model: str | os.PathLike[str],
    *,
    set: Sequence[str] = (),
    auto_cast: str | None = None,
    auto_cast_type: str | None = None,
    dtype: str | None = None,
    mixed_precision_accumulation: str | None = None,
    sdk: Sequence[str] = (),
    precision: Sequence[str] = (),
    tolerance: float = defaults.DEFAULT_PARITY_RTOL,
    seed: int = defaults.DEFAULT_PARITY_SEED,
    backend: str = "cpu",
    target: str = defaults.DEFAULT_TARGET,
    stack: str | None = None,
    timeout: float = defaults.DEFAULT_TIMEOUT_S,
    reference: str | os.PathLike[str] | None = None,
    cross_backend: bool = False,
    rtol: float | None = None,
    atol: float | None = None,
    fail_on: str | Sequence[str] = (),
    train: bool = False,
    optimizer: str = "adamw",
    optimizer_impl: str = "for-loop",
    train_tolerance: float | None = None,
    path: Sequence[str | os.PathLike[str]] = (),
) -> Report:
    """``neuronprobe parity`` in this process: fp32 against Neuron's precisions (emulated), module by module.

    The keywords are the command's flags. A frozen reference is compared with (``reference=``), never
    written: ``--save-reference`` writes files, which only the command line does.
    """
    from neuronprobe.gates import evaluate_gates
    from neuronprobe.loaders.resolve import check_import_paths
    from neuronprobe.options import check_seconds
    from neuronprobe.parity.frozen import parity_with_references, prepare

    spec = str(model)
    chosen = check_parity_stack(stack, target, backend)
    check_seconds(timeout, "--timeout")
    fail = _split(fail_on)
    ref = Path(reference) if reference is not None else None
    references, gates, live = frozen_options(None, False, ref, cross_backend, rtol, atol, fail, backend)
    options = parity_options(
        list(set),
        auto_cast,
        auto_cast_type,
        dtype,
        mixed_precision_accumulation,
        list(sdk),
        list(precision),
        tolerance,
        seed,
        "cpu" if live else backend,
        timeout,
    )
    options.paths = check_import_paths(list(path))
    frozen = prepare(references, spec)
    train_options = check_train_flags(train, optimizer, optimizer_impl, train_tolerance)
    report, _files = parity_with_references(
        spec, options, references, frozen, live=live, train=train_options, train_tolerance=train_tolerance, target=target, command_line=""
    )
    report.support_table.stack = chosen  # issue 36: the stack the run describes, kept for diff
    failures = evaluate_gates(report, gates)
    if failures:
        raise GateFailed("; ".join(f.message for f in failures), report, failures)
    return report


__all__ = ["check_parity_stack", "check_train_flags", "frozen_options", "parity", "parity_options"]
