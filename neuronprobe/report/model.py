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
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

from neuronprobe.audit.model import AuditSection
from neuronprobe.errors import InputError, ReportFormatError
from neuronprobe.report.reference_model import ReferenceComparison, TrainParity
from neuronprobe.report.serving_model import ServingPlan
from neuronprobe.rules import RuleRegistry, UnknownRule, lookup
from neuronprobe.vocabulary import (
    AutoCast,
    CaptureStrategy,
    CauseKind,
    Confirmation,
    Fit,
    LowType,
    Origin,
    OutputKind,
    ParityRun,
    Phase,
    ReferenceBackend,
    ReferenceTensorKind,
    ServedDtype,
    ServingRuntime,
    SourceLocation,
    StepStatus,
    TopVerdict,
    Verdict,
    Word,
    parse_closed,
)

# 2: findings and op rows carry a phase, summary.phases, report.train (training step).
# 3: the top-line verdict and its words are in the JSON; verdicts, origins, phases and kinds are
#    closed sets (vocabulary.py) that from_json checks; backend steps, the bucket histogram and
#    the holdout check are typed objects. 1 and 2 still load (see _upgrade).
# 4: additive, so 1 to 3 load unchanged (a reader of 3 refuses 4 by its version): the verdict set gains
#    ``precision`` (a note: the device computes in a narrower dtype; issue 23), places in notebook cells
#    (``cell``, In [n], on findings, graph breaks, recompile causes, mismatches and changes; issue 28),
#    report.decode, the token-generation and batch buckets with the memory fit per TP degree (issue 24),
#    and two top-line verdicts: ``runs_split`` (a graph break, a host read or a second device graph per
#    call) and ``runs_unobserved`` (the observation that would confirm "runs" was cut short).
# 5: additive, so 1 to 4 load unchanged (a reader of 4 refuses 5 by its version): report.parity, the fp32
#    reference against emulated Neuron precisions (issue 25): drift per module, the first module past the
#    tolerance, logit agreement, and the xla-cpu bf16 run next to the emulation.
#    With it: parity.frozen, a frozen-reference comparison, and parity.train, one training step per precision.
# 6: additive (issue 33): a finding's ``call_chain`` (the model-code frames from the user's entry point down to
#    the line that runs the op) and ``origins`` (every origin that found it: predicted, observed); the summary's
#    ``counts`` are computed from the findings (:func:`verdict_counts`).
#    And support_table.stack (xla | native, issue 36) with the native table's origin and age.
#    And report.serving, vLLM Neuron ladders, the compile bill and the traffic per bucket dimension (issue 37;
#    report/serving_model.py).
SCHEMA_VERSION = 6


@dataclass
class OpSummary:
    """One row of the op inventory: an aten overload and what happens to it."""

    op: str  # dispatcher name, e.g. "aten::index_put_" or "aten::add.Tensor"
    count: int
    verdict: Verdict
    rule: str = ""
    reason: str = ""
    dtypes: list[str] = field(default_factory=list)
    example_shapes: list[str] = field(default_factory=list)
    modules: list[str] = field(default_factory=list)
    phase: Phase = Phase.FORWARD  # schema 2

    def __post_init__(self) -> None:
        self.verdict = Verdict(self.verdict)
        self.phase = Phase(self.phase)


@dataclass
class CallFrame:
    """One frame of model code on the way to a finding's line: ``encoder.py:16 (forward)``."""

    file: str | None
    line: int | None = None
    function: str = ""

    def __str__(self) -> str:
        place = str(SourceLocation(self.file, self.line))
        return f"{place} ({self.function})" if self.function else place


