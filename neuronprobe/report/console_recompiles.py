"""Console rendering of the recompiles section: graphs per policy, what was observed, and why.

Returns a rich renderable; only the CLI prints it (``report/console.py`` includes it).
"""

from __future__ import annotations

from typing import Any

from neuronprobe.report.model import RecompileCause, RecompileSection

# Causes listed on the console; the JSON and HTML reports have all of them.
TOP_CAUSES = 6
# first_seen positions shown per policy before "...".
FIRST_SEEN_SHOWN = 6
# How each kind of cause reads in the cause list.
CAUSE_TAGS = {
    "shape": "new input shape",
    "specialization": "graph changes with shape",
    "branch": "graph changes with shape",
    "graph_change": "graph changes with shape",
    "guard": "other guard",
    "partial_batch": "partial last batch",
}


def human_seconds(seconds: float) -> str:
    """``95 s``, ``12.5 min``, ``3.2 h``: compile-time estimates read at a glance."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def _first_seen(positions: list[int]) -> str:
    shown = ", ".join(f"{p:,}" for p in positions[:FIRST_SEEN_SHOWN])
    more = len(positions) - FIRST_SEEN_SHOWN
    return shown + (f", ... (+{more:,})" if more > 0 else "")


def _where(c: RecompileCause) -> str:
    if not c.file:
        return ""
    return f"{c.file}:{c.line}" if c.line else c.file


def render_recompiles(section: RecompileSection) -> Any:
    """The recompiles section as a rich Group: header, policy table, observed line, causes."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    parts: list[Any] = [
        Text.assemble(
            ("\nrecompiles", "bold"),
            f": {section.calls:,} calls, {section.distinct_signatures:,} distinct input signatures",
            (f" ({section.source})" if section.source else "", "dim"),
        )
    ]
    table = Table(show_edge=False, pad_edge=False, box=None)
    for column, justify in (("policy", "left"), ("graphs", "right"), ("compile time", "right"), ("first needed at call", "left")):
        table.add_column(column, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for name, p in section.predicted.items():
        style = "bold red" if name == "static" and p.graphs > 1 else ""
        table.add_row(
            Text(name),
            Text(f"{p.graphs:,}", style=style),
            Text(human_seconds(p.compile_seconds)),
            Text(_first_seen(p.first_seen), style="dim"),
        )
    parts.append(table)
    for name, p in section.predicted.items():
        if p.note:
            parts.append(Text(f"  {name}: {p.note}", style="dim"))
    if section.compile_seconds_per_graph:
        parts.append(
            Text(
                f"compile time per graph: {human_seconds(section.compile_seconds_per_graph)} ({section.compile_seconds_source or 'estimate'})",
                style="dim",
            )
        )
    for label, ob in (("observed", section.observed), ("CPU evidence", section.cpu_evidence)):
        if ob is None:
            continue
        verdict = "" if ob.matches_static is None else (" = static prediction" if ob.matches_static else " != static prediction")
        style = "green" if ob.matches_static else "yellow" if ob.matches_static is False else ""
        line = Text.assemble(
            f"{label} ({ob.source}): ",
            (f"{ob.compiles} compile(s) for {ob.shapes_run} shape(s){verdict}", style),
        )
        if ob.note:
            line.append(f"; {ob.note}", style="dim")
        parts.append(line)
    if section.causes:
        parts.append(Text("causes", style="bold"))
        for c in section.causes[:TOP_CAUSES]:
            tag = CAUSE_TAGS.get(c.kind, c.kind)
            if c.kind in ("specialization", "branch") and not c.graph_changes_with_shape:
                tag = "same ops, new constants"
            line = Text.assemble(
                ("  " + tag.ljust(25), "red" if c.graph_changes_with_shape else "yellow"),
                f"x{c.count}  ",
                (_where(c), "bold"),
            )
            parts.append(line)
            parts.append(Text(f"      {c.reason}"))
            if c.source_line:
                parts.append(Text(f"      {c.source_line}", style="cyan"))
            if c.fix:
                parts.append(Text(f"      fix: {c.fix}", style="dim"))
        if len(section.causes) > TOP_CAUSES:
            parts.append(Text(f"  ... {len(section.causes) - TOP_CAUSES} more in the JSON/HTML report", style="dim"))
    return Group(*parts)
