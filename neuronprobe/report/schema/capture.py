"""The report's capture section: how the model's op graph was captured, and the strategies that failed first."""

from __future__ import annotations

from dataclasses import dataclass, field

from neuronprobe.vocabulary import CaptureStrategy


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