@dataclass
class Finding:
    """A problem at a place in the user's code, with what to do about it."""

    op: str
    verdict: Verdict
    file: str | None
    line: int | None
    module: str | None
    message: str
    fix: str
    rule: str
    ncc_code: str | None = None
    source_line: str | None = None
    count: int = 1
    origin: Origin = Origin.PREDICTED  # the support table, or a live backend
    bytes_per_call: int = 0  # host<->device bytes per forward, for cpu_fallback
    shapes: str = ""
    phase: Phase = Phase.FORWARD  # schema 2 (loop: a host read in the training loop)
    cell: int | None = None  # schema 4: the notebook cell (In [n]) when ``file`` is a cell; see neuronprobe.cells
    # schema 5 (issue 25): a risky low-precision construct, as the parity run's emulation judged it (None: not judged)
    confirmation: Confirmation | None = None
    # schema 6 (issue 33.7): the device's own error text the message was quieted from (a dispatcher dump), empty if none
    detail: str = ""
    # schema 6 (issue 33): the model-code callers of ``file:line``, outermost (the user's entry point) first;
    # empty when the op runs in the entry point itself or the chain is unknown
    call_chain: list[CallFrame] = field(default_factory=list)
    # schema 6: every origin that found this problem at this line (``origin`` is the one whose verdict won:
    # observed over predicted); empty in older reports, read as ``[origin]``
    origins: list[Origin] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.verdict = Verdict(self.verdict)
        self.origin = Origin(self.origin)
        self.phase = Phase(self.phase)
        if self.confirmation is not None:
            self.confirmation = Confirmation(self.confirmation)
        self.origins = [Origin(o) for o in self.origins] or [self.origin]

    @property
    def chain_text(self) -> str:
        """The call chain in one line, for the renderers: ``model.py:11 (forward) > encoder.py:16 (forward)``."""
        return " > ".join(str(f) for f in self.call_chain)

    @property
    def origins_text(self) -> str:
        """``predicted``, ``observed`` or ``predicted+observed``."""
        return "+".join(o.value for o in Origin if o in self.origins)

    @classmethod
    def at(
        cls,
        rule: str,
        site: SourceLocation,
        op: str,
        message: str,
        *,
        verdict: Verdict | str | None = None,
        fix: str | None = None,
        module: str | None = None,
        source_line: str | None = None,
        ncc_code: str | None = None,
        count: int = 1,
        origin: Origin = Origin.PREDICTED,
        bytes_per_call: int = 0,
        shapes: str = "",
        phase: Phase = Phase.FORWARD,
        detail: str = "",
        registry: RuleRegistry | None = None,
    ) -> Finding:
        """A finding of the registered rule ``rule`` at ``site``: how the code makes every finding.

        ``verdict`` and ``fix`` default to the rule's (``neuronprobe/rules/registry.py``); a site
        that knows a better fix for this case passes it. A rule id the registry does not
        know, or a verdict the rule does not give, is an :class:`~neuronprobe.rules.UnknownRule`
        (a bug, exit 3). ``registry``: the analysis's rules when a user's ``--rules`` file adds ids
        (``support.RuleSet.registry``; default: the bundled rules). :meth:`Report.from_dict` builds
        findings directly: a saved report may name the rules of another version or of a user's file.
        """
        registered = lookup(rule, verdict, registry)
        chosen = verdict if verdict is not None else registered.verdict
        if chosen is None:
            raise UnknownRule(f"rule {rule!r} is an audit rule ({registered.source}): a finding cannot carry it")
        return cls(
            op=op,
            verdict=Verdict(chosen),
            file=site.file,
            line=site.line,
            module=module,
            message=message,
            fix=registered.fix if fix is None else fix,
            rule=rule,
            ncc_code=ncc_code,
            source_line=source_line,
            count=count,
            origin=origin,
            bytes_per_call=bytes_per_call,
            shapes=shapes,
            phase=phase,
            cell=site.cell,
            detail=detail,
        )

    @property
    def location(self) -> SourceLocation:
        return SourceLocation(self.file, self.line, self.cell)


@dataclass
class GraphBreak:
    """A place where dynamo had to stop the graph, with its reason."""

    reason: str
    file: str | None = None
    line: int | None = None
    source_line: str | None = None
    count: int = 1
    cell: int | None = None  # schema 4

    @property
    def location(self) -> SourceLocation:
        return SourceLocation(self.file, self.line, self.cell)


@dataclass
class PhaseSummary:
    """The summary of one phase of a training step."""

    ops_total: int = 0
    support_percentage: float = 100.0
    counts: dict[Verdict, int] = field(default_factory=dict)
    findings: int = 0


@dataclass
class Summary:
    ops_total: int = 0  # aten op calls captured (graph nodes)
    distinct_ops: int = 0
    support_percentage: float = 100.0  # share of op calls that are lowered or decomposed
    counts: dict[Verdict, int] = field(default_factory=dict)  # op calls per verdict
    findings_total: int = 0
    device_graphs: int = 1  # graphs the forward splits into on the device
    fallback_bytes_per_call: int = 0
    graph_breaks: int = 0
    phases: dict[Phase, PhaseSummary] = field(default_factory=dict)  # schema 2: per phase, phases with ops only


@dataclass
class TrainInfo:
    """How the training step was built and what its loop costs (``--train``)."""

    loss: str = ""  # what was differentiated: "train_step()", "the sum of the outputs", ...
    optimizer: str = ""  # e.g. "torch.AdamW (for-loop)"
    train_step: bool = False  # the model file's own train_step() ran
    # host reads per step: device-to-host transfers (.item(), .cpu(), a truth test), each a device sync that
    # first executes the pending graph (torch-xla's TransferFromDeviceTime count)
    host_syncs_per_step: int = 0
    graphs_per_step: int = 1  # graph executions per step, host-read cuts included (torch-xla's ExecuteTime count)
    seconds: float = 0.0  # the training-step capture
    # observed on the XLA device (--backend xla-cpu): one step's graph executions (ExecuteTime), host reads
    # (TransferFromDeviceTime), compiles
    observed_graphs_per_step: int | None = None
    observed_host_syncs_per_step: int | None = None
    observed_compiles: int | None = None
    # schema 6 (issue 33): host-to-device uploads per step (torch.tensor(..., device=), a CPU tensor's .to(device)):
    # copies, not syncs, and no graph execution of their own (torch-xla's TransferToDeviceTime count)
    uploads_per_step: int = 0
    observed_uploads_per_step: int | None = None


