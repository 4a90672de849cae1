"""The live Neuron backend: ask the Neuron SDK what really happens to a model.

With the XLA-era stack (trn1/inf2) three steps run, each in a killable child
process (:mod:`neuronprobe.process.isolation`) with its own time limit:

1. ``analyze``: ``torch_neuronx.analyze`` classifies every aten op (its dict:
   ``support_percentage`` "NN.NN%", ``supported_operators`` counts,
   ``unsupported_operators`` entries ``{kind, failureAt, call, opGraph}``);
2. ``trace``: ``torch_neuronx.trace`` compiles the whole forward; a failure is
   ``RuntimeError("neuronx-cc failed with N")`` with ``[NCC_*]`` diagnostics in
   the compiler's output, which the child captures;
3. ``run``: one forward on the XLA device; torch-xla's ``aten::*`` counters
   (``met.executed_fallback_ops()`` where present) are the ops that ran on the CPU.

With the native TorchNeuron stack (trn2/trn3) one ``run`` step reads
``torch_neuronx.get_fallback_ops()`` and ``get_executed_ops()`` (lists of op names), and
``get_dynamo_metrics()``: one ``NeuronCompilationMetrics`` per graph the model's own
``torch.compile(backend="neuron")`` compiled, with its node count and FX-pass, lowering and NEFF
compile times (``report.backend.compiled_graphs``); counting compiles over traffic reads the same
metrics per graph (``recompiles.observed.graphs``).

The compiler writes into a temporary folder and a temporary Neuron compile
cache (``NEURON_COMPILE_CACHE_URL``, and ``--cache_dir`` in ``NEURON_CC_FLAGS``),
so the user's cache is untouched unless ``NEURONPROBE_NEURON_CACHE=user``.
A step that hits its time limit is killed with its compiler processes and
becomes a limitation of the report, never a crash.

Observed findings use the predicted findings' verdicts, with ``origin=Origin.OBSERVED``.
"""

from __future__ import annotations

import os
import re
import shlex
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuronprobe.backends import Capabilities, Observation, ResolvedBackend, forward_only, static_info
from neuronprobe.backends.detect import STACK_NATIVE, STACK_XLA, Detection, detect
from neuronprobe.backends.neuron_steps import (
    step_analyze,
    step_native_compiles,
    step_native_outputs,
    step_native_run,
    step_trace,
    step_xla_compiles,
    step_xla_outputs,
    step_xla_run,
)
from neuronprobe.backends.train_program import TrainProgramOptions
from neuronprobe.capture.graph import relative_path
from neuronprobe.errors import BackendUnavailable, InputError
from neuronprobe.process.isolation import StepResult, run_isolated
from neuronprobe.report.model import BackendInfo, BackendStep, CompiledGraph, Finding, Limitation, ObservedCompiles
from neuronprobe.support.error_patterns import load_error_patterns
from neuronprobe.usercode import is_library
from neuronprobe.vocabulary import Origin, SourceLocation, StepStatus, Verdict, worse

ALLOW_FAKE_ENV = "NEURONPROBE_ALLOW_FAKE_SDK"  # "1": --backend auto|neuron may drive the test fake
CACHE_ENV = "NEURONPROBE_NEURON_CACHE"  # "user": compile through the user's Neuron cache instead of a temporary one

WHOLE_GRAPH_OP = "<neuronx-cc>"  # a trace compile failure no diagnostic ties to one op
DEVICE_RUN_OP = "<forward on device>"  # a failed device forward no diagnostic ties to one op
# A fallback counter torch-xla always bumps when Python reads a tensor value
# (.item(), printing): a host sync, not an op without a lowering.
NOT_A_FALLBACK = frozenset({"aten::_local_scalar_dense"})

# The texts that pick a verdict (analyze's failureAt, the [NCC_*] diagnostics) are rule data:
# support/data/error_patterns.json. These only pull details out for messages.
_FAILED_WITH = re.compile(r"neuronx-cc failed with (-?\d+)")
_EXIT_STATUS = re.compile(r"non-zero exit status (-?\d+)")
_CALL_FRAME = re.compile(r"^(?P<file>.+?)\((?P<line>\d+)\): (?P<func>.*)$")
_ATEN = re.compile(r"\baten::[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)?")

