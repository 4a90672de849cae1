"""Console rendering of the recompiles section: graphs per policy, what was observed, and why.

Returns a rich renderable; only the CLI prints it (``report/console.py`` includes it).
"""

from __future__ import annotations

from typing import Any

from neuronprobe.formatting import format_duration
from neuronprobe.report.schema.recompiles import RecompileSection
from neuronprobe.vocabulary import CauseKind

# Causes listed on the console; the JSON and HTML reports have all of them.
TOP_CAUSES = 6
# first_seen positions shown per policy before "...".
FIRST_SEEN_SHOWN = 6


def _first_seen(positions: list[int]) -> str:
    shown = ", ".join(f"{p:,}" for p in positions[:FIRST_SEEN_SHOWN])
    more = len(positions) - FIRST_SEEN_SHOWN
    return shown + (f", ... (+{more:,})" if more > 0 else "")


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
            Text(format_duration(p.compile_seconds)),
            Text(_first_seen(p.first_seen), style="dim"),
        )
    parts.append(table)
    for name, p in section.predicted.items():
        if p.note:
            parts.append(Text(f"  {name}: {p.note}", style="dim"))
    if section.compile_seconds_per_graph:
        parts.append(
            Text(
                f"compile time per graph: {format_duration(section.compile_seconds_per_graph)} ({section.compile_seconds_source or 'estimate'})",
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
            tag = c.kind.tag
            if c.kind in (CauseKind.SPECIALIZATION, CauseKind.BRANCH) and not c.graph_changes_with_shape:
                tag = "same ops, new constants"
            line = Text.assemble(
                ("  " + tag.ljust(25), "red" if c.graph_changes_with_shape else "yellow"),
                f"x{c.count}  ",
                (str(c.location), "bold"),
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