@dataclass
class BackendStep:
    """How one live-backend SDK step (analyze, trace, run, observe) ended."""

    status: StepStatus
    seconds: float | None = None  # time taken (ok), or the limit it hit (timeout); None: not measured
    detail: str = ""  # what it checked (ok), or the error (failed, died), or why it was skipped

    def __post_init__(self) -> None:
        self.status = StepStatus(self.status)

    def __str__(self) -> str:
        """The one-line form: ``ok 2.1s``, ``timeout after 600s``, ``failed: <error>``."""
        if self.status is StepStatus.OK:
            head = "ok" if self.seconds is None else f"ok {self.seconds:.1f}s"
            return f"{head}: {self.detail}" if self.detail else head
        if self.status is StepStatus.TIMEOUT and self.seconds is not None:
            return f"timeout after {self.seconds:g}s" + (f": {self.detail}" if self.detail else "")
        return f"{self.status}: {self.detail}" if self.detail else str(self.status)


@dataclass
class BackendInfo:
    name: str = "static"  # "static" | "neuron"
    kind: str = "static"  # "static" | "xla" | "native"
    versions: dict[str, str] = field(default_factory=dict)
    detail: str = ""  # what was detected, in words
    fake: bool = False  # True when the "SDK" is the test fake
    # live backend only: how each SDK step (analyze, trace, run) ended (schema 3: typed, was prose)
    steps: dict[str, BackendStep] = field(default_factory=dict)
    # torch_neuronx.analyze's own "support_percentage", as a number (None when analyze did not run)
    observed_support_percentage: float | None = None


@dataclass
class SupportTableInfo:
    version: str = ""
    target: str = ""
    provenance: list[str] = field(default_factory=list)
    # schema 6 (issue 36): the software stack analysed, "xla" (torch-neuronx 2.9, torch-xla) or "native" (TorchNeuron,
    # trn2/trn3); reports from before it analysed the XLA stack. For the native stack, which table answered
    # ("bundled" | "installed" | "file") and how old its facts were on the day of the run.
    stack: str = "xla"
    origin: str = ""
    age_days: int | None = None
    mode: str = ""  # schema 6, native stack: "eager" or "compile" (torch.compile(backend="neuron"), --native-mode)


@dataclass
class CaptureInfo:
    method: str = ""  # "export", "export+dynamo", "dynamo"
    export_error: str | None = None
    seconds: float = 0.0
    nodes: int = 0
    # How the model was run for capture (issue 12; None in reports from before it), and why each
    # earlier way failed.
    strategy: CaptureStrategy | None = None
    strategy_reasons: list[StrategyReason] = field(default_factory=list)
    # hf: only: the loader's family recipes and input repairs (function names) that made the captured inputs,
    # in the strategy that captured (issue 27; empty in older reports and for model files).
    input_recipes: list[str] = field(default_factory=list)
    input_repairs: list[str] = field(default_factory=list)
    # Why dynamo stopped partway through the forward (an exception's first line), None when it ran to its end
    # (or in reports from before issue 27): the capture holds only the ops before the stop.
    stopped: str | None = None
    # schema 6 (issue 33): why the capture failed the plausibility test (its ops read too little of the
    # module's parameters), None when it passed; the higher-order regions it entered ("cond (4 ops) at m.py:9").
    incomplete: str | None = None
    regions: list[str] = field(default_factory=list)
    entry: str | None = None  # schema 6: the method analysed when it is not forward (ENTRY, --entry)

    def __post_init__(self) -> None:
        # "" was written before the strategy became a closed set (unreleased schema-3 reports): not recorded.
        self.strategy = CaptureStrategy(self.strategy) if self.strategy else None


@dataclass
class StrategyReason:
    """One capture strategy that was tried and failed, with the root error it failed on."""

    strategy: CaptureStrategy
    reason: str

    def __post_init__(self) -> None:
        self.strategy = CaptureStrategy(self.strategy)


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
    # schema 6 (issue 33.8): the text ``why`` was quieted from (a PyTorch internal assertion, a dispatcher dump), for --debug readers
    detail: str = ""


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
    kind: CauseKind = CauseKind.SHAPE
    input: str | None = None  # the input whose size is involved
    dim: int | None = None
    fix: str = ""
    observed: int | None = None  # CPU dynamo recompiles with this reason (None: not checked)
    cell: int | None = None  # schema 4

    def __post_init__(self) -> None:
        self.kind = CauseKind(self.kind)

    @property
    def location(self) -> SourceLocation:
        return SourceLocation(self.file, self.line, self.cell)


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
class Histogram:
    """The length distribution: distinct lengths and their counts, or bins when there are many."""

    values: list[int] = field(default_factory=list)  # each length, or each bin's upper end
    counts: list[int] = field(default_factory=list)
    bin_width: int | None = None  # None: values are the exact distinct lengths (schema 2: a one-element list)


@dataclass
class HoldoutScore:
    """A ladder scored on the held-out lengths."""

    tokens: float  # padded-token overhead, %
    attention: float  # attention-cost overhead, %
    beyond_last: int = 0