FIX = {
    Verdict.COMPILE_ERROR: "the Neuron compiler rejects this op: rewrite it with ops it supports "
    "(neuronx-cc list-operators --framework XLA), or keep it on the CPU with "
    "torch_neuronx.trace(..., partitioner_config=torch_neuronx.PartitionerConfig())",
    Verdict.CPU_FALLBACK: "torch-xla has no lowering for it, so it runs on the host with a device round trip per call: "
    "replace it with ops that lower, or move it out of the traced forward",
}


# --- resolving ------------------------------------------------------------------------


def fake_allowed() -> bool:
    return os.environ.get(ALLOW_FAKE_ENV, "") == "1"


def _not_live_reason(detection: Detection) -> str:
    if detection.usable and detection.fake:
        where = detection.paths.get("torch_neuronx", "tests/fake_backend")
        return f"the Neuron SDK found is the test fake at {where}, not hardware"
    return detection.summary(with_hint=True)


def resolve(name: str, require: str | None) -> ResolvedBackend:
    """Pick the backend for ``--backend name``; fail closed for ``--require-backend neuron``.

    ``auto`` drives the real SDK when it is there, otherwise predicts (static).
    The test fake is driven only when ``NEURONPROBE_ALLOW_FAKE_SDK=1`` and never
    satisfies ``--require-backend neuron``.
    """
    if name == "static" and require != "neuron":
        return ResolvedBackend(info=static_info())
    detection = detect()
    if require == "neuron" and not detection.is_real:
        raise BackendUnavailable(f"--require-backend neuron: {_not_live_reason(detection)}")
    live_ok = detection.usable and (not detection.fake or fake_allowed())
    if name == "static":
        return ResolvedBackend(info=static_info())
    if live_ok:
        backend = NeuronLiveBackend(detection)
        return ResolvedBackend(info=backend.info(), live=backend)
    if name == "neuron":
        reason = _not_live_reason(detection)
        if detection.usable and detection.fake:
            reason += f"; set {ALLOW_FAKE_ENV}=1 to drive it (tests only)"
        raise BackendUnavailable(f"--backend neuron: {reason}")
    return ResolvedBackend(info=static_info(_static_detail(detection)))


def _static_detail(detection: Detection) -> str:
    if detection.usable and detection.fake:
        found = f"the test fake Neuron SDK was found but not used ({ALLOW_FAKE_ENV} is not 1)"
    elif detection.stack == "none":
        found = "no Neuron SDK found"
    else:
        found = detection.summary()
    return f"predicted from the bundled support table; {found}"


# --- parsing what the SDK says (pure) -----------------------------------------------------


@dataclass
class UnsupportedOp:
    kind: str
    failure_at: str
    file: str | None = None
    line: int | None = None


@dataclass
class AnalyzeResult:
    """torch_neuronx.analyze's dict, read."""

    support_percentage: float | None
    supported: dict[str, int] = field(default_factory=dict)
    unsupported: list[UnsupportedOp] = field(default_factory=list)
    torch_neuronx_version: str | None = None
    neuronx_cc_version: str | None = None


def call_site(call: str) -> tuple[str | None, int | None]:
    """The user's frame of analyze's ``call`` (a TorchScript source range, innermost frame first)."""
    for raw in (call or "").splitlines():
        m = _CALL_FRAME.match(raw.strip())
        if m and not is_library(m.group("file")):  # the SDK's frames too (usercode.STACK_PACKAGES)
            return relative_path(m.group("file")), int(m.group("line"))
    return None, None


def parse_support_percentage(text: Any) -> float | None:
    """ "66.67%" -> 66.67; None for anything else."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text)
    m = re.fullmatch(r"\s*(-?\d+(?:\.\d+)?)\s*%\s*", str(text or ""))
    return float(m.group(1)) if m else None


def parse_analyze_report(report: Any) -> AnalyzeResult:
    """Read analyze's dict; ValueError (one sentence) when it is not the documented format."""
    if not isinstance(report, dict):
        raise ValueError(f"torch_neuronx.analyze returned {type(report).__name__}, not a dict")
    supported = report.get("supported_operators", {})
    unsupported = report.get("unsupported_operators", [])
    if not isinstance(supported, dict) or not isinstance(unsupported, list):
        raise ValueError("torch_neuronx.analyze returned supported_operators/unsupported_operators of unexpected types")
    result = AnalyzeResult(
        support_percentage=parse_support_percentage(report.get("support_percentage")),
        supported={str(k): int(v) for k, v in supported.items() if isinstance(v, int)},
        torch_neuronx_version=report.get("torch_neuronx_version"),
        neuronx_cc_version=report.get("neuronx_cc_version"),
    )
    for entry in unsupported:
        if not isinstance(entry, dict) or "kind" not in entry:
            continue
        file, line = call_site(str(entry.get("call", "")))
        result.unsupported.append(UnsupportedOp(str(entry["kind"]), str(entry.get("failureAt", "")), file, line))
    return result


