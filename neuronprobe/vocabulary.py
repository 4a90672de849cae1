"""The words neuronprobe speaks: every closed set the report uses, defined once.

This is the bottom layer: it imports nothing from neuronprobe but ``cells`` (a
standard-library leaf that names notebook cells), and everything
else (the support table, the backends, the report schema, the renderers) takes
its verdicts, origins, phases and kinds from here. Each set is a ``str`` Enum
so that a member *is* its JSON string: ``json.dumps`` writes ``"cpu_fallback"``,
comparisons with plain strings keep working, and :meth:`Report.from_json`
rejects anything outside the set with the path of the bad field.

Renderers may therefore index tables by these members without a fallback for
"a value this version does not know": the schema guarantees there is none.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from neuronprobe.cells import NOTEBOOK_SUFFIX, cell_label, is_cell_file

# How a missing source location reads, wherever a location is printed.
UNKNOWN_LOCATION = "unknown location"


class Word(str, Enum):
    """A closed-set member that prints as its value (``str(Phase.FORWARD) == "forward"``).

    Python 3.12 changed ``format()`` of ``(str, Enum)`` members to the qualified
    name; pinning both here keeps f-strings printing the value on every version.
    """

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)

    @classmethod
    def values(cls) -> tuple[str, ...]:
        """The members' JSON strings, in declaration order (for messages and choices)."""
        return tuple(str(m.value) for m in cls)


class Verdict(Word):
    """What happens to an op on Neuron, least severe first (declaration order is the severity order).

    Three kinds: supported (compiles into the device graph, nothing to say), a *note*
    (compiles and runs on the device, but the user should hear about it: ``precision``,
    the device computes in a narrower dtype than the model asks for), and a *problem*
    (falls back, depends on data, or stops the compile). Notes are findings, count as
    supported op calls, and never change the top-line verdict or fail a diff gate.
    """

    words: str
    is_problem: bool
    is_note: bool
    rank: int

    def __new__(cls, value: str, words: str = "", is_problem: bool = False, is_note: bool = False) -> Verdict:
        member = str.__new__(cls, value)
        member._value_ = value
        member.words = words
        member.is_problem = is_problem
        member.is_note = is_note
        member.rank = len(cls.__members__)
        return member

    LOWERED = ("lowered", "has a Neuron lowering and compiles into the device graph", False)
    DECOMPOSED = ("decomposed", "a composite op whose parts all lower; compiles into the device graph", False)
    # schema 4: the Neuron device's dtype mapping (torch-xla's MaybeDowncastToXlaDeviceType) narrows the type
    PRECISION = (
        "precision",
        "compiles into the device graph in a narrower dtype than the model asks for (the device's dtype mapping): results differ",
        False,
        True,
    )
    CPU_FALLBACK = (
        "cpu_fallback",
        "no lowering: runs on the host, with a device-to-host and a host-to-device copy per call, and splits the device graph",
        True,
    )
    DYNAMIC_SHAPE = ("dynamic_shape", "output shape depends on tensor values; a static Neuron graph cannot hold it", True)
    CONTROL_FLOW = (
        "control_flow",
        "a Python branch on tensor values; the traced graph freezes one branch or the capture breaks",
        True,
    )
    COMPILE_ERROR = ("compile_error", "the Neuron compiler rejects it (dtype or operation not supported on the target)", True)

    @property
    def blocks_compile(self) -> bool:
        """True for verdicts that stop the Neuron compile (a fallback only slows the model down)."""
        return self.is_problem and self is not Verdict.CPU_FALLBACK

    @property
    def reported(self) -> bool:
        """True for verdicts that become findings: the problems and the notes."""
        return self.is_problem or self.is_note

    @property
    def severity(self) -> Severity:
        """How bad a finding of this verdict is: the compile stops, the model runs slower, or worth knowing."""
        if self.blocks_compile:
            return Severity.ERROR
        return Severity.WARNING if self.is_problem else Severity.INFO


class Severity(Word):
    """How bad a rule's finding is, worst first: the same three words as the audit's catalogue."""

    ERROR = "error"  # stops the Neuron compile (or, in the audit, fails silently on a Neuron host)
    WARNING = "warning"  # runs, but slower or split (a host fallback, a sync)
    INFO = "info"  # compiles and runs: worth knowing (a precision note, a lowering)