@dataclass
class Holdout:
    """The proposal fitted on the first part of the lengths and scored on the rest (``--holdout``)."""

    fraction: float  # the share held out
    order: str  # "time order" or "file order (no timestamp column)"
    fit_lengths: int
    test_lengths: int
    overhead: Overhead | None = None  # the proposed edges on the held-out part
    beyond_last: int = 0
    baselines: dict[str, HoldoutScore] = field(default_factory=dict)


@dataclass
class BucketProposal:
    """The answer of ``propose_buckets``: optimal edges, the curve and the baselines."""

    edges: list[int]
    k: int
    cost_model: str
    overhead: Overhead
    cost: float = 0.0
    fit: Fit = Fit.INCLUSIVE
    max_len: int = 0
    curve: list[CurvePoint] = field(default_factory=list)
    baselines: list[Baseline] = field(default_factory=list)
    beyond_last: int = 0
    n_lengths: int = 0
    n_distinct: int = 0
    notes: list[str] = field(default_factory=list)
    configs: dict[str, str] = field(default_factory=dict)
    histogram: Histogram = field(default_factory=Histogram)
    holdout: Holdout | None = None  # schema 3: typed (was a free-form object)
    cost_params: dict[str, float] = field(default_factory=dict)  # {"A": a, "B": b}: f(x) = A*x + B*x^2
    max_buckets: int = 0  # K as requested (k <= K; clamps are in notes)
    multiple_of: int | None = None
    min_bucket: int | None = None
    compile_seconds: float | None = None
    compile_weight: float = 1.0
    chosen_by: str = ""  # "max_buckets" or "runtime+compile"
    source: str = ""  # the length file (and column) or "" for in-memory lengths

    def __post_init__(self) -> None:
        self.fit = Fit(self.fit)


# --- decode buckets (issue 24) --------------------------------------------------


@dataclass
class DecodeLadder:
    """One token-generation ladder scored on the decode positions (a proposal, a curve point or a baseline)."""

    name: str
    edges: list[int]
    graphs: int  # compiled decode graphs at batch 1 (vllm-neuron: the max_model_len fallback is the last edge)
    kv_overhead: float  # padded KV tokens read / real KV tokens - 1, in %
    step_overhead: float | None = None  # modelled step time / step time at the real lengths - 1, in %; None without a step model
    beyond_last: int = 0  # decode steps longer than the last edge: no graph serves them
    optimal_kv_overhead: float | None = None  # the exact optimum with as many graphs, for a baseline


@dataclass
class BatchPlan:
    """Batch buckets crossed with sequence buckets, scored on the replayed continuous-batching steps."""

    name: str
    batch_buckets: list[int]
    seq_buckets: list[int]
    graphs: int  # |batch buckets| x |sequence buckets| (vllm-neuron: the fallback is among the sequence buckets)
    kv_overhead: float  # padded (batch bucket x seq bucket) KV reads / real reads - 1, in %
    step_overhead: float | None = None
    method: str = ""  # "exact" (one ladder free, the other fixed) or "heuristic" (alternating exact 1-D solves)


@dataclass
class DecodeTimeline:
    """The continuous-batching replay: per step the batch size and the longest required length in it."""

    requests: int
    steps: int
    duration_s: float  # from the first arrival to the last step's end
    max_batch: int
    step_seconds_source: str  # "--tokens-per-second", "--step-times" or "assumed"
    mean_batch: float
    stride: int = 1  # the stored per-step lists keep every stride-th step (the maximum over it for lengths)
    seconds: list[float] = field(default_factory=list)
    batch: list[int] = field(default_factory=list)
    longest: list[int] = field(default_factory=list)
    bucket: list[int] = field(default_factory=list)  # the proposed plan's sequence bucket at that step
    batch_bucket: list[int] = field(default_factory=list)  # the proposed plan's batch bucket at that step
    batch_histogram: dict[str, int] = field(default_factory=dict)  # batch size -> steps


@dataclass
class MemoryRow:
    """Bytes per NeuronCore at one tensor-parallel degree."""

    tp_degree: int
    weights_bytes: int
    kv_bytes: int  # KV cache per rank at the largest decode bucket x the largest batch
    reserve_bytes: int
    total_bytes: int
    hbm_bytes: int
    fits: bool
    kv_heads_per_rank: int
    kv_sharding: str  # "divided", "replicated" or "padded" (NxD Inference attention/gqa.py)
    longest_bucket: int | None = None  # the longest bucket that fits at the largest batch
    largest_batch: int | None = None  # the largest batch that fits at the longest bucket


@dataclass
class MemoryFit:
    """Whether the model fits per core at each tensor-parallel degree the target allows."""

    model: str
    target: str
    hbm_bytes_per_core: int
    dtype: str
    layers: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    parameters: int
    kv_bytes_per_token: int  # K and V, every layer, all KV heads, one sequence (before sharding)
    bucket: int  # the largest token-generation bucket the rows are computed for
    batch: int  # the largest batch bucket
    reserve_bytes: int
    reserve_source: str
    rows: list[MemoryRow] = field(default_factory=list)
    smallest_tp: int | None = None  # None: fits at no degree the target allows
    replicated: list[str] = field(default_factory=list)  # parts every rank holds whole
    notes: list[str] = field(default_factory=list)