@dataclass
class CompilerLog:
    diagnostics: list[tuple[str, str]] = field(default_factory=list)  # (code, message)
    status: int | None = None  # neuronx-cc's exit status, when the log or error says it


def parse_compiler_log(text: str, error: str = "") -> CompilerLog:
    """The ``[NCC_*]`` (and older ``[XTP003]``-style) diagnostics and the compiler's exit status."""
    log = CompilerLog()
    seen = set()
    for m in load_error_patterns().ncc_diagnostic.finditer(text or ""):
        key = (m.group("code"), m.group("message").strip())
        if key not in seen:
            seen.add(key)
            log.diagnostics.append(key)
    for source in (error, text or ""):
        status = _FAILED_WITH.search(source) or _EXIT_STATUS.search(source)
        if status:
            log.status = int(status.group(1))
            break
    return log


def _base(op: str) -> str:
    return op.split(".", 1)[0]


def op_in_message(message: str, vocabulary: list[str]) -> str | None:
    """The model op a compiler diagnostic names: ``aten::x`` literally, else the longest op name as a word."""
    m = _ATEN.search(message)
    if m:
        return m.group(0)
    best = None
    lowered = message.lower()
    for op in vocabulary:
        name = _base(op).split("::", 1)[-1].lower()
        if (
            len(name) > 2
            and re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", lowered)
            and (best is None or len(name) > len(_base(best).split("::", 1)[-1]))
        ):
            best = op
    return best


# --- turning steps into an Observation (pure) ------------------------------------------------


