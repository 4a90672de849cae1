"""The report's summary: op calls, support and counts per verdict, per phase of a training step."""

from __future__ import annotations

from dataclasses import dataclass, field

from neuronprobe.vocabulary import Phase, Verdict


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