def worst(verdicts: list[Verdict] | tuple[Verdict, ...]) -> Verdict:
    """The most severe of ``verdicts`` (at least one)."""
    return max(verdicts, key=lambda v: v.rank)


def worse(a: Verdict | str | None, b: Verdict | str) -> Verdict:
    """The more severe of two verdicts; ``a`` is None when there is none yet (an op seen the first time)."""
    return worst((Verdict(b),) if a is None else (Verdict(a), Verdict(b)))


# Verdicts that compile into the device graph, and the problems, in severity order.
SUPPORTED_VERDICTS: frozenset[Verdict] = frozenset(v for v in Verdict if not v.is_problem)
PROBLEM_VERDICTS: tuple[Verdict, ...] = tuple(v for v in Verdict if v.is_problem)
# Verdicts that are findings without being problems (they compile; the user should still hear of them).
NOTE_VERDICTS: tuple[Verdict, ...] = tuple(v for v in Verdict if v.is_note)


class Confirmation(Word):
    """What the parity run's emulation says of a risky low-precision construct found statically (issue 25)."""

    words: str

    def __new__(cls, value: str, words: str = "") -> Confirmation:
        member = str.__new__(cls, value)
        member._value_ = value
        member.words = words
        return member

    # the module holding the line is where the emulated output first turns non-finite or exceeds the tolerance
    MATTERS = ("matters", "measured to matter on these inputs")
    # the module ran and its output stayed finite and within the tolerance
    NO_EFFECT = ("no_effect", "reached, no measurable effect on these inputs")
    # the module's output is off, but an earlier module's already was: this line's share cannot be told apart
    UPSTREAM = ("upstream", "reached; the error arrives from an earlier module, so this line's own effect is not measured")
    # no per-module row for the module holding the line: these inputs never ran it
    NOT_REACHED = ("not_reached", "not reached by these inputs")


class TopVerdict(Word):
    """The report's one-word answer, with the words the console and the JSON give it."""

    words: str

    def __new__(cls, value: str, words: str = "") -> TopVerdict:
        member = str.__new__(cls, value)
        member._value_ = value
        member.words = words
        return member

    RUNS = ("runs", "runs on Neuron as it is")
    RUNS_WITH_FALLBACKS = ("runs_with_fallbacks", "runs, with CPU fallbacks")
    # Never RUNS while the report counts a graph break, a host read or more than one device graph per call (issue 23).
    RUNS_SPLIT = ("runs_split", "runs, split into more than one device graph per call")
    WILL_NOT_COMPILE = ("will_not_compile", "will not compile on Neuron as it is")
    NOT_ANALYSED = ("not_analysed", "could not be analysed: capture recorded no ops")
    # A live backend's observation was stopped (--op-timeout, --timeout) or died: nothing failing was
    # predicted, but the run that would confirm it did not finish, so the answer is not a clean "runs".
    RUNS_UNOBSERVED = ("runs_unobserved", "predicted to run on Neuron as it is, but its observation was cut short")
    # The capture plausibility test failed (capture.implausible, defaults.MIN_PARAMETER_COVERAGE; issue 33):
    # the ops read too little of the module's weights for the findings to be the whole answer.
    INCOMPLETE = ("incomplete", "the answer is incomplete: the capture missed code the model runs")


class BreakCause(Word):
    """Why dynamo broke the graph, as the report names it (the classes of ``support/data/error_patterns.json``)."""

    words: str

    def __new__(cls, value: str, words: str = "") -> BreakCause:
        member = str.__new__(cls, value)
        member._value_ = value
        member.words = words
        return member

    DATA_DEPENDENT_SIZE = ("data_dependent_size", "an op whose output size depends on tensor data")
    HOST_READ = ("host_read", "a host read of a tensor value")
    VALUE_BRANCH = ("value_branch", "a Python branch on a tensor value")
    SPARSE = ("sparse", "a sparse tensor")
    UNSUPPORTED_PYTHON = ("unsupported_python", "Python the graph capture cannot follow")


class Origin(Word):
    """Where a finding comes from."""

    PREDICTED = "predicted"  # the support table
    OBSERVED = "observed"  # a live backend (the Neuron SDK or the XLA CPU device)


