"""pandas views of a Report, for notebooks: ``report.ops_df()`` and friends.

The Report dataclasses stay the source of truth; these functions only flatten
them into tables. Conventions shared by every frame:

* ``verdict`` is an ordered categorical in severity order (``Verdict``), so
  ``df.sort_values("verdict", ascending=False)`` puts the worst first;
* list fields stay Python lists (``df.explode("modules")`` unnests them);
* a section that was not analysed gives an empty frame with the same columns,
  so code written against a full report also runs on a sparse one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from neuronprobe.report.schema.report import ReportData
from neuronprobe.vocabulary import Verdict, Word

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

OPS_COLUMNS = ["op", "verdict", "count", "rule", "reason", "dtypes", "example_shapes", "modules", "phase"]
FINDINGS_COLUMNS = [
    "verdict",
    "op",
    "count",
    "file",
    "line",
    "module",
    "source_line",
    "message",
    "fix",
    "ncc_code",
    "origin",
    "bytes_per_call",
    "shapes",
    "rule",
    "phase",
    "cell",
    "confirmation",  # a risky low-precision construct, as the parity run measured it (issue 25); else None
    "origins",  # every origin that found it: ["predicted"], ["observed"] or both (issue 33)
    "call_chain",  # the model-code callers, outermost first, as "file:line (function)" texts (issue 33)
]
COUNTS_COLUMNS = ["verdict", "count"]
RECOMPILES_COLUMNS = ["policy", "graphs", "compile_seconds", "first_seen", "note"]
BUCKETS_COLUMNS = [
    "kind",
    "name",
    "k",
    "edges",
    "overhead_tokens_pct",
    "overhead_attention_pct",
    "cost",
    "graphs",
    "beyond_last",
    "chosen",
]


def _frame(rows: list[dict[str, Any]], columns: list[str]) -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame(rows, columns=columns)


def _plain(value: Any) -> Any:
    """A closed-set member as its plain string, so frames hold only JSON-native values (parquet, csv)."""
    return str(value) if isinstance(value, Word) else value


def _with_verdict_order(df: pd.DataFrame) -> pd.DataFrame:
    """Make ``verdict`` an ordered categorical (the schema admits only the closed set)."""
    import pandas as pd

    df["verdict"] = pd.Categorical([str(v) for v in df["verdict"]], categories=list(Verdict.values()), ordered=True)
    return df


def ops_df(report: ReportData) -> pd.DataFrame:
    """One row per aten overload: how often it runs and what happens to it on Neuron."""
    rows = [{c: _plain(getattr(op, c)) for c in OPS_COLUMNS} for op in report.ops]
    return _with_verdict_order(_frame(rows, OPS_COLUMNS))


def findings_df(report: ReportData) -> pd.DataFrame:
    """One row per finding, with its place in the code and the fix."""
    rows = [{c: _finding_value(f, c) for c in FINDINGS_COLUMNS} for f in report.findings]
    df = _frame(rows, FINDINGS_COLUMNS)
    df["line"] = df["line"].astype("Int64")  # nullable: a finding may have no line
    df["cell"] = df["cell"].astype("Int64")  # In [n] for a finding in a notebook cell
    return _with_verdict_order(df)


def _finding_value(finding: Any, column: str) -> Any:
    value = getattr(finding, column)
    if column == "origins":
        return [str(o) for o in value]
    if column == "call_chain":
        return [str(frame) for frame in value]
    return _plain(value)


def counts_df(report: ReportData) -> pd.DataFrame:
    """The counts row as a frame, one row per verdict in severity order: :meth:`Report.verdict_counts`."""
    rows = [{"verdict": str(v), "count": n} for v, n in report.verdict_counts().items()]
    return _with_verdict_order(_frame(rows, COUNTS_COLUMNS))


def recompiles_df(report: ReportData) -> pd.DataFrame:
    """One row per compile policy (static, bucketed, ...): the graphs the traffic needs."""
    section = report.recompiles
    rows = []
    if section is not None:
        rows = [
            {
                "policy": name,
                "graphs": p.graphs,
                "compile_seconds": p.compile_seconds,
                "first_seen": list(p.first_seen),
                "note": p.note,
            }
            for name, p in section.predicted.items()
        ]
    return _frame(rows, RECOMPILES_COLUMNS)


def buckets_df(report: ReportData) -> pd.DataFrame:
    """The overhead-against-k curve and the baseline ladders, side by side in one table.

    ``kind`` is ``"curve"`` for a point of the optimal curve (``chosen`` marks the
    proposal) and ``"baseline"`` for a fixed ladder it was compared with.
    """
    proposal = report.buckets
    rows: list[dict[str, Any]] = []
    if proposal is not None:
        points = proposal.curve or []
        for p in points:
            rows.append(
                {
                    "kind": "curve",
                    "name": f"optimal k={p.k}",
                    "k": p.k,
                    "edges": list(p.edges),
                    "overhead_tokens_pct": p.overhead.tokens,
                    "overhead_attention_pct": p.overhead.attention,
                    "cost": p.cost,
                    "graphs": p.k,
                    "chosen": p.k == proposal.k,
                    "beyond_last": proposal.beyond_last if p.k == proposal.k else None,
                }
            )
        if not any(p.k == proposal.k for p in points):  # a proposal without its curve still shows up
            rows.append(
                {
                    "kind": "curve",
                    "name": f"optimal k={proposal.k}",
                    "k": proposal.k,
                    "edges": list(proposal.edges),
                    "overhead_tokens_pct": proposal.overhead.tokens,
                    "overhead_attention_pct": proposal.overhead.attention,
                    "cost": proposal.cost,
                    "graphs": proposal.k,
                    "beyond_last": proposal.beyond_last,
                    "chosen": True,
                }
            )
        for b in proposal.baselines:
            rows.append(
                {
                    "kind": "baseline",
                    "name": b.name,
                    "k": len(b.edges),
                    "edges": list(b.edges),
                    "overhead_tokens_pct": b.overhead.tokens,
                    "overhead_attention_pct": b.overhead.attention,
                    "cost": None,
                    "graphs": b.graphs,
                    "beyond_last": b.beyond_last,
                    "chosen": False,
                }
            )
    df = _frame(rows, BUCKETS_COLUMNS)
    df["beyond_last"] = df["beyond_last"].astype("Int64")
    return df
