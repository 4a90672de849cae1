"""Console rendering of a :class:`DecodeProposal` as rich renderables (the CLI prints them).

Every string from the proposal reaches rich as :class:`rich.text.Text`, never as markup (a name
with ``[/bold]`` in it was a ``MarkupError``, issue 34.5): titles, cells and rules alike.
"""

from __future__ import annotations

from typing import Any

from neuronprobe.formatting import format_bytes, format_percent
from neuronprobe.report.model import DecodeHoldout, DecodeProposal, MemoryFit

DECODE_CONFIG_NAMES: tuple[str, ...] = ("nxd_inference", "vllm_neuron", "vllm_nxdi", "transformers_neuronx")


def _pct(x: float | None) -> str:
    return "" if x is None else format_percent(x)


def _edges(edges: list[int], limit: int = 12) -> str:
    if len(edges) <= limit:
        return ", ".join(map(str, edges))
    return ", ".join(map(str, edges[: limit - 2])) + f", ... , {edges[-1]}"


def render_decode(p: DecodeProposal, config: str = "nxd_inference") -> list[Any]:
    """Headline, curve, baselines, batch plans, memory per TP, holdout, notes and a JSON config (or all)."""
    from rich.rule import Rule
    from rich.text import Text

    out: list[Any] = [*_headline(p), _curve_table(p), _baseline_table(p)]
    if p.batch_plan is not None and p.timeline is not None:
        out.append(_batch_table(p))
    if p.memory is not None:
        out.extend(_memory_lines(p.memory))
    if p.holdout is not None:
        out.append(_holdout_table(p.holdout))
    for note in p.notes:
        out.append(Text(f"note: {note}", style="yellow"))
    names = list(DECODE_CONFIG_NAMES) if config == "all" else ([] if config == "none" else [config])
    for name in names:
        out.append(Rule(Text(f"{name} config (JSON; buckets fitted with the {p.runtime} rule)"), align="left"))
        out.append(Text(p.configs.get(name, "").rstrip("\n")))
    return out


def _headline(p: DecodeProposal) -> list[Any]:
    """The traffic in one line, then the proposed buckets and their overheads in a panel."""
    from rich.panel import Panel
    from rich.text import Text

    head = Text()
    head.append(f"{p.requests:,} requests, {p.decode_steps:,} decode steps, last bucket {p.max_len}", style="bold")
    head.append(f"   runtime: {p.runtime} (fit {p.fit})")
    if p.speculation_length:
        head.append(f"   speculation {p.speculation_length}")
    if p.step_model:
        head.append(f"\nstep model: {p.step_model}")
    if p.source:
        head.append(f"\n{p.source}", style="dim")

    best = Text()
    best.append(f"token-generation buckets (k={p.k}): ", style="bold green")
    best.append(", ".join(map(str, p.edges)), style="bold")
    best.append(f"\npadded KV reads: {_pct(p.kv_overhead)}")
    if p.step_overhead is not None:
        best.append(f"   modelled step time: {_pct(p.step_overhead)} over the real lengths")
    return [head, Panel(best, expand=False)]


def _curve_table(p: DecodeProposal) -> Any:
    from rich.table import Table

    curve = Table(title="decode overhead by number of graphs (exact optimum for each k)", title_justify="left")
    for name in ("k", "padded KV", "step time", "edges"):
        curve.add_column(name, justify="left" if name == "edges" else "right", overflow="fold")
    for c in p.curve:
        curve.add_row(str(c.graphs), _pct(c.kv_overhead), _pct(c.step_overhead), _edges(c.edges), style="bold green" if c.edges == p.edges else None)
    return curve


def _baseline_table(p: DecodeProposal) -> Any:
    from rich.table import Table
    from rich.text import Text

    base = Table(title="baselines on the same decode steps", title_justify="left")
    for name in ("ladder", "graphs", "padded KV", "step time", "optimum@graphs", "edges"):
        base.add_column(name, justify="left" if name in ("ladder", "edges") else "right", overflow="fold")
    for b in p.baselines:
        base.add_row(
            Text(b.name),
            str(b.graphs),
            _pct(b.kv_overhead),
            _pct(b.step_overhead),
            _pct(b.optimal_kv_overhead),
            _edges(b.edges) + (f"  ({b.beyond_last:,} beyond)" if b.beyond_last else ""),
        )
    return base