@dataclass
class DecodeScore:
    """A ladder scored on the held-out requests."""

    kv_overhead: float
    step_overhead: float | None = None
    beyond_last: int = 0


@dataclass
class DecodeHoldout:
    fraction: float
    order: str  # "time order" or "file order (no timestamp column)"
    fit_requests: int
    test_requests: int
    ladders: dict[str, DecodeScore] = field(default_factory=dict)  # "proposed" and each baseline
    # the batch plans on the held-out requests replayed the same way (--max-batch with timestamps)
    batch_plans: dict[str, DecodeScore] = field(default_factory=dict)


@dataclass
class DecodeProposal:
    """The answer of ``propose_decode_buckets``: token-generation (and batch) buckets for real traffic."""

    runtime: ServingRuntime
    fit: Fit
    edges: list[int]
    k: int
    kv_overhead: float
    step_overhead: float | None = None
    speculation_length: int = 0
    max_len: int = 0  # the last edge (nxdi: max_length; vllm-neuron: max_model_len, the fallback graph)
    graphs: int = 0
    requests: int = 0
    decode_steps: int = 0  # decode positions, each weighted once (batch 1)
    distinct_positions: int = 0
    beyond_last: int = 0
    step_model: str = ""  # how the step time is modelled, in words
    step_params: dict[str, float] = field(default_factory=dict)  # per_step, per_token, per_token2 in the model's units
    curve: list[DecodeLadder] = field(default_factory=list)
    baselines: list[DecodeLadder] = field(default_factory=list)
    histogram: Histogram = field(default_factory=Histogram)  # required lengths of the decode steps
    holdout: DecodeHoldout | None = None
    timeline: DecodeTimeline | None = None
    batch_plan: BatchPlan | None = None
    batch_baselines: list[BatchPlan] = field(default_factory=list)
    max_graphs: int = 0
    memory: MemoryFit | None = None
    configs: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    source: str = ""
    max_buckets: int = 0

    def __post_init__(self) -> None:
        self.runtime = ServingRuntime(self.runtime)
        self.fit = Fit(self.fit)

    def frames(self) -> dict[str, Any]:
        """pandas DataFrames of the proposal: curve, baselines, batch, memory, timeline (see report/decode_frames.py)."""
        from neuronprobe.report.decode_frames import decode_frames

        return decode_frames(self, MemoryRow)


# --- live backend and run diffs ----------------------------------------------


@dataclass
class PredictionMismatch:
    op: str
    predicted: Verdict  # verdict from the support table
    observed: Verdict  # verdict from the live SDK
    file: str | None = None
    line: int | None = None
    detail: str = ""
    cell: int | None = None  # schema 4

    def __post_init__(self) -> None:
        self.predicted = Verdict(self.predicted)
        self.observed = Verdict(self.observed)


@dataclass
class PredictionDiff:
    predicted_ok_observed_failing: list[PredictionMismatch] = field(default_factory=list)
    predicted_failing_observed_ok: list[PredictionMismatch] = field(default_factory=list)


@dataclass
class FindingChange:
    """A finding that appeared, disappeared or moved between two runs (see report/diff.py)."""

    op: str
    verdict: Verdict
    file: str | None
    line: int | None
    message: str = ""
    base_line: int | None = None  # for a moved finding: its line in the baseline
    count: int = 1
    source_line: str | None = None
    cell: int | None = None  # schema 4

    def __post_init__(self) -> None:
        self.verdict = Verdict(self.verdict)

    @property
    def location(self) -> SourceLocation:
        return SourceLocation(self.file, self.line, self.cell)


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
class PrecisionInfo:
    """One emulated Neuron precision (``neuronprobe.parity.precision.Precision``, as JSON)."""

    auto_cast: AutoCast
    auto_cast_type: LowType
    dtype: ServedDtype
    mixed_precision_accumulation: bool
    label: str  # short words for tables: "matmult/bf16 fp32 mpa-on"
    flags: str = ""  # the neuronx-cc flags and the served dtype that give it

    def __post_init__(self) -> None:
        self.auto_cast = AutoCast(self.auto_cast)
        self.auto_cast_type = LowType(self.auto_cast_type)
        self.dtype = ServedDtype(self.dtype)


@dataclass
class ModuleDrift:
    """One module call's output against the fp32 reference, in execution order (completion order)."""

    module: str  # module path, "" for the model itself; "path (call 2)" for a module called again
    module_type: str
    file: str | None  # the user's line that called the module
    line: int | None
    max_abs: float  # max |emulated - reference| over the output's floating-point tensors
    rel: float  # max_abs / max |reference| (NxD Inference's embedding rule: |a - e| <= atol + rtol * max|e|)
    ulps: float  # max_abs in units in the last place of the precision's low type at max |reference|
    nonfinite: int  # elements non-finite here but finite in the reference
    exceeds: bool  # past the tolerance (or a new non-finite value)
    dominant_op: str | None = None  # the aten op that adds the most error inside this call, where measured
    cell: int | None = None  # a notebook cell (In [n]) when ``file`` is a cell

    @property
    def where(self) -> SourceLocation:
        return SourceLocation(self.file, self.line, self.cell)


