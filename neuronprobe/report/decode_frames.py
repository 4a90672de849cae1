"""pandas views of a :class:`DecodeProposal` (``proposal.frames()``), as ``report/frames.py`` does for the rest."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from neuronprobe.report.model import DecodeProposal, MemoryRow

LADDER_COLUMNS = ["kind", "name", "edges", "graphs", "kv_overhead_pct", "step_overhead_pct", "optimal_kv_overhead_pct", "beyond_last", "chosen"]
BATCH_COLUMNS = ["name", "batch_buckets", "seq_buckets", "graphs", "kv_overhead_pct", "step_overhead_pct", "method"]
TIMELINE_COLUMNS = ["seconds", "batch", "longest", "bucket", "batch_bucket"]


def decode_frames(p: DecodeProposal, memory_row: type[MemoryRow]) -> dict[str, pd.DataFrame]:
    """``ladders`` (curve and baselines), ``batch`` (joint plans), ``memory`` (per TP degree, one column per field
    of ``memory_row``, the model's row class), ``timeline`` (replay)."""
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
        "memory": pd.DataFrame(memory, columns=[f.name for f in dataclasses.fields(memory_row)]),
        "timeline": pd.DataFrame(timeline, columns=TIMELINE_COLUMNS),
    }
