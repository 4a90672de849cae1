"""Report schema for serving on vLLM Neuron (issue 37): ladders, the compile bill, the traffic per bucket dimension.

Kept apart from model.py so the serving section grows without touching the shared hub;
model.py imports :class:`ServingPlan` for ``Report.serving`` (schema 6, default None).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ServingLadders:
    """One set of vLLM Neuron ladders scored on the replayed steps (the proposal or a baseline)."""

    name: str
    prefill_buckets: list[int]  # num_batched_tokens_buckets
    batch_buckets: list[int]  # num_seqs_buckets
    context_buckets: list[int]  # decode_context_length_buckets (the max_model_len fallback is not listed)
    prefill_graphs: int
    decode_graphs: int
    graphs: int
    prefill_padded_tokens: int = 0
    prefill_overhead: float = 0.0  # % padded over real prefill tokens
    batch_padding_lines: int = 0  # sum over decode steps of bucket - batch
    kv_overhead: float = 0.0  # % padded over real KV tokens read in decode
    modelled_seconds: float = 0.0  # prefill + decode, the time model in ServingPlan.time_model
    time_overhead: float = 0.0  # % over the same steps without padding
    compile_seconds: float | None = None  # wall time on the node's workers (None: uncalibrated)
    host_peak_gib: float | None = None
    method: str = ""  # exact / heuristic / fixed


@dataclass
class GraphCost:
    name: str  # vLLM Neuron's bucket_name, e.g. prefill_s1024, decode_b8_ctx4096
    kind: str  # prefill / decode
    size: int  # tokens (prefill) or batch x context (decode)
    seconds: float | None = None
    host_gib: float | None = None
    measured: bool = False  # True: this graph's own time was in the measurements


@dataclass
class CompileBill:
    calibrated: bool = False
    source: str = ""
    how_to_calibrate: str = ""
    workers: int = 8
    fits: dict[str, list[float]] = field(default_factory=dict)  # kind -> [intercept s, slope s per size unit, points]
    graphs: list[GraphCost] = field(default_factory=list)
    wall_seconds: float | None = None
    serial_seconds: float | None = None
    host_peak_gib: float | None = None
    host_memory_gib: float | None = None
    notes: list[str] = field(default_factory=list)


@dataclass
class DimHistogram:
    """A bucket dimension's weighted distribution: counts of steps between lower and upper (inclusive)."""

    name: str
    lower: list[int] = field(default_factory=list)
    upper: list[int] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)
    resolution: str = ""


@dataclass
class ServingPlan:
    """The answer of ``propose_serving_plan``: vLLM Neuron ladders for traffic, within graph and compile budgets."""

    runtime: str = "vllm-neuron"
    source: str = ""
    traffic: str = "trace"  # trace / metrics
    requests: int = 0
    prefill_steps: int = 0
    decode_steps: int = 0
    engine: dict[str, int] = field(default_factory=dict)  # max_num_batched_tokens, max_num_seqs, max_model_len, tensor_parallel_size, ...
    max_graphs: int = 0
    compile_budget_minutes: float | None = None
    proposed: ServingLadders | None = None
    baselines: list[ServingLadders] = field(default_factory=list)
    additional_config: dict[str, Any] = field(default_factory=dict)
    vllm_args: list[str] = field(default_factory=list)
    compile_bill: CompileBill = field(default_factory=CompileBill)
    histograms: list[DimHistogram] = field(default_factory=list)
    time_model: dict[str, float] = field(default_factory=dict)
    assumptions: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    rules: list[str] = field(default_factory=list)  # what the docs settle, each with its source

    def frames(self) -> dict[str, Any]:
        """pandas DataFrames: ladders (proposal and baselines), graphs (the compile bill), histograms."""
        import dataclasses

        import pandas as pd

        ladders = [self.proposed, *self.baselines] if self.proposed else list(self.baselines)
        hist_rows = [
            {"dimension": h.name, "lower": lo, "upper": hi, "steps": c, "resolution": h.resolution}
            for h in self.histograms
            for lo, hi, c in zip(h.lower, h.upper, h.counts, strict=True)
        ]
        return {
            "ladders": pd.DataFrame([dataclasses.asdict(x) for x in ladders]),
            "graphs": pd.DataFrame([dataclasses.asdict(g) for g in self.compile_bill.graphs]),
            "histograms": pd.DataFrame(hist_rows, columns=["dimension", "lower", "upper", "steps", "resolution"]),
        }