@dataclass
class TopKCheck:
    """NxD Inference's logit tolerance for the top-k tokens of the reference (k None: every token)."""

    k: int | None
    atol: float
    rtol: float
    checked: int  # logits compared
    failed: int  # of them, outside atol + rtol * |reference|
    worst_position: int | None = None  # the first position with a failure

    @property
    def passed(self) -> bool:
        return self.failed == 0


@dataclass
class OutputAgreement:
    """The model's final output read as what it is: next-token logits or class scores."""

    kind: OutputKind
    rows: int  # positions (language model: batch x positions) or examples (classifier)
    top1_same: int  # rows whose top-1 is the reference's
    topk: list[TopKCheck] = field(default_factory=list)  # language models
    greedy_divergence: int | None = None  # first position (teacher-forced) whose greedy token differs; None: none does
    divergence_gap: float | None = None  # the reference's gap between its top two logits there
    divergence_tie: bool = False  # that gap is within NxD Inference's divergence_difference_tol (0.001): a tie

    def __post_init__(self) -> None:
        self.kind = OutputKind(self.kind)


@dataclass
class PrecisionRun:
    """The model under one precision against the fp32 reference."""

    precision: PrecisionInfo
    run: ParityRun = ParityRun.EMULATED
    modules: list[ModuleDrift] = field(default_factory=list)  # execution order; empty for a whole-output run (xla-cpu)
    first_exceeding: ModuleDrift | None = None  # the first module (in execution order) past the tolerance
    output: ModuleDrift | None = None  # the model's final output
    agreement: OutputAgreement | None = None
    seconds: float = 0.0
    error: str = ""  # why this run has no numbers (the xla-cpu environment missing, the forward raised)
    note: str = ""  # how the numbers were obtained where it is not a run of its own (an fp32 precision is the reference)

    def __post_init__(self) -> None:
        self.run = ParityRun(self.run)