class Phase(Word):
    """Where in a training step an op or finding happens; an inference analysis is all forward."""

    FORWARD = "forward"
    BACKWARD = "backward"
    OPTIMIZER = "optimizer"
    LOOP = "loop"  # host reads in the training loop, outside the graphs


class CauseKind(Word):
    """Why a new graph is compiled (a recompile cause), with how it reads in the cause list."""

    tag: str

    def __new__(cls, value: str, tag: str = "") -> CauseKind:
        member = str.__new__(cls, value)
        member._value_ = value
        member.tag = tag
        return member

    SHAPE = ("shape", "new input shape")
    SPECIALIZATION = ("specialization", "graph changes with shape")
    BRANCH = ("branch", "graph changes with shape")
    GRAPH_CHANGE = ("graph_change", "graph changes with shape")
    GUARD = ("guard", "other guard")
    PARTIAL_BATCH = ("partial_batch", "partial last batch")


class StepStatus(Word):
    """How one step of a worker ended: the one vocabulary of every worker and of the report.

    Every supervised process (the analysis and nightly workers, the live backend's SDK
    steps, the xla-cpu and parity workers) ends its steps with one of these; the report's
    backend steps (``BackendStep``) hold the first five (see :data:`REPORTED_STEP_STATUSES`).
    """

    OK = "ok"
    FAILED = "failed"  # the step raised or the compiler rejected the model
    TIMEOUT = "timeout"  # stopped at --op-timeout / --timeout
    DIED = "died"  # the step's process died (a signal, out of memory)
    SKIPPED = "skipped"  # not run, because an earlier step made it pointless
    MEMORY = "memory"  # stopped: the resident memory of its process group passed --max-memory
    EXIT = "exit"  # the model's own code ended it (sys.exit(), KeyboardInterrupt): the model's failure, not the device's


# The statuses a report's backend step may hold (what a report of schema 6 can say).
REPORTED_STEP_STATUSES = frozenset({StepStatus.OK, StepStatus.FAILED, StepStatus.TIMEOUT, StepStatus.DIED, StepStatus.SKIPPED})


class CaptureStrategy(Word):
    """How the model was run for capture (issue 12), in the order they are tried."""

    META = "meta"  # hf: built on the meta device, no weights allocated
    FAKE = "fake"  # FakeTensorMode: data-dependent sizes become unbacked symbols
    CPU_SHRUNK = "cpu-shrunk"  # real CPU weights on a shrunken config that keeps every layer kind: shapes differ
    AS_GIVEN = "as-given"  # a model file or module with real weights, run as it is
    NONE = "none"  # every way failed: the report is a limitation (exit 4)


class Fit(Word):
    """How a length maps to a bucket edge."""

    INCLUSIVE = "inclusive"  # the first edge >= the length
    STRICT = "strict"  # the first edge > the length (NxD Inference's runtime rule)


class ServingRuntime(Word):
    """The serving stack whose decode-bucket rule a token-generation ladder is fitted for (issue 24)."""

    NXDI = "nxdi"  # NxD Inference: first bucket > attention length + speculation
    # The older plugin's decode ladder alone, batch 1 (issue 24): smallest bucket >= num_computed_tokens + 1 + speculation, max_model_len fallback.
    VLLM_NEURON_NXDI = "vllm-neuron-nxdi"
    # The current plugin on TorchNeuron (issue 37): its scheduler replayed, three ladders planned together (shape_buckets/serving.py).
    VLLM_NEURON = "vllm-neuron"
    TNX = "tnx"  # transformers-neuronx: first bucket >= the length


class ReferenceBackend(Word):
    """Where a frozen reference's tensors were produced (issue 25): a reference is compared on the same one only.

    A reference made on one backend and compared on another is refused unless the user asks
    for a cross-backend comparison, which is reported and never gates. ``parity`` saves
    ``cpu-fp32`` (the fp32 run on the CPU, also under ``--backend xla-cpu``) and ``neuron``
    (``--backend neuron``: the device's outputs); ``xla-cpu`` names a reference made through
    torch-xla by other means, so that it is read and refused like any other backend.
    """

    words: str

    def __new__(cls, value: str, words: str = "") -> ReferenceBackend:
        member = str.__new__(cls, value)
        member._value_ = value
        member.words = words
        return member

    CPU_FP32 = ("cpu-fp32", "the model in float32 on the CPU")
    XLA_CPU = ("xla-cpu", "torch-xla on the CPU")
    NEURON = ("neuron", "a Neuron device")


