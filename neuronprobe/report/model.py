"""The Report: one dataclass tree that is the JSON schema, the HTML template input
and what notebooks get (pyinstrument's ``Session`` idea).

Everything neuronprobe produces ends up here. The JSON written by the CLI is
``asdict(report)`` plus nothing; :func:`Report.from_dict` reads it back into the
same objects, so a saved JSON re-renders the HTML and feeds ``diff``.

Rules for this module: plain dataclasses, concrete type hints (``int``, ``float``,
``str``, ``bool``, ``list[X]``, ``dict[str, X]``, ``X | None`` and nested
dataclasses), JSON-native values only (no numpy scalars, no tensors), and
defaults on every field added after schema 1 so that older reports still load.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Union

from neuronprobe.audit.model import AuditSection
from neuronprobe.errors import ReportFormatError

# 2: findings and op rows carry a phase, summary.phases, report.train (training step). 1 still loads.
SCHEMA_VERSION = 2

# The closed set of verdicts, in order of severity (least severe first).
VERDICTS: tuple[str, ...] = (
    "lowered",
    "decomposed",
    "cpu_fallback",
    "dynamic_shape",
    "control_flow",
    "compile_error",
)
SUPPORTED_VERDICTS: frozenset[str] = frozenset({"lowered", "decomposed"})
PROBLEM_VERDICTS: tuple[str, ...] = tuple(v for v in VERDICTS if v not in SUPPORTED_VERDICTS)

VERDICT_LEGEND: dict[str, str] = {
    "lowered": "has a Neuron lowering and compiles into the device graph",
    "decomposed": "a composite op whose parts all lower; compiles into the device graph",
    "cpu_fallback": "no lowering: runs on the host, with a device-to-host and a host-to-device copy per call, and splits the device graph",
    "dynamic_shape": "output shape depends on tensor values; a static Neuron graph cannot hold it",
    "control_flow": "a Python branch on tensor values; the traced graph freezes one branch or the capture breaks",
    "compile_error": "the Neuron compiler rejects it (dtype or operation not supported on the target)",
}

ORIGINS: tuple[str, ...] = ("predicted", "observed")

# Where in a training step an op or finding happens; an inference analysis is all "forward".
PHASES: tuple[str, ...] = ("forward", "backward", "optimizer", "loop")


@dataclass
class OpSummary:
    """One row of the op inventory: an aten overload and what happens to it."""

    op: str  # dispatcher name, e.g. "aten::index_put_" or "aten::add.Tensor"
    count: int
    verdict: str
    rule: str = ""
    reason: str = ""
    dtypes: list[str] = field(default_factory=list)
    example_shapes: list[str] = field(default_factory=list)
    modules: list[str] = field(default_factory=list)
    phase: str = "forward"  # schema 2: forward | backward | optimizer | loop


@dataclass
class Finding:
    """A problem at a place in the user's code, with what to do about it."""

    op: str
    verdict: str
    file: str | None
    line: int | None
    module: str | None
    message: str
    fix: str
    rule: str
    ncc_code: str | None = None
    source_line: str | None = None
    count: int = 1
    origin: str = "predicted"  # "predicted" (support table) or "observed" (live SDK)
    bytes_per_call: int = 0  # host<->device bytes per forward, for cpu_fallback
    shapes: str = ""
    phase: str = "forward"  # schema 2: forward | backward | optimizer | loop (a host read in the training loop)


@dataclass
class GraphBreak:
    """A place where dynamo had to stop the graph, with its reason."""

    reason: str
    file: str | None = None
    line: int | None = None
    source_line: str | None = None
    count: int = 1


@dataclass
class PhaseSummary:
    """The summary of one phase of a training step."""

    ops_total: int = 0
    support_percentage: float = 100.0
    counts: dict[str, int] = field(default_factory=dict)
    findings: int = 0


