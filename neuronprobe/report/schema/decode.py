"""The report's decode section (``--decode-trace``, issue 24): token-generation and batch buckets, the memory fit."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from neuronprobe.report.schema.buckets import Histogram
from neuronprobe.vocabulary import Fit, ServingRuntime

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


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
        """pandas DataFrames of the proposal: curve, baselines, batch, memory, timeline (see :func:`decode_frames`)."""
        return decode_frames(self)


# --- pandas views (pandas is imported only when a frame is asked for) ---

LADDER_COLUMNS = ["kind", "name", "edges", "graphs", "kv_overhead_pct", "step_overhead_pct", "optimal_kv_overhead_pct", "beyond_last", "chosen"]
BATCH_COLUMNS = ["name", "batch_buckets", "seq_buckets", "graphs", "kv_overhead_pct", "step_overhead_pct", "method"]
TIMELINE_COLUMNS = ["seconds", "batch", "longest", "bucket", "batch_bucket"]


def decode_frames(p: DecodeProposal) -> dict[str, pd.DataFrame]:
    """pandas views of ``p`` (``proposal.frames()``), as ``report/frames.py`` does for the rest of the report:
    ``ladders`` (curve and baselines), ``batch`` (joint plans), ``memory`` (per TP degree, one column per field
    of :class:`MemoryRow`), ``timeline`` (replay)."""
    import pandas as pd

    ladders: list[dict[str, Any]] = []
    for kind, items in (("curve", p.curve), ("baseline", p.baselines)):
        for lad in items:
            ladders.append(
                {
                    "kind": kind,
                    "name": lad.name,
                    "edges": lad.edges,
                    "graphs": lad.graphs,
                    "kv_overhead_pct": lad.kv_overhead,
                    "step_overhead_pct": lad.step_overhead,
                    "optimal_kv_overhead_pct": lad.optimal_kv_overhead,
                    "beyond_last": lad.beyond_last,
                    "chosen": kind == "curve" and lad.edges == p.edges,
                }
            )
    plans = [p.batch_plan] if p.batch_plan else []
    batch = [
        {
            "name": b.name,
            "batch_buckets": b.batch_buckets,
            "seq_buckets": b.seq_buckets,
            "graphs": b.graphs,
            "kv_overhead_pct": b.kv_overhead,
            "step_overhead_pct": b.step_overhead,
            "method": b.method,
        }
        for b in plans + p.batch_baselines
    ]
    memory = [dataclasses.asdict(r) for r in p.memory.rows] if p.memory else []
    t = p.timeline
    timeline = (
        {"seconds": t.seconds, "batch": t.batch, "longest": t.longest, "bucket": t.bucket, "batch_bucket": t.batch_bucket}
        if t
        else {c: [] for c in TIMELINE_COLUMNS}
    )
    return {
        "ladders": pd.DataFrame(ladders, columns=LADDER_COLUMNS),
        "batch": pd.DataFrame(batch, columns=BATCH_COLUMNS),
        "memory": pd.DataFrame(memory, columns=[f.name for f in dataclasses.fields(MemoryRow)]),
        "timeline": pd.DataFrame(timeline, columns=TIMELINE_COLUMNS),
    }