@dataclass
class ParitySection:
    """``neuronprobe parity`` / ``analyze --parity``: fp32 on the CPU against emulated Neuron precisions (issue 25).

    Informational: it never changes the report's top-line verdict.
    """

    reference: str = "fp32 on the CPU"
    seed: int = 0
    rtol: float = 0.05
    atol: float = 1e-5
    inputs: str = ""  # where the inputs came from: get_example_inputs(), sample_inputs() (n), the loader's
    shrunk: str | None = None  # "shrunk: ..." when the model was built smaller than asked to run with real weights
    runs: list[PrecisionRun] = field(default_factory=list)
    emulated: list[str] = field(default_factory=list)  # the legend: what the emulation models
    not_emulated: list[str] = field(default_factory=list)  # ... and what it does not
    xla_vs_emulation: str | None = None  # point 6: how far the emulation is from the xla-cpu bf16 run
    reference_seconds: float = 0.0
    frozen: ReferenceComparison | None = None  # point 4: --reference DIR, this run against a frozen reference
    train: list[TrainParity] = field(default_factory=list)  # point 5: --train, one training step per precision


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
    decode: DecodeProposal | None = None  # schema 4: `analyze --decode-trace` (issue 24)
    parity: ParitySection | None = None  # schema 5: `parity` / `analyze --parity` (issue 25)
    serving: ServingPlan | None = None  # schema 6: `analyze --serving-trace` (issue 37)

    # -- verdict helpers ---------------------------------------------------
    @property
    def verdict(self) -> TopVerdict:
        """The one-word answer: ``runs``, ``runs_with_fallbacks``, ``will_not_compile``,
        ``not_analysed`` when capture failed and found no ops at all (never a green verdict), or
        ``runs_unobserved`` when nothing failing was predicted but a live backend's step was
        stopped (``--op-timeout``) or died: never a clean ``runs`` from a cut observation.

        Derived from the findings, so it can never disagree with them; the JSON carries it
        (with its words) as ``verdict``/``verdict_words`` for the jobs that read only the top.
        """
        verdicts = {f.verdict for f in self.findings}
        if any(v.blocks_compile for v in verdicts):
            return TopVerdict.WILL_NOT_COMPILE
        if Verdict.CPU_FALLBACK in verdicts:
            return TopVerdict.RUNS_WITH_FALLBACKS
        if self.capture.nodes == 0 and self.capture.export_error:
            return TopVerdict.NOT_ANALYSED
        if self.capture.incomplete:
            return TopVerdict.INCOMPLETE  # never "runs" from a capture that missed most of the model
        if self.splits_per_call():
            return TopVerdict.RUNS_SPLIT
        if any(step.status in (StepStatus.TIMEOUT, StepStatus.DIED) for step in self.backend.steps.values()):
            return TopVerdict.RUNS_UNOBSERVED  # the live run that would confirm "runs" was stopped or died
        return TopVerdict.RUNS

    def splits_per_call(self) -> list[str]:
        """What in this report's own numbers says a call is not one device graph (graph breaks, host reads,
        more than one device graph per call); empty when nothing does. The one place that keeps the top line
        from reading "runs on Neuron as it is" next to such numbers (issue 23)."""
        s = self.summary
        out = []
        if s.graph_breaks:
            out.append(f"{s.graph_breaks} graph break(s)")
        if self.train is not None and self.train.host_syncs_per_step:
            out.append(f"{self.train.host_syncs_per_step} host read(s) per step")
        if s.device_graphs > 1:
            out.append(f"{s.device_graphs} device graphs per call")
        return out

    def __repr__(self) -> str:
        """A one-line summary for the REPL: the whole tree is in ``to_json()`` and the notebook view."""
        s = self.summary
        return (
            f"<neuronprobe Report {self.model!r} on {self.target}: {self.verdict}, "
            f"{len(self.findings)} finding(s), support {s.support_percentage:.1f}% of {s.ops_total} op calls, "
            f"backend {self.backend.name}>"
        )

    def findings_with(self, verdicts: set[Verdict] | frozenset[Verdict] | tuple[Verdict, ...]) -> list[Finding]:
        return [f for f in self.findings if f.verdict in verdicts]

    def verdict_counts(self) -> dict[Verdict, int]:
        """The counts row (``lowered .. compile_error ..``), every verdict in order: the one function the
        console, HTML, notebook text and the JSON's ``summary.counts`` all use, so the row never says
        ``dynamic_shape 0`` above a dynamic_shape finding (issue 33).

        A verdict that makes findings (the problems and the notes) counts the calls of the findings
        shown with that verdict (their ``count``: a line with five float64 ops is 5, a graph break 1);
        ``lowered`` and ``decomposed`` make no findings and count the op inventory's calls.
        """
        counts = {v: 0 for v in Verdict}
        for row in self.ops:
            if not row.verdict.reported:
                counts[row.verdict] += row.count
        for f in self.findings:
            counts[f.verdict] += f.count
        return counts

    # -- JSON ------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The JSON object: the dataclass tree, with the top-line verdict and its words after ``target``."""
        data = dataclasses.asdict(self)
        verdict = self.verdict
        out: dict[str, Any] = {}
        for key, value in data.items():
            out[key] = value
            if key == "target":
                out["verdict"] = verdict.value
                out["verdict_words"] = verdict.words
        return out

    def to_json(self, indent: int | None = 2) -> str:
        from neuronprobe.jsonio import dumps  # NaN and infinity as strings: the file is JSON for every parser

        return dumps(self.to_dict(), indent=indent, sort_keys=False) + "\n"

    @classmethod
    def from_dict(cls, data: Any) -> Report:
        if not isinstance(data, dict):
            raise ReportFormatError("the report is not a JSON object")
        version = data.get("schema_version")
        if not isinstance(version, int) or isinstance(version, bool) or version > SCHEMA_VERSION or version < 1:
            raise ReportFormatError(f"unsupported report schema_version {version!r} (this neuronprobe reads 1..{SCHEMA_VERSION})")
        if "verdict" in data:  # written from schema 3 on; derived again from the findings on load
            build_typed(TopVerdict, data["verdict"], "report.verdict")
        report: Report = build_typed(cls, _upgrade(data, version), "report")
        report.schema_version = SCHEMA_VERSION
        return report

    @classmethod
    def from_json(cls, text: str) -> Report:
        """Read a report; a ReportFormatError naming the bad field for anything the schema rejects."""
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

    def _repr_markdown_(self) -> str:
        """For frontends that draw Markdown but no HTML."""
        from neuronprobe.report.markdown import render_markdown

        return render_markdown(self)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """Plain text for a terminal IPython (``__repr__`` stays one line for logs)."""
        from neuronprobe.report.markdown import render_text

        printer.text(repr(self) if cycle else render_text(self))

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
    if isinstance(tp, type) and issubclass(tp, Word):
        if not isinstance(value, str):
            raise ReportFormatError(f"{where}: expected {_noun(tp)} (a string), got {type(value).__name__}")
        try:
            return parse_closed(tp, value, _noun(tp))
        except ValueError as exc:
            raise ReportFormatError(f"{where}: {exc}") from None
    if tp is Path:
        if not isinstance(value, str):
            raise ReportFormatError(f"{where}: expected a path (a string), got {type(value).__name__}")
        return Path(value)
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
        key_tp, item = typing.get_args(tp) or (str, Any)
        return {build_typed(key_tp, str(k), f"{where}.{k}"): build_typed(item, v, f"{where}.{k}") for k, v in value.items()}
    if tp is float:
        from neuronprobe.jsonio import number

        read = number(value)  # "NaN" / "Infinity": how the codec writes a non-finite float
        if read is None:
            raise ReportFormatError(f"{where}: expected a number, got {type(value).__name__}")
        return read
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ReportFormatError(f"{where}: expected an integer, got {type(value).__name__}")
        return value
    if tp in (str, bool):
        if not isinstance(value, tp):
            raise ReportFormatError(f"{where}: expected {tp.__name__}, got {type(value).__name__}")
        return value
    raise ReportFormatError(f"{where}: cannot read type {tp!r}")