@dataclass
class Summary:
    ops_total: int = 0  # aten op calls captured (graph nodes)
    distinct_ops: int = 0
    support_percentage: float = 100.0  # share of op calls that are lowered or decomposed
    counts: dict[str, int] = field(default_factory=dict)  # op calls per verdict
    findings_total: int = 0
    device_graphs: int = 1  # graphs the forward splits into on the device
    fallback_bytes_per_call: int = 0
    graph_breaks: int = 0
    phases: dict[str, PhaseSummary] = field(default_factory=dict)  # schema 2: per phase, phases with ops only


@dataclass
class TrainInfo:
    """How the training step was built and what its loop costs (``--train``)."""

    loss: str = ""  # what was differentiated: "train_step()", "the sum of the outputs", ...
    optimizer: str = ""  # e.g. "torch.AdamW (for-loop)"
    train_step: bool = False  # the model file's own train_step() ran
    host_syncs_per_step: int = 0  # host reads per step (each one a device sync)
    graphs_per_step: int = 1  # graph executions per step, host-read cuts included
    seconds: float = 0.0  # the training-step capture
    # observed on the XLA device (--backend xla-cpu): one step's executed graphs, host reads, compiles
    observed_graphs_per_step: int | None = None
    observed_host_syncs_per_step: int | None = None
    observed_compiles: int | None = None


@dataclass
class BackendInfo:
    name: str = "static"  # "static" | "neuron"
    kind: str = "static"  # "static" | "xla" | "native"
    versions: dict[str, str] = field(default_factory=dict)
    detail: str = ""  # what was detected, in words
    fake: bool = False  # True when the "SDK" is the test fake
    # live backend only: each SDK step (analyze, trace, run) -> "ok 2.1s" | "failed: ..." | "timeout after 600s"
    steps: dict[str, str] = field(default_factory=dict)
    # torch_neuronx.analyze's own "support_percentage", as a number (None when analyze did not run)
    observed_support_percentage: float | None = None


@dataclass
class SupportTableInfo:
    version: str = ""
    target: str = ""
    provenance: list[str] = field(default_factory=list)


@dataclass
class CaptureInfo:
    method: str = ""  # "export", "export+dynamo", "dynamo"
    export_error: str | None = None
    seconds: float = 0.0
    nodes: int = 0
    # How the model was run for capture (issue 12): "meta", "fake", "cpu-shrunk", "eager" (a
    # model given with real weights), or "none" when every way failed; and why each earlier way failed.
    strategy: str = ""
    strategy_reasons: list[StrategyReason] = field(default_factory=list)


@dataclass
class StrategyReason:
    """One capture strategy that was tried and failed, with the root error it failed on."""

    strategy: str
    reason: str


@dataclass
class RunMetadata:
    """Where and how the run happened; the key a nightly baseline is matched on."""

    tool_version: str = ""
    time: str = ""
    host: str = ""
    command_line: str = ""
    git_commit: str | None = None
    git_dirty: bool | None = None
    python: str = ""
    platform: str = ""
    dtype: str = ""
    batch_size: int | None = None
    seq_len: int | None = None
    model_source: str = ""  # the model file path or the hf: spec


@dataclass
class Limitation:
    """Something neuronprobe could not analyse, and why."""

    what: str
    why: str


# --- recompiles (issue: recompile detection) ---------------------------------


@dataclass
class PolicyPrediction:
    graphs: int
    compile_seconds: float = 0.0
    first_seen: list[int] = field(default_factory=list)  # call index where each new graph is first needed
    note: str = ""
    beyond_last: int = 0  # bucketed: calls longer than the last edge (no graph serves them; not in graphs)


@dataclass
class ObservedCompiles:
    compiles: int = 0
    graph_hashes: list[str] = field(default_factory=list)  # one per compile: op sequence, shapes ignored
    source: str = ""  # "dynamo-cpu", "torch_xla", "neuron-cache", "native-metrics"
    shapes_run: int = 0
    matches_static: bool | None = None
    note: str = ""
    seconds: float = 0.0  # compile time measured in total (live backend); 0 when not measured
    compiled_shapes: list[str] = field(default_factory=list)  # the signature each compile was for


