"""Console rendering of a :class:`BucketProposal` as rich renderables (the CLI prints them).

Every string from the proposal reaches rich as :class:`rich.text.Text`, never as markup: a
ladder's name or a file's path with ``[/bold]`` in it was a ``MarkupError`` (issue 34.5).
"""

from __future__ import annotations

import math
from typing import Any

from neuronprobe.formatting import format_percent
from neuronprobe.report.model import BucketProposal
from neuronprobe.shape_buckets.configs import CONFIG_NAMES

# Curve rows drawn as a bar on a log scale (overheads span 1000% down to a few %), the
# longest this many characters: enough to see the knee without crowding the edges.
BAR_WIDTH = 12


def _pct(x: float) -> str:
    return format_percent(x)


def _edges(edges: list[int], limit: int = 12) -> str:
    if len(edges) <= limit:
        return ", ".join(map(str, edges))
    return ", ".join(map(str, edges[: limit - 2])) + f", ... , {edges[-1]}"


def render_proposal(p: BucketProposal, config: str = "nxd_inference") -> list[Any]:
    """Headline, curve, baselines, holdout, notes and one config snippet (or all)."""
    from rich.panel import Panel
    from rich.rule import Rule
    from rich.table import Table
    from rich.text import Text

    out: list[Any] = []
    head = Text()
    head.append(f"{p.n_lengths:,} lengths, {p.n_distinct:,} distinct, last bucket {p.max_len}", style="bold")
    head.append(f"   cost: {p.cost_model}   fit: {p.fit}")
    if p.multiple_of:
        head.append(f"   multiple of {p.multiple_of}")
    if p.min_bucket:
        head.append(f"   min bucket {p.min_bucket}")
    if p.source:
        head.append(f"\n{p.source}", style="dim")
    out.append(head)

    best = Text()
    best.append(f"proposed {p.k} buckets: ", style="bold green")
    best.append(", ".join(map(str, p.edges)), style="bold")
    best.append(f"\npadding overhead: {_pct(p.overhead.tokens)} tokens, {_pct(p.overhead.attention)} attention")
    if p.beyond_last:
        best.append(f"\n{p.beyond_last:,} lengths beyond the last bucket {p.max_len} (not served, not truncated)", style="bold yellow")
    out.append(Panel(best, expand=False))

    curve = Table(title="overhead by number of buckets (exact optimum for each k)", title_justify="left")
    curve.add_column("k", justify="right")
    curve.add_column("tokens", justify="right")
    curve.add_column("attention", justify="right")
    has_objective = any(c.objective is not None for c in p.curve)
    if has_objective:
        curve.add_column("runtime+compile", justify="right")
    curve.add_column("")
    curve.add_column("edges", overflow="fold")
    top = math.log1p(max((c.overhead.tokens for c in p.curve), default=0.0)) or 1.0
    for c in p.curve:
        bar = "█" * max(1, round(BAR_WIDTH * math.log1p(c.overhead.tokens) / top)) if c.overhead.tokens > 0 else ""
        row = [str(c.k), _pct(c.overhead.tokens), _pct(c.overhead.attention)]
        if has_objective:
            row.append(f"{c.objective:,.4g}" if c.objective is not None else "")
        row += [bar, _edges(c.edges)]
        curve.add_row(*row, style="bold green" if c.k == p.k else None)
    out.append(curve)

    base = Table(title="baselines on the same data", title_justify="left")
    for name in ("ladder", "graphs", "tokens", "attention", "optimal@k", "edges"):
        base.add_column(name, justify="left" if name in ("ladder", "edges") else "right", overflow="fold")
    for b in p.baselines:
        same = b.optimal_at_same_k
        base.add_row(
            Text(b.name),
            str(b.graphs),
            _pct(b.overhead.tokens),
            _pct(b.overhead.attention),
            _pct(same.tokens) if same else "",
            _edges(b.edges) + (f"  ({b.beyond_last:,} beyond)" if b.beyond_last else ""),
        )
    out.append(base)

    if p.holdout is not None and p.holdout.overhead is not None:
        h = p.holdout
        held = p.holdout.overhead
        t = Table(title=Text(f"held-out check: fitted on {h.fit_lengths:,}, scored on {h.test_lengths:,} ({h.order})"), title_justify="left")
        t.add_column("ladder")
        t.add_column("tokens", justify="right")
        t.add_column("attention", justify="right")
        t.add_column("beyond last", justify="right")
        t.add_row("proposed", _pct(held.tokens), _pct(held.attention), str(h.beyond_last), style="bold green")
        for name, s in h.baselines.items():
            t.add_row(Text(name), _pct(s.tokens), _pct(s.attention), str(s.beyond_last))
        out.append(t)

    for note in p.notes:
        out.append(Text(f"note: {note}", style="yellow"))

    names = list(CONFIG_NAMES) if config == "all" else ([] if config == "none" else [config])
    for name in names:
        # Plain text under a rule, not a box: the snippet must survive copy and paste.
        out.append(Rule(Text(f"{name} config"), align="left"))
        out.append(Text(p.configs.get(name, "").rstrip("\n")))
    return out
