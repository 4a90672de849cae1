"""Run an :class:`~neuronprobe.request.model.AnalyzeRequest`: the analysis and every section the request asks for.

The library, not a front end, assembles the report: the decode buckets of ``--decode-trace``, the
vLLM Neuron plan of ``--serving-trace``, the parity section of ``--parity`` and the repository audit
of ``--audit`` are built here, and the gates evaluated here, whichever door the request came by.
Two steps, so that a front end can check its outputs between them: :func:`plan_request` validates
the request and reads what it names (a bad trace is exit 2 before any model is loaded);
:func:`execute` runs the analysis (in a killable worker, or in this process) and adds the sections.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from neuronprobe.request.check import check_request, request_gates, request_limits
from neuronprobe.request.model import AnalyzeRequest

if TYPE_CHECKING:  # pragma: no cover
    from neuronprobe.analysis import AnalyzeOptions
    from neuronprobe.gates import GateFailure, Gates
    from neuronprobe.process.worker import WorkerLimits
    from neuronprobe.report.model import Report


@dataclass(frozen=True)
class Plan:
    """A checked request, with the sections read before the analysis runs."""

    request: AnalyzeRequest
    gates: Gates
    limits: WorkerLimits
    decode: Any = None  # the decode section (DecodeProposal) of --decode-trace
    serving: Any = None  # the vLLM Neuron serving plan (ServingPlan) of --serving-trace
    reads: list[Any] = field(default_factory=list)  # every file the request reads: no output may be one


@dataclass
class Outcome:
    """What an analysis request gives: the report, and the gates it failed (the command line exits 1 on any)."""

    report: Report
    gate_failures: list[GateFailure] = field(default_factory=list)


def plan_request(request: AnalyzeRequest) -> Plan:
    """Check ``request`` and read what it names before the analysis (exit 2 at once for a bad trace)."""
    request = check_request(request)
    gates = request_gates(request)
    reads = request.reads()
    if request.audit is not None:
        from neuronprobe.audit.engine import audit_inputs

        reads += audit_inputs([request.audit], False)
    decode = None
    if request.decode_trace is not None:
        from neuronprobe.shape_buckets.decode import decode_for_report

        decode = decode_for_report(request.decode_trace, request.model, request.target, list(request.set))
    serving = None
    if request.wants_serving:  # issue 37
        from neuronprobe.shape_buckets.serving import serving_for_report

        serving = serving_for_report(request.serving_trace, request.serving_engine, request.vllm_options, request.compile_times)
    return Plan(request, gates, request_limits(request), decode, serving, reads)


def analysis_options(request: AnalyzeRequest, max_memory: int | None = None) -> AnalyzeOptions:
    """The pipeline's options for the request (``max_memory``: the worker's limit, which auto's observation must fit)."""
    from neuronprobe.analysis import AnalyzeOptions

    options = AnalyzeOptions(
        target=request.target,
        backend=request.backend,
        require_backend=request.require_backend,
        sdk=request.sdk,
        rules=request.rules,
        overrides=list(request.set),
        timeout=request.timeout,
        op_timeout=request.op_timeout,
        command_line=request.command_line,
        entry=request.entry,
        paths=list(request.path),
        stack=request.stack,
        support_table=request.support_table,
        compiler_args=request.compiler_args,
        native_mode=request.native_mode,
        max_memory=max_memory,
    )
    if request.train:
        from neuronprobe.training import TrainOptions, check_options

        options.train = check_options(TrainOptions(request.optimizer, request.optimizer_impl, request.dataset_size, request.batch_size))
    return options


@contextlib.contextmanager
def worker_environment(env: tuple[tuple[str, str], ...]) -> Iterator[None]:
    """The request's environment variables for the analysis, the process's own restored after it."""
    if not env:
        yield
        return
    from neuronprobe.analysis import environment_kept

    with environment_kept():
        os.environ.update(dict(env))
        yield


def analyse(plan: Plan) -> Report:
    """The model's analysis (with its parity section when asked), in this process: what the worker runs."""
    from neuronprobe.analysis import analyze_spec

    request = plan.request
    options = analysis_options(request, plan.limits.max_memory_bytes)
    with worker_environment(request.env):
        report = analyze_spec(request.model, options, request.traffic)
        if request.parity:  # issue 25: the section is added to the analysis report; its verdict is unchanged
            from neuronprobe.parity.run import ParityOptions, add_parity

            numbers = ParityOptions(overrides=list(request.set), xla=request.backend == "xla-cpu", xla_timeout=request.timeout, paths=list(request.path))
            report = add_parity(report, request.model, numbers)
    return report


def execute(plan: Plan, *, isolate: bool = True, on_stage: Callable[[str], None] | None = None) -> Outcome:
    """Run the planned analysis and add every section; ``isolate``: the model's code in a killable worker (the command line)."""
    if isolate:
        from neuronprobe.process.worker import analyze_in_worker

        report = analyze_in_worker(plan.request.model, lambda: analyse(plan), plan.limits, on_stage)
    else:
        report = analyse(plan)
    return finish(plan, report)


def finish(plan: Plan, report: Report) -> Outcome:
    """The sections read before the analysis and the audit, added to its report; then the gates."""
    if plan.decode is not None:
        report.decode = plan.decode
    if plan.serving is not None:
        report.serving = plan.serving
    if plan.request.audit is not None:
        from neuronprobe.audit.engine import audit_paths
        from neuronprobe.audit.rules import stack_for

        report.audit = audit_paths([plan.request.audit], stack_for(plan.request.target, None))
    from neuronprobe.gates import evaluate_gates

    return Outcome(report, evaluate_gates(report, plan.gates))  # a gate that cannot be evaluated: exit 2, before any output


def run_request(request: AnalyzeRequest, *, isolate: bool = True, on_stage: Callable[[str], None] | None = None) -> Outcome:
    """Plan and execute ``request`` in one call (what the Python API and the nightly run)."""
    return execute(plan_request(request), isolate=isolate, on_stage=on_stage)


__all__ = ["Outcome", "Plan", "analyse", "analysis_options", "execute", "finish", "plan_request", "run_request", "worker_environment"]