@dataclass
class RecompileCause:
    reason: str
    # shape causes: recompiles of the whole stream this input dim triggers;
    # causes where the graph changes with the shape: extra graph variants over the stream
    count: int = 1
    file: str | None = None
    line: int | None = None
    graph_changes_with_shape: bool = False
    source_line: str | None = None
    kind: str = "shape"  # "shape" | "specialization" | "branch" | "graph_change" | "guard"
    input: str | None = None  # the input whose size is involved
    dim: int | None = None
    fix: str = ""
    observed: int | None = None  # CPU dynamo recompiles with this reason (None: not checked)


@dataclass
class RecompileSection:
    calls: int = 0
    distinct_signatures: int = 0
    predicted: dict[str, PolicyPrediction] = field(default_factory=dict)
    observed: ObservedCompiles | None = None
    causes: list[RecompileCause] = field(default_factory=list)
    buckets: list[int] = field(default_factory=list)
    compile_seconds_per_graph: float = 0.0
    source: str = ""  # where the traffic came from
    compile_seconds_source: str = ""  # "--compile-seconds", "measured", or "estimate"
    cpu_evidence: ObservedCompiles | None = None  # dynamo on CPU, when `observed` is a live backend's count


# --- buckets (issue: shape buckets) ------------------------------------------


@dataclass
class Overhead:
    tokens: float  # padded-token overhead, % of real tokens
    attention: float  # attention-cost (x^2) overhead, % of real attention cost


@dataclass
class CurvePoint:
    k: int
    edges: list[int]
    overhead: Overhead
    cost: float = 0.0  # total padding cost, sum of f(bucket) - f(length), in the cost model's units
    objective: float | None = None  # runtime + compile cost, when --compile-seconds was given


@dataclass
class Baseline:
    name: str
    edges: list[int]
    overhead: Overhead
    graphs: int = 0
    beyond_last: int = 0
    cost: float = 0.0  # total padding cost under the proposal's cost model
    optimal_at_same_k: Overhead | None = None  # the optimum with as many buckets (graphs)


@dataclass
class BucketProposal:
    """The answer of ``propose_buckets``: optimal edges, the curve and the baselines."""

    edges: list[int]
    k: int
    cost_model: str
    overhead: Overhead
    cost: float = 0.0
    fit: str = "inclusive"
    max_len: int = 0
    curve: list[CurvePoint] = field(default_factory=list)
    baselines: list[Baseline] = field(default_factory=list)
    beyond_last: int = 0
    n_lengths: int = 0
    n_distinct: int = 0
    notes: list[str] = field(default_factory=list)
    configs: dict[str, str] = field(default_factory=dict)
    histogram: dict[str, list[int]] = field(default_factory=dict)  # {"values": [...], "counts": [...]}
    # holdout keys: fraction, order, fit_lengths, test_lengths, overhead {tokens, attention},
    # beyond_last, baselines {name: {tokens, attention, beyond_last}}
    holdout: dict[str, Any] | None = None
    cost_params: dict[str, float] = field(default_factory=dict)  # {"A": a, "B": b}: f(x) = A*x + B*x^2
    max_buckets: int = 0  # K as requested (k <= K; clamps are in notes)
    multiple_of: int | None = None
    min_bucket: int | None = None
    compile_seconds: float | None = None
    compile_weight: float = 1.0
    chosen_by: str = ""  # "max_buckets" or "runtime+compile"
    source: str = ""  # the length file (and column) or "" for in-memory lengths


# --- live backend and run diffs ----------------------------------------------


@dataclass
class PredictionMismatch:
    op: str
    predicted: str  # verdict from the support table
    observed: str  # verdict from the live SDK
    file: str | None = None
    line: int | None = None
    detail: str = ""


