"""The report's parity section (issue 25): fp32 on the CPU against emulated Neuron precisions, module by module."""

from __future__ import annotations

from dataclasses import dataclass, field

from neuronprobe.report.schema.reference import ReferenceComparison, TrainParity
from neuronprobe.vocabulary import AutoCast, LowType, OutputKind, ParityRun, ServedDtype, SourceLocation


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
