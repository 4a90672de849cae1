"""The report's backend sections: the backend and support table that answered, and predicted against observed."""

from __future__ import annotations

from dataclasses import dataclass, field

from neuronprobe.vocabulary import StepStatus, Verdict


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
class CompiledGraph:
    """One graph ``torch.compile(backend="neuron")`` compiled on a TorchNeuron host (schema 7, issue 36.6), as
    ``torch_neuronx.get_dynamo_metrics()`` reports it (``NeuronCompilationMetrics``: the FX passes, the lowering to
    StableHLO and the NEFF compile, each in microseconds there, in seconds here)."""

    name: str = ""  # graph_name: {model_name}_{aot_id}_{graph_type}_{nth}
    nodes: int = 0  # graph_node_count: FX nodes before lowering
    has_collectives: bool = False
    fx_passes_seconds: float = 0.0
    lower_seconds: float = 0.0
    compile_seconds: float = 0.0

    @property
    def seconds(self) -> float:
        return self.fx_passes_seconds + self.lower_seconds + self.compile_seconds


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
    # schema 7: on a TorchNeuron host, the graphs the observed forward compiled (the model's own torch.compile calls)
    compiled_graphs: list[CompiledGraph] = field(default_factory=list)


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
