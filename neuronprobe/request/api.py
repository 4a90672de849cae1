"""The Python API: ``neuronprobe.analyze``, ``neuronprobe.parity`` and ``neuronprobe.audit``.

Each takes the options of its command as keyword arguments (``--max-memory`` is ``max_memory=``,
``--set`` is ``set=``; a comma list may be a string or a sequence) and runs the same library
path as the command: the analysis builds the one :class:`~neuronprobe.request.model.AnalyzeRequest`
the command line and the nightly build. The library writes no file (a report's ``to_json()`` and
``to_html()`` do that for a notebook) and never exits: a gate that fails raises :class:`GateFailed`,
which carries the result, where the command would exit 1.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neuronprobe import defaults
from neuronprobe.errors import EXIT_GATE_FAILED, InputError, NeuronprobeError
from neuronprobe.request.check import build_request, rule_table, split_csv
from neuronprobe.request.model import OUTPUT_NAMES

if TYPE_CHECKING:  # pragma: no cover
    from neuronprobe.audit.engine import AuditSection
    from neuronprobe.report.model import Report


class GateFailed(NeuronprobeError):
    """A gate the call asked for failed (the command would exit 1): ``result`` is the report or audit, ``failures`` what failed."""

    exit_code = EXIT_GATE_FAILED

    def __init__(self, message: str, result: Any, failures: Sequence[Any]) -> None:
        super().__init__(message)
        self.result = result
        self.failures = list(failures)


def _gate_message(failures: Sequence[Any]) -> str:
    return "; ".join(getattr(f, "message", str(f)) for f in failures)


def analyze(model: Any, example_inputs: Any = None, *, name: str | None = None, traffic: Any = None, paths: Any = None, **options: Any) -> Report:
    """Analyse a model for Neuron, with the options of ``neuronprobe analyze`` as keywords.

    ``model`` is a ``torch.nn.Module`` (with ``example_inputs`` a tuple of positional arguments or a
    dict of keyword arguments), a model file, or an ``hf:``/``tv:``/``timm:`` spec. A spec runs in
    this process (not in the command's worker: ``timeout`` bounds the backend's own workers, ``max_memory``
    what auto's observation must fit). ``name`` names a module object's report; ``traffic`` (a
    ``TrafficOptions``) and ``paths`` are the older spellings of the traffic keywords and ``path``.
    ``parity=True`` needs a file or spec (parity rebuilds the model from its seed). A failed gate
    (``fail_on=``, ``fail_on_recompiles=``) raises :class:`GateFailed` with the report.
    """
    import dataclasses

    from neuronprobe.request.run import analyse, analysis_options, finish, plan_request

    given = [n for n in OUTPUT_NAMES if n in options]
    if given:
        raise InputError(f"{given[0]}: the library writes no file; write the returned report with report.to_json() or report.to_html()")
    if paths is not None:
        options.setdefault("path", paths)
    if traffic is not None:  # the older keyword: its fields are the request's traffic keywords
        options = {**{k: v for k, v in dataclasses.asdict(traffic).items() if v is not None}, **options}
    is_spec = isinstance(model, (str, os.PathLike))
    plan = plan_request(build_request(str(model) if is_spec else (name or type(model).__name__), **options))
    if is_spec:
        report = analyse(plan)
    else:
        if plan.request.parity:
            raise InputError("parity=True rebuilds the model from its seed: give a model file or an hf:/tv:/timm: spec, or call neuronprobe.parity")
        from neuronprobe.analysis import analyze_module
        from neuronprobe.request.run import worker_environment

        with worker_environment(plan.request.env):
            report = analyze_module(model, example_inputs, analysis_options(plan.request, plan.limits.max_memory_bytes), plan.request.traffic, name)
    outcome = finish(plan, report)
    if outcome.gate_failures:
        raise GateFailed(_gate_message(outcome.gate_failures), outcome.report, outcome.gate_failures)
    return outcome.report


# --- parity ------------------------------------------------------------------------------


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
    from neuronprobe.gates import NEEDS_REFERENCE, PARITY_GATE, Gates, check_gates, known_rule_ids
    from neuronprobe.parity.frozen import ReferenceOptions

    options = ReferenceOptions(save_reference, per_module, reference, cross_backend, rtol, atol)
    gates = check_gates(Gates(tuple(fail_on)), lambda: known_rule_ids(rule_table(None)))
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
    fail = split_csv(fail_on) if isinstance(fail_on, str) else list(fail_on)
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
        raise GateFailed(_gate_message(failures), report, failures)
    return report


# --- audit ------------------------------------------------------------------------------


def check_audit_target(stack: str | None, target: str) -> str:
    """The stack whose fixes an audit gives (``--stack`` wins, else the target's); one sentence for a bad one."""
    from neuronprobe.audit.rules import STACKS, TARGET_STACK, stack_for

    if stack is not None and stack not in STACKS:
        raise InputError(f"--stack {stack!r}: use {' or '.join(STACKS)}")
    if stack is None and target not in TARGET_STACK:
        raise InputError(f"--target {target!r}: use {', '.join(TARGET_STACK)}")
    return stack_for(target, stack)


def check_audit_options(paths: Sequence[Any], fail_on: Sequence[str], jobs: int | None) -> None:
    """An audit's paths, gates and worker count, checked before the walk."""
    from neuronprobe.audit.engine import check_fail_on

    if not paths:
        raise InputError("give at least one PATH to audit (or --rules to list the rules)")
    check_fail_on(list(fail_on))
    if jobs is not None and jobs < 1:
        raise InputError(f"--jobs {jobs}: use 1 or more")


def audit(
    *paths: str | os.PathLike[str],
    stack: str | None = None,
    target: str = defaults.DEFAULT_TARGET,
    fail_on: str | Sequence[str] = (),
    baseline: str | os.PathLike[str] | None = None,
    jobs: int | None = None,
    include_vendored: bool = False,
) -> AuditSection:
    """``neuronprobe audit PATH...``: the CUDA assumptions of a repository, as an AuditSection (no model, no torch)."""
    from neuronprobe.audit.engine import audit_paths, gate

    chosen = check_audit_target(stack, target)
    gates = split_csv(fail_on) if isinstance(fail_on, str) else list(fail_on)
    check_audit_options(paths, gates, jobs)
    section = audit_paths(
        [str(p) for p in paths], chosen, jobs=jobs, include_vendored=include_vendored, baseline=Path(baseline) if baseline is not None else None
    )
    hit = gate(section, gates)
    if hit:
        raise GateFailed(f"{len(hit)} new finding(s) at --fail-on {','.join(gates)}", section, hit)
    return section


# --- buckets ------------------------------------------------------------------------------


def propose_buckets(
    lengths: Any,
    max_buckets: int = defaults.DEFAULT_MAX_BUCKETS,
    *,
    column: str | None = None,
    field: str | None = None,
    step_times: Any = None,
    **options: Any,
) -> Any:
    """``neuronprobe buckets FILE``'s options as keywords: ``lengths`` a file (read as the command reads it, with
    ``column=``/``field=``) or the lengths themselves; ``step_times`` the command's ``--step-times`` CSV (length,seconds),
    which fits the cost. Every other keyword is :func:`neuronprobe.shape_buckets.propose_buckets`'s (``cost``, ``max_len``,
    ``multiple_of``, ``min_bucket``, ``fit``, ``compile_seconds``, ``compile_weight``, ``holdout``)."""
    from neuronprobe.shape_buckets import fit_step_times, read_lengths, read_step_times
    from neuronprobe.shape_buckets import propose_buckets as propose

    if isinstance(lengths, (str, os.PathLike)):
        lengths = read_lengths(Path(lengths), column=column, field=field)
    elif column is not None or field is not None:
        raise InputError("--column and --field name the lengths in a file: give lengths as a file")
    if step_times is not None:
        if options.get("cost", "tokens") != "tokens":
            raise InputError("give either --cost or --step-times, not both")
        options["cost"] = fit_step_times(*read_step_times(Path(step_times))) if isinstance(step_times, (str, os.PathLike)) else step_times
    return propose(lengths, max_buckets, **options)


def propose_decode_buckets(
    trace: Any,
    max_buckets: int = defaults.DEFAULT_MAX_BUCKETS,
    *,
    prompt_column: str | None = None,
    output_column: str | None = None,
    time_column: str | None = None,
    step_times: Any = None,
    set: Sequence[str] = (),
    path: Sequence[str | os.PathLike[str]] = (),
    **options: Any,
) -> Any:
    """``neuronprobe buckets TRACE --decode``'s options as keywords: ``trace`` a file of prompt and output lengths (read
    as the command reads it, with the column keywords) or a DecodeTrace, DataFrame or (prompts, outputs) pair;
    ``step_times`` the ``--step-times`` CSV; ``set``/``path`` the ``--model``'s ``--set`` and ``--path``. Every other keyword
    is :func:`neuronprobe.shape_buckets.propose_decode_buckets`'s (``runtime``, ``model``, ``target``, ``tp_degree``, ...)."""
    from neuronprobe.shape_buckets import fit_step_times, read_step_times
    from neuronprobe.shape_buckets import propose_decode_buckets as propose
    from neuronprobe.shape_buckets.decode_trace import read_decode_trace

    if isinstance(trace, (str, os.PathLike)):
        trace = read_decode_trace(Path(trace), prompt_column, output_column, time_column)
    elif any(c is not None for c in (prompt_column, output_column, time_column)):
        raise InputError("--prompt-column, --output-column and --time-column name the columns of a trace file: give the trace as a file")
    if step_times is not None:
        options["step_times"] = fit_step_times(*read_step_times(Path(step_times))) if isinstance(step_times, (str, os.PathLike)) else step_times
    if set:
        options["model_overrides"] = tuple(set)
    if path:
        options["model_paths"] = tuple(str(p) for p in path)
    return propose(trace, max_buckets, **options)


__all__ = [
    "GateFailed",
    "analyze",
    "audit",
    "check_audit_options",
    "check_audit_target",
    "check_parity_stack",
    "check_train_flags",
    "frozen_options",
    "parity",
    "parity_options",
    "propose_buckets",
    "propose_decode_buckets",
]
