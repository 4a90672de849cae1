"""The report's recompile section: graphs per shape policy, observed compiles and their causes."""

from __future__ import annotations

from dataclasses import dataclass, field

from neuronprobe.report.schema.backend import CompiledGraph
from neuronprobe.vocabulary import CauseKind, SourceLocation


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
    graphs: list[CompiledGraph] = field(default_factory=list)  # schema 7: per graph, where the backend times them (TorchNeuron)


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