def _batch_table(p: DecodeProposal) -> Any:
    """The continuous-batching plans (the proposal first), with the replay they were scored on in the title."""
    from rich.table import Table
    from rich.text import Text

    assert p.batch_plan is not None and p.timeline is not None
    t = p.timeline
    plans = Table(
        title=Text(
            f"continuous batching: {t.steps:,} steps, mean batch {t.mean_batch:.2f} of {t.max_batch}, "
            f"{t.duration_s:,.0f} s (step time: {t.step_seconds_source}); graph budget {p.max_graphs}"
        ),
        title_justify="left",
    )
    for name in ("plan", "batch buckets", "sequence buckets", "graphs", "padded KV", "step time", "method"):
        plans.add_column(name, justify="right" if name in ("graphs", "padded KV", "step time") else "left", overflow="fold")
    for i, plan in enumerate([p.batch_plan, *p.batch_baselines]):
        plans.add_row(
            Text(plan.name),
            _edges(plan.batch_buckets),
            _edges(plan.seq_buckets),
            str(plan.graphs),
            _pct(plan.kv_overhead),
            _pct(plan.step_overhead),
            Text(plan.method),
            style="bold green" if i == 0 else None,
        )
    return plans


def _memory_lines(m: MemoryFit) -> list[Any]:
    """The memory per core at each TP degree (the smallest that fits in bold), the reserve's source and the notes."""
    from rich.table import Table
    from rich.text import Text

    title = f"memory per core on {m.target} ({m.dtype}): bucket {m.bucket} x batch {m.batch}; "
    title += f"smallest TP that fits: {m.smallest_tp}" if m.smallest_tp else "fits at no TP degree"
    mem = Table(title=Text(title), title_justify="left")
    for name in ("TP", "weights", "KV", "reserve", "total", "HBM", "fits", "KV heads/rank", "longest bucket", "largest batch"):
        mem.add_column(name, justify="left" if name in ("fits", "KV heads/rank") else "right")
    for r in m.rows:
        mem.add_row(
            str(r.tp_degree),
            format_bytes(r.weights_bytes),
            format_bytes(r.kv_bytes),
            format_bytes(r.reserve_bytes),
            format_bytes(r.total_bytes),
            format_bytes(r.hbm_bytes),
            "yes" if r.fits else "no",
            Text(f"{r.kv_heads_per_rank} ({r.kv_sharding})"),
            "none" if r.longest_bucket is None else str(r.longest_bucket),
            "none" if r.largest_batch is None else str(r.largest_batch),
            style="bold green" if r.tp_degree == m.smallest_tp else None,
        )
    return [mem, Text(f"reserve per core: {m.reserve_source}", style="dim"), *(Text(f"note: {note}", style="bold yellow") for note in m.notes)]


def _holdout_table(h: DecodeHoldout) -> Any:
    from rich.table import Table
    from rich.text import Text

    t2 = Table(title=Text(f"held-out check: fitted on {h.fit_requests:,} requests, scored on {h.test_requests:,} ({h.order})"), title_justify="left")
    for name in ("ladder", "padded KV", "step time", "beyond last"):
        t2.add_column(name, justify="left" if name == "ladder" else "right")
    for name, s in h.ladders.items():
        t2.add_row(Text(name), _pct(s.kv_overhead), _pct(s.step_overhead), str(s.beyond_last), style="bold green" if name == "proposed" else None)
    for name, s in h.batch_plans.items():
        t2.add_row(
            Text(f"batching: {name}"), _pct(s.kv_overhead), _pct(s.step_overhead), str(s.beyond_last), style="bold green" if name == "proposed" else None
        )
    return t2