@dataclass
class _Builder:
    model_file: str | None
    findings: list[Finding] = field(default_factory=list)
    op_verdicts: dict[str, str] = field(default_factory=dict)
    limitations: list[Limitation] = field(default_factory=list)
    steps: dict[str, BackendStep] = field(default_factory=dict)
    logs: list[str] = field(default_factory=list)
    support_percentage: float | None = None
    where: dict[str, tuple[str | None, int | None]] = field(default_factory=dict)
    graphs: list[CompiledGraph] = field(default_factory=list)  # native: what get_dynamo_metrics() reported for the run

    def verdict(self, op: str, verdict: Verdict | str) -> None:
        self.op_verdicts[op] = worse(self.op_verdicts.get(op), verdict)

    def finding_for(self, op: str, file: str | None = None, line: int | None = None) -> Finding | None:
        """An observed finding of the same op; at the same place when a place is given."""
        for f in self.findings:
            if _base(f.op) == _base(op) and (file is None or (f.file, f.line) == (file, line)):
                return f
        return None

    def add(
        self,
        op: str,
        verdict: Verdict | str,
        message: str,
        rule: str,
        ncc_code: str | None = None,
        count: int = 1,
        file: str | None = None,
        line: int | None = None,
    ) -> None:
        """A new observed finding, or more evidence on an existing one for the same op (and place)."""
        existing = self.finding_for(op, file, line) if not op.startswith("<") else None
        if existing is not None:
            existing.verdict = worse(existing.verdict, verdict)
            existing.ncc_code = existing.ncc_code or ncc_code
            if message not in existing.message:
                existing.message += f"; {message}"
            return
        if file is None and not op.startswith("<"):
            file, line = self.where.get(op, (None, None))
        if op.startswith("<"):
            file = self.model_file
        self.findings.append(
            Finding.at(
                rule,
                SourceLocation(file, line),
                op,
                message,
                verdict=verdict,
                fix=FIX.get(Verdict(verdict), FIX[Verdict.COMPILE_ERROR]),
                ncc_code=ncc_code,
                count=count,
                origin=Origin.OBSERVED,
            )
        )

    def record(self, name: str, result: StepResult, limit: float) -> None:
        if result.log.strip():
            self.logs.append(f"===== {name} ({result.status}, {result.seconds:.1f}s) =====\n{result.log}")
        if result.status is StepStatus.OK:
            self.steps[name] = BackendStep(StepStatus.OK, round(result.seconds, 1))
        elif result.status is StepStatus.TIMEOUT:
            self.steps[name] = BackendStep(StepStatus.TIMEOUT, limit)
            last = next((ln.strip() for ln in reversed(result.log.splitlines()) if ln.strip()), "")
            self.limitations.append(
                Limitation(
                    what=f"neuron backend: {name}",
                    why=f"did not finish within {limit:g} s (--op-timeout / --timeout); it was stopped with its "
                    f"compiler processes, so its ops are only predicted" + (f" (last output: {last[:200]})" if last else ""),
                )
            )
        elif result.status is StepStatus.DIED:
            self.steps[name] = BackendStep(StepStatus.DIED, detail=result.error)
            self.limitations.append(Limitation(f"neuron backend: {name}", f"{result.error}; its ops are only predicted"))
        else:
            self.steps[name] = BackendStep(StepStatus.FAILED, detail=result.error[:300])

    def skipped(self, name: str, why: str) -> None:
        self.steps[name] = BackendStep(StepStatus.SKIPPED, detail=why)
        self.limitations.append(Limitation(f"neuron backend: {name}", f"skipped: {why}"))

    def vocabulary(self) -> list[str]:
        return sorted(set(self.op_verdicts) | set(self.where))

    def compile_failure(self, step: str, result: StepResult, what: str, whole: str = WHOLE_GRAPH_OP) -> None:
        """A step that failed: NCC diagnostics tied to ops where the text names one, else one whole-graph finding."""
        log = parse_compiler_log(result.log, result.error)
        status = f" (neuronx-cc exit status {log.status})" if log.status is not None else ""
        unattributed = []
        verdict = load_error_patterns().ncc_diagnostic_verdict
        for code, message in log.diagnostics:
            op = op_in_message(message, self.vocabulary())
            if op is None:
                unattributed.append((code, message))
                continue
            self.verdict(op, verdict)
            self.add(op, verdict, f"{what} failed{status}: [{code}] {message}", f"observed-{step}", code)
        if unattributed or not log.diagnostics:
            said = "; ".join(f"[{c}] {m}" for c, m in unattributed) or result.error
            self.add(
                whole,
                Verdict.COMPILE_ERROR,
                f"{what} failed{status}: {said}"[:2000],
                f"observed-{step}",
                unattributed[0][0] if unattributed else None,
            )

    def observation(self) -> Observation:
        return Observation(
            findings=self.findings,
            op_verdicts=self.op_verdicts,
            limitations=self.limitations,
            compile_log="\n".join(self.logs),
            extra={"steps": dict(self.steps), "support_percentage": self.support_percentage},
        )


def apply_analyze(builder: _Builder, report: Any) -> None:
    try:
        result = parse_analyze_report(report)
    except ValueError as exc:
        builder.limitations.append(Limitation("neuron backend: analyze", str(exc)))
        return
    builder.support_percentage = result.support_percentage
    patterns = load_error_patterns()  # failureAt -> verdict (a compiler rejection, or a host fallback)
    for kind in result.supported:
        builder.verdict(kind, Verdict.LOWERED)
    sites: dict[tuple[str, str, str | None, int | None], int] = {}
    for u in result.unsupported:
        builder.verdict(u.kind, patterns.failure_at_verdict(u.failure_at))
        builder.where.setdefault(u.kind, (u.file, u.line))
        key = (u.kind, u.failure_at, u.file, u.line)
        sites[key] = sites.get(key, 0) + 1
    for (kind, failure, file, line), n in sites.items():
        builder.add(
            kind,
            patterns.failure_at_verdict(failure),
            f"{kind}: torch_neuronx.analyze reports it unsupported (failed at {failure})",
            "observed-analyze",
            count=n,
            file=file,
            line=line,
        )


