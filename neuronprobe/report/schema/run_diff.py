"""The report's run diff (``--baseline``, ``diff``): findings that appeared, went or moved, and metrics."""

from __future__ import annotations

from dataclasses import dataclass, field

from neuronprobe.vocabulary import SourceLocation, Verdict


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