@dataclass
class PredictionDiff:
    predicted_ok_observed_failing: list[PredictionMismatch] = field(default_factory=list)
    predicted_failing_observed_ok: list[PredictionMismatch] = field(default_factory=list)


@dataclass
class FindingChange:
    """A finding that appeared, disappeared or moved between two runs (see report/diff.py)."""

    op: str
    verdict: str
    file: str | None
    line: int | None
    message: str = ""
    base_line: int | None = None  # for a moved finding: its line in the baseline
    count: int = 1
    source_line: str | None = None


@dataclass
class RunDiff:
    """What changed between a baseline run and this one."""

    base_label: str = ""
    new_label: str = ""
    comparable: bool = True  # same backend, target and compiler version
    not_comparable_reason: str = ""
    new_findings: list[FindingChange] = field(default_factory=list)
    removed_findings: list[FindingChange] = field(default_factory=list)
    support_percentage_change: float = 0.0
    graphs_change: int = 0  # summary.device_graphs, new minus base
    padding_overhead_change: float | None = None  # buckets.overhead.tokens, percentage points
    version_changes: dict[str, list[str | None]] = field(default_factory=dict)
    regressions: list[str] = field(default_factory=list)  # empty unless comparable: only these gate
    # the same finding at a shifted line (code edited above it): neither new nor removed
    moved_findings: list[FindingChange] = field(default_factory=list)
    # metric name -> [base, new]; None where a run has no value (e.g. no traffic, so no buckets)
    metrics: dict[str, list[float | None]] = field(default_factory=dict)
    # run metadata that changed (git commit, dtype, batch size, ...): context, never gated
    metadata_changes: dict[str, list[str | None]] = field(default_factory=dict)
    # what would have been regressions, had the runs been comparable: reported, never gated
    ungated_regressions: list[str] = field(default_factory=list)

    @property
    def has_regression(self) -> bool:
        """True when the gate should fail: comparable runs and at least one regression."""
        return self.comparable and bool(self.regressions)


# --- the report ----------------------------------------------------------------