def apply_fallbacks(builder: _Builder, counts: dict[str, int], source: str) -> None:
    for op, n in sorted(counts.items()):
        if op in NOT_A_FALLBACK:
            continue
        builder.verdict(op, Verdict.CPU_FALLBACK)
        builder.add(op, Verdict.CPU_FALLBACK, f"{op} ran on the CPU ({source}: {n} call(s) in one forward)", "observed-fallback", count=max(int(n), 1))


def apply_xla_observation(builder: _Builder, value: dict[str, Any]) -> None:
    """A forward observed by xla_observe (the same observation as the xla-cpu backend's)."""
    from neuronprobe.backends.xla_findings import fallback_findings, host_sync_findings

    fallbacks, limitations = fallback_findings(value)
    builder.limitations.extend(limitations)
    for f in [*fallbacks, *host_sync_findings(value)]:
        builder.verdict(f.op, f.verdict)
        builder.add(f.op, f.verdict, f.message, f.rule, count=f.count, file=f.file, line=f.line)
        added = builder.finding_for(f.op, f.file, f.line) if f.file is not None else builder.finding_for(f.op)
        if added is not None:
            added.fix = f.fix
            added.bytes_per_call = added.bytes_per_call or f.bytes_per_call
            added.source_line = added.source_line or f.source_line


def apply_native(builder: _Builder, value: dict[str, Any]) -> None:
    """The native run: every executed op ran on the device unless it is also a fallback; the graphs compiled on
    the way, and a one-line summary on the run step."""
    fallback = set(value.get("fallback", []))
    executed = set(value.get("executed", []))
    for op in sorted(executed - fallback):
        builder.verdict(op, Verdict.LOWERED)
    apply_fallbacks(builder, {op: 1 for op in fallback}, "torch_neuronx.get_fallback_ops()")
    graphs = compiled_graphs(value.get("graphs", []))
    builder.graphs.extend(graphs)
    step = builder.steps.get("run")
    if step is not None:
        step.detail = f"{len(executed | fallback)} op(s) executed, {len(fallback)} on the CPU" + (
            f"; {len(graphs)} torch.compile graph(s) compiled in {sum(g.seconds for g in graphs):.1f} s" if graphs else ""
        )


def compiled_graphs(rows: list[dict[str, Any]]) -> list[CompiledGraph]:
    """``get_dynamo_metrics()`` rows (:func:`~neuronprobe.backends.neuron_steps.dynamo_metrics_rows`) as report records."""
    return [CompiledGraph(**row) for row in rows]


# --- the backend --------------------------------------------------------------------------


def isolated_cache_env(cache: Path, environ: dict[str, str] | None = None) -> dict[str, str]:
    """Environment that points the Neuron persistent cache at ``cache``.

    ``--cache_dir`` in ``NEURON_CC_FLAGS`` wins over ``NEURON_COMPILE_CACHE_URL``,
    so a user's ``--cache_dir`` is replaced, not merely shadowed.
    """
    environ = dict(os.environ if environ is None else environ)
    # TORCH_NEURONX_NEFF_CACHE_DIR: the native backend's NEFF cache, as user scripts set it
    # (not in the env-var reference we read); harmless where the variable means nothing.
    env = {"NEURON_COMPILE_CACHE_URL": str(cache), "TORCH_NEURONX_NEFF_CACHE_DIR": str(cache / "native-neff")}
    flags = shlex.split(environ.get("NEURON_CC_FLAGS", ""))
    if any(f.startswith("--cache_dir") for f in flags):
        kept: list[str] = []
        skip = False
        for f in flags:
            if skip:
                skip = False
                continue
            if f == "--cache_dir":
                skip = True
                continue
            if f.startswith("--cache_dir="):
                continue
            kept.append(f)
        env["NEURON_CC_FLAGS"] = shlex.join([*kept, f"--cache_dir={cache}"])
    return env


@dataclass
class _Budget:
    """The whole-run time budget, shared by the steps."""

    total: float
    spent: float = 0.0

    def limit(self, per_step: float) -> float:
        return max(0.0, min(per_step, self.total - self.spent))