# How each closed set is named in a rejection ("unknown verdict 'foo'; expected one of ...").
_NOUNS: dict[type[Word], str] = {
    Verdict: "verdict",
    TopVerdict: "verdict",
    Origin: "origin",
    Phase: "phase",
    CauseKind: "cause kind",
    StepStatus: "step status",
    Fit: "fit",
    CaptureStrategy: "capture strategy",
    AutoCast: "auto-cast",
    LowType: "auto-cast type",
    ServedDtype: "dtype",
    ParityRun: "parity run",
    OutputKind: "output kind",
    ReferenceBackend: "reference backend",
    ReferenceTensorKind: "reference tensor kind",
}


def _noun(tp: type[Word]) -> str:
    return _NOUNS.get(tp, tp.__name__.lower())


# A schema-2 step status, as the live backends wrote it: "ok 2.1s[: detail]", "timeout after 600s",
# "failed: <error>", "died: ...", "skipped: ...", "timeout: ...".
_OK_STEP = re.compile(r"^ok (?P<seconds>[0-9.]+)s(?:: (?P<detail>.*))?$", re.DOTALL)
_TIMEOUT_STEP = re.compile(r"^timeout after (?P<seconds>[0-9.e+]+)s$")
_OTHER_STEP = re.compile(r"^(?P<status>[a-z]+): (?P<detail>.*)$", re.DOTALL)


def _step_from_text(text: Any) -> Any:
    """A schema-2 prose step status as a schema-3 step object (other values are left for the type check)."""
    if not isinstance(text, str):
        return text
    if m := _OK_STEP.match(text):
        return {"status": "ok", "seconds": float(m["seconds"]), "detail": m["detail"] or ""}
    if m := _TIMEOUT_STEP.match(text):
        return {"status": "timeout", "seconds": float(m["seconds"])}
    if m := _OTHER_STEP.match(text):
        return {"status": m["status"], "detail": m["detail"]}
    return {"status": text}


def _upgrade(data: dict[str, Any], version: int) -> dict[str, Any]:
    """Schema 1 and 2 reports in schema 3's shape (a shallow copy; ``data`` is not changed).

    Schema 1 only lacks fields that have defaults (so does schema 3: schema 4 only added
    ``decode``, schema 5 ``parity``). Schema 2 wrote backend steps as prose
    and the histogram's bin width as a one-element list; the holdout object already had
    the keys that the typed Holdout reads.
    """
    if version >= 3:
        return data
    data = dict(data)
    backend = data.get("backend")
    if isinstance(backend, dict) and isinstance(backend.get("steps"), dict):
        data["backend"] = {**backend, "steps": {k: _step_from_text(v) for k, v in backend["steps"].items()}}
    buckets = data.get("buckets")
    if isinstance(buckets, dict) and isinstance(buckets.get("histogram"), dict):
        histogram = dict(buckets["histogram"])
        width = histogram.get("bin_width")
        if isinstance(width, list) and len(width) == 1:
            histogram["bin_width"] = width[0]
        data["buckets"] = {**buckets, "histogram": histogram}
    return data


def load_report(path: str) -> Report:
    """Read a report JSON written by neuronprobe; a clear ReportFormatError otherwise."""
    import os

    if not os.path.exists(path):
        raise ReportFormatError(f"{path}: no such report file")
    from neuronprobe.files import read_input_text

    try:
        text = read_input_text(path, "report")  # bounded: a FIFO is refused, /dev/zero too, at most 1 GiB
    except InputError as exc:
        raise ReportFormatError(str(exc)) from None
    try:
        return Report.from_json(text)
    except ReportFormatError as exc:
        raise ReportFormatError(f"{path}: {exc}") from exc


def place_cells(report: Report) -> None:
    """Say which notebook cell each place of ``report`` is in (``In [n]``), with the cell's own source line.

    Code defined in a notebook runs under the kernel's name for its cell (``neuronprobe.cells``);
    every record of the tree that carries a place (``file``, ``line``, ``cell``) gets the cell's
    execution count and, where it has none, the line's text from the kernel's copy of the cell.
    Outside a kernel nothing matches and nothing changes.
    """
    from neuronprobe.cells import cell_of, cell_source_line

    def visit(node: Any) -> None:
        if dataclasses.is_dataclass(node) and not isinstance(node, type):
            names = {f.name for f in dataclasses.fields(node)}
            if {"file", "line", "cell"} <= names:
                _place_one(node, cell_of, cell_source_line)
            for f in dataclasses.fields(node):
                visit(getattr(node, f.name))
        elif isinstance(node, list):
            for item in node:
                visit(item)
        elif isinstance(node, dict):
            for item in node.values():
                visit(item)

    visit(report)


def _place_one(record: Any, cell_of: Any, cell_source_line: Any) -> None:
    cell = cell_of(record.file)
    if cell is None:
        return
    if "source_line" in {f.name for f in dataclasses.fields(record)} and not record.source_line:
        record.source_line = cell_source_line(record.file, record.line)
    if cell.number is not None:
        record.cell = cell.number
    elif cell.position is not None and cell.notebook:  # VS Code: the notebook and the cell's position
        record.file, record.cell = cell.notebook, cell.position