@dataclass
class Report:
    model: str
    target: str
    backend: BackendInfo = field(default_factory=BackendInfo)
    summary: Summary = field(default_factory=Summary)
    ops: list[OpSummary] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    graph_breaks: list[GraphBreak] = field(default_factory=list)
    capture: CaptureInfo = field(default_factory=CaptureInfo)
    support_table: SupportTableInfo = field(default_factory=SupportTableInfo)
    metadata: RunMetadata = field(default_factory=RunMetadata)
    not_analysed: list[Limitation] = field(default_factory=list)
    recompiles: RecompileSection | None = None
    buckets: BucketProposal | None = None
    prediction_diff: PredictionDiff | None = None
    baseline_diff: RunDiff | None = None
    schema_version: int = SCHEMA_VERSION
    # `analyze --audit PATH`: the CUDA-assumption audit of the model's repository (issue 14)
    audit: AuditSection | None = None
    train: TrainInfo | None = None  # schema 2: set by --train

    # -- verdict helpers ---------------------------------------------------
    @property
    def verdict(self) -> str:
        """One word for the banner: ``runs``, ``runs_with_fallbacks``, ``will_not_compile``,
        or ``not_analysed`` when capture failed and found no ops at all (never a green verdict)."""
        verdicts = {f.verdict for f in self.findings}
        if verdicts & {"compile_error", "dynamic_shape", "control_flow"}:
            return "will_not_compile"
        if "cpu_fallback" in verdicts:
            return "runs_with_fallbacks"
        if self.capture.nodes == 0 and self.capture.export_error:
            return "not_analysed"
        return "runs"

    def __repr__(self) -> str:
        """A one-line summary for the REPL: the whole tree is in ``to_json()`` and the notebook view."""
        s = self.summary
        return (
            f"<neuronprobe Report {self.model!r} on {self.target}: {self.verdict}, "
            f"{len(self.findings)} finding(s), support {s.support_percentage:.1f}% of {s.ops_total} op calls, "
            f"backend {self.backend.name}>"
        )

    def findings_with(self, verdicts: set[str] | frozenset[str]) -> list[Finding]:
        return [f for f in self.findings if f.verdict in verdicts]

    # -- JSON ------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False) + "\n"

    @classmethod
    def from_dict(cls, data: Any) -> Report:
        if not isinstance(data, dict):
            raise ReportFormatError("the report is not a JSON object")
        version = data.get("schema_version")
        if not isinstance(version, int) or version > SCHEMA_VERSION or version < 1:
            raise ReportFormatError(f"unsupported report schema_version {version!r} (this neuronprobe reads 1..{SCHEMA_VERSION})")
        return build_typed(cls, data, "report")

    @classmethod
    def from_json(cls, text: str) -> Report:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ReportFormatError(f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from exc
        except RecursionError:
            raise ReportFormatError("JSON nested too deep to be a report") from None
        try:
            return cls.from_dict(data)
        except RecursionError:
            raise ReportFormatError("JSON nested too deep to be a report") from None

    # -- notebooks -------------------------------------------------------------
    def _repr_html_(self) -> str:
        from neuronprobe.report.html import render_html

        return render_html(self, embedded=True)

    def ops_df(self) -> Any:
        from neuronprobe.report.frames import ops_df

        return ops_df(self)

    def findings_df(self) -> Any:
        from neuronprobe.report.frames import findings_df

        return findings_df(self)

    def recompiles_df(self) -> Any:
        from neuronprobe.report.frames import recompiles_df

        return recompiles_df(self)

    def buckets_df(self) -> Any:
        from neuronprobe.report.frames import buckets_df

        return buckets_df(self)


def build_typed(tp: Any, value: Any, where: str) -> Any:
    """Rebuild a typed value (a dataclass tree) from JSON data, checking types as it goes.

    ``where`` names the position for error messages (``report.findings[3].line``).
    Raises ReportFormatError on the first mismatch.
    """
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if origin in (Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return build_typed(arg, value, where)
            except ReportFormatError as exc:
                errors.append(str(exc))
        raise ReportFormatError(errors[0] if errors else f"{where}: unexpected null")
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if not isinstance(value, dict):
            raise ReportFormatError(f"{where}: expected an object, got {type(value).__name__}")
        hints = typing.get_type_hints(tp)
        kwargs = {}
        for f in dataclasses.fields(tp):
            if f.name in value:
                kwargs[f.name] = build_typed(hints[f.name], value[f.name], f"{where}.{f.name}")
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ReportFormatError(f"{where}: missing field '{f.name}'")
        return tp(**kwargs)
    if origin is list:
        if not isinstance(value, list):
            raise ReportFormatError(f"{where}: expected a list, got {type(value).__name__}")
        (item,) = typing.get_args(tp) or (Any,)
        return [build_typed(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ReportFormatError(f"{where}: expected an object, got {type(value).__name__}")
        _, item = typing.get_args(tp) or (str, Any)
        return {str(k): build_typed(item, v, f"{where}.{k}") for k, v in value.items()}
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ReportFormatError(f"{where}: expected a number, got {type(value).__name__}")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ReportFormatError(f"{where}: expected an integer, got {type(value).__name__}")
        return value
    if tp in (str, bool):
        if not isinstance(value, tp):
            raise ReportFormatError(f"{where}: expected {tp.__name__}, got {type(value).__name__}")
        return value
    raise ReportFormatError(f"{where}: cannot read type {tp!r}")


def load_report(path: str) -> Report:
    """Read a report JSON written by neuronprobe; a clear ReportFormatError otherwise."""
    import os

    if not os.path.exists(path):
        raise ReportFormatError(f"{path}: no such report file")
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise ReportFormatError(f"{path}: cannot read the report ({exc})") from exc
    try:
        return Report.from_json(text)
    except ReportFormatError as exc:
        raise ReportFormatError(f"{path}: {exc}") from exc