@dataclass
class NeuronLiveBackend:
    """Drives the detected Neuron stack (real, or the test fake when allowed)."""

    detection: Detection
    run_trace: bool = True
    use_user_cache: bool = field(default_factory=lambda: os.environ.get(CACHE_ENV, "") == "user")
    _steps: dict[str, BackendStep] = field(default_factory=dict)
    _support: float | None = None
    _graphs: list[CompiledGraph] = field(default_factory=list)

    @property
    def kind(self) -> str:
        return self.detection.stack

    def info(self) -> BackendInfo:
        import platform

        d = self.detection
        versions = {"python": platform.python_version(), **d.versions}
        cc = d.versions.get("neuronx-cc")
        detail = f"live: {d.kind_label}, torch-neuronx {d.versions.get('torch-neuronx', '?')}" + (f", neuronx-cc {cc}" if cc else "")
        if d.fake:
            detail += " (THE TEST FAKE from tests/fake_backend, not hardware)"
        return BackendInfo(
            name="neuron",
            kind=d.stack,
            versions=versions,
            detail=detail,
            fake=d.fake,
            steps=dict(self._steps),
            observed_support_percentage=self._support,
            compiled_graphs=list(self._graphs),
        )

    def capabilities(self) -> Capabilities:
        return Capabilities(count_compiles=self.count_compiles)

    def _env(self, workdir: Path) -> dict[str, str]:
        return {} if self.use_user_cache else isolated_cache_env(workdir / "neuron-compile-cache")

    def observe_training(self, loaded: Any, target: str, options: TrainProgramOptions, *, timeout: float, op_timeout: float) -> Observation:
        """The SDK's steps trace and run the forward only: that, and a limitation saying so."""
        return forward_only(self, loaded, target, timeout=timeout, op_timeout=op_timeout)

    def observe(self, loaded: Any, target: str, *, timeout: float, op_timeout: float) -> Observation:
        """Run the SDK steps on ``loaded`` (a LoadedModel) and report what they observed."""
        model_file = relative_path(str(loaded.path)) if getattr(loaded, "path", None) else None
        builder = _Builder(model_file=model_file)
        if self.kind == STACK_XLA:
            steps = [("analyze", step_analyze), ("trace", step_trace), ("run", step_xla_run)]
            if not self.run_trace:
                steps = [s for s in steps if s[0] != "trace"]
        elif self.kind == STACK_NATIVE:
            steps = [("run", step_native_run)]
        else:  # pragma: no cover - resolve() only builds live backends for the two stacks
            raise BackendUnavailable(f"the neuron backend cannot drive {self.detection.summary()}")
        budget = _Budget(timeout)
        with tempfile.TemporaryDirectory(prefix="neuronprobe-neuron-") as tmp:
            workdir = Path(tmp)
            env = self._env(workdir)
            for name, fn in steps:
                limit = budget.limit(op_timeout)
                if limit <= 0:
                    builder.skipped(name, f"the whole-run timeout of {timeout:g} s was spent")
                    continue
                result = run_isolated(
                    fn,
                    (loaded.module, loaded.args, loaded.kwargs, str(workdir), target),
                    limit_s=limit,
                    workdir=workdir,
                    name=name,
                    env=env,
                )
                budget.spent += result.seconds
                builder.record(name, result, limit)
                self._apply(builder, name, result)
        self._steps = dict(builder.steps)
        self._support = builder.support_percentage
        self._graphs = list(builder.graphs)
        return builder.observation()

    def _apply(self, builder: _Builder, name: str, result: StepResult) -> None:
        if name == "analyze":
            if result.status is StepStatus.OK:
                apply_analyze(builder, result.value)
            elif result.status is StepStatus.FAILED:
                builder.limitations.append(Limitation("neuron backend: analyze", f"torch_neuronx.analyze failed: {result.error[:500]}"))
        elif name == "trace":
            if result.status is StepStatus.FAILED:
                builder.compile_failure("trace", result, "torch_neuronx.trace")
        elif name == "run" and self.kind == STACK_XLA:
            if result.status is StepStatus.OK:
                apply_xla_observation(builder, result.value)
            elif result.status is StepStatus.FAILED:
                builder.compile_failure("run", result, "a forward on the XLA device", DEVICE_RUN_OP)
        elif name == "run":
            if result.status is StepStatus.OK:
                apply_native(builder, result.value)
            elif result.status is StepStatus.FAILED:
                builder.compile_failure("run", result, "a forward on the Neuron device", DEVICE_RUN_OP)

    def run_outputs(self, loaded: Any, target: str, *, timeout: float) -> Any:
        """The model's named outputs (``output['logits']``: tensors on the CPU) from one forward on the device.

        For ``parity --reference`` and ``--save-reference`` on a Neuron host.

        The forward runs in a killable child like the other steps; a failure or a timeout is an
        :class:`InputError` (exit 2): there are no device outputs to compare with the reference.
        """
        fn = step_native_outputs if self.kind == STACK_NATIVE else step_xla_outputs
        with tempfile.TemporaryDirectory(prefix="neuronprobe-outputs-") as tmp:
            workdir = Path(tmp)
            result = run_isolated(
                fn,
                (loaded.module, loaded.args, loaded.kwargs, str(workdir), target),
                limit_s=timeout,
                workdir=workdir,
                name="outputs",
                env=self._env(workdir),
            )
        fake = " (the test fake)" if self.detection.fake else ""
        if result.status is StepStatus.TIMEOUT:
            raise InputError(f"the forward on the Neuron device{fake} was stopped after {timeout:g} s; no device outputs to compare")
        if result.status is not StepStatus.OK:
            why = result.error.strip().splitlines()[0] if result.error.strip() else result.status
            raise InputError(f"the forward on the Neuron device{fake} failed ({why[:300]}); no device outputs to compare")
        from safetensors.torch import load

        return load(result.value)

    def count_compiles(self, loaded: Any, inputs_per_call: list[Any], *, timeout: float) -> ObservedCompiles:
        """Real compiles for a stream of inputs: torch-xla's UncachedCompile and new MODULE_* cache entries,
        or the native backend's dynamo metrics. A timeout or failure is a note, with what was counted so far."""
        native = self.kind == STACK_NATIVE
        source = "native-metrics" if native else "torch_xla"
        fn = step_native_compiles if native else step_xla_compiles
        with tempfile.TemporaryDirectory(prefix="neuronprobe-compiles-") as tmp:
            workdir = Path(tmp)
            cache = workdir / "neuron-compile-cache"
            env = {} if self.use_user_cache else isolated_cache_env(cache)
            result = run_isolated(
                fn,
                (loaded.module, list(inputs_per_call), str(workdir)),
                limit_s=timeout,
                workdir=workdir,
                name="compiles",
                env=env,
            )
            modules = sorted(p.name for p in cache.glob("*/MODULE_*")) if not self.use_user_cache else []
        last = result.progress[-1] if result.progress else {"calls": 0, "compiles": 0}
        fake = " (test fake)" if self.detection.fake else ""
        if result.status is not StepStatus.OK:
            what = f"stopped after {timeout:g} s" if result.status is StepStatus.TIMEOUT else f"failed: {result.error[:300]}"
            return ObservedCompiles(
                compiles=int(last["compiles"]),
                graph_hashes=[m.removeprefix("MODULE_") for m in modules],
                source=source,
                shapes_run=int(last["calls"]),
                note=f"the run {what}; counted over the first {last['calls']} of {len(inputs_per_call)} call(s){fake}",
            )
        value = result.value
        graphs: list[CompiledGraph] = []
        if native:
            graphs = compiled_graphs(value.get("graphs", []))
            hashes = [g.name for g in graphs]
            note = f"torch.compile(backend='neuron') graphs from torch_neuronx.get_dynamo_metrics(){fake}"
        else:
            hashes = [m.removeprefix("MODULE_") for m in modules]
            note = (
                f"torch-xla UncachedCompile={value['compiles']}, CachedCompile={value['cached']}; "
                f"{len(modules)} new MODULE_* entries in a temporary Neuron compile cache{fake}"
            )
            if modules and not value["compiles"]:
                source = "neuron-cache"
        compiles = int(value["compiles"]) if value["compiles"] or native else len(modules)
        return ObservedCompiles(
            compiles=compiles,
            graph_hashes=hashes,
            source=source,
            shapes_run=int(value["calls"]),
            note=note,
            seconds=round(sum(g.seconds for g in graphs), 3),
            graphs=graphs,
        )


__all__ = [
    "ALLOW_FAKE_ENV",
    "NeuronLiveBackend",
    "call_site",
    "isolated_cache_env",
    "op_in_message",
    "parse_analyze_report",
    "parse_compiler_log",
    "resolve",
]