class ReferenceTensorKind(Word):
    """What a tensor of a frozen reference is: a final output of the model, or one module's output."""

    OUTPUT = "output"
    MODULE = "module"


@dataclass(frozen=True)
class SourceLocation:
    """A place in the user's code; the one way neuronprobe prints "file:line".

    In a notebook (``cell`` set) the place is a cell: ``In [5], line 3`` for code run
    in a kernel (``cell`` is the execution count; ``file`` is the kernel's name for the
    cell, kept in the JSON), ``notebook.ipynb cell 3, line 2`` for a notebook file read
    from disk (``cell`` is the code cell's position). See ``neuronprobe.cells``.
    """

    file: str | None
    line: int | None = None
    cell: int | None = None

    def __str__(self) -> str:
        if not self.file:
            return UNKNOWN_LOCATION
        line = "" if self.line is None else f", line {self.line}"
        if self.cell is not None:
            if self.file.endswith(NOTEBOOK_SUFFIX):
                return f"{self.file} cell {self.cell}{line}"
            return f"{cell_label(self.cell)}{line}"
        if is_cell_file(self.file):  # a cell whose execution count the kernel did not know
            return f"{cell_label(None)}{line}"
        return self.file if self.line is None else f"{self.file}:{self.line}"

    @property
    def known(self) -> bool:
        return bool(self.file)


def location(file: str | None, line: int | None = None, cell: int | None = None) -> str:
    """``file:line`` text (``In [n], line k`` in a notebook cell) for a place that may be missing."""
    return str(SourceLocation(file, line, cell))


def parse_closed(kind: type[Word], value: object, noun: str) -> Word:
    """``kind(value)`` or a ValueError that names the set: ``unknown verdict 'foo'; expected one of ...``."""
    try:
        return kind(value)
    except ValueError:
        raise ValueError(f"unknown {noun} {value!r}; expected one of {', '.join(kind.values())}") from None


# --- numerical parity (issue 25) ---------------------------------------------------------------


class AutoCast(Word):
    """neuronx-cc ``--auto-cast``: which fp32 ops the compiler computes in the auto-cast type
    (SDK ``compiler/neuronx-cc/api-reference-guide``)."""

    NONE = "none"  # no cast: fp32 stays fp32 (the default from Neuron 2.27 on)
    MATMULT = "matmult"  # matmul/conv inputs cast, fp32 accumulation (the default before 2.27)
    ALL = "all"  # every op's float inputs cast


class LowType(Word):
    """neuronx-cc ``--auto-cast-type``: the type auto-cast rounds to."""

    BF16 = "bf16"
    FP16 = "fp16"
    TF32 = "tf32"
    FP8_E4M3 = "fp8_e4m3"


class ServedDtype(Word):
    """The dtype the model is served in (its weights and inputs cast to it): ``parity --dtype``."""

    FP32 = "fp32"
    BF16 = "bf16"
    FP16 = "fp16"


class ParityRun(Word):
    """Where a parity run's numbers come from: the CPU emulation of a precision, or torch-xla 2.9 on the CPU."""

    EMULATED = "emulated"
    XLA_CPU = "xla-cpu"  # observed: the model run through a real XLA lowering in bf16 (issue 25 point 6)


class OutputKind(Word):
    """How parity reads a model's final output: next-token logits, class scores, or neither."""

    LANGUAGE_MODEL = "language_model"  # logits [batch, positions, vocabulary]: teacher-forced top-k and greedy divergence
    CLASSIFIER = "classifier"  # scores [batch, classes]: top-1 stability over the batch
    OTHER = "other"  # compared tensor by tensor only


# --fail-on ids that are neither a verdict nor a rule: each asks one section of the report (gates.py).
PARITY_GATE = "parity"  # a frozen-reference comparison with a mismatch or a top-1 change (issue 25); cross-backend never gates
SECTION_GATES: tuple[str, ...] = (PARITY_GATE,)
