"""Console rendering of a :class:`RunDiff` for ``neuronprobe diff`` and ``nightly``.

Returns rich renderables; only the CLI prints them.
"""

from __future__ import annotations

from typing import Any

from neuronprobe.report.diff import METRICS, format_metric
from neuronprobe.report.schema.run_diff import FindingChange, RunDiff


def render_diff(diff: RunDiff) -> Any:
    """The diff as a rich Group: header, gate status, metrics, findings, version changes."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    parts: list[Any] = [Text.assemble(("base ", "dim"), diff.base_label), Text.assemble(("new  ", "dim"), diff.new_label)]
    parts.append(gate_line(diff))

    metrics = Table(title="metrics", title_justify="left", show_edge=False, pad_edge=False)
    for column in ("metric", "base", "new", "change"):
        metrics.add_column(column, justify="left" if column == "metric" else "right")
    for name, (base, new) in diff.metrics.items():
        change = new - base if base is not None and new is not None else None
        metrics.add_row(
            Text(METRICS.get(name, name)),  # a metric name from a report file: data, not markup
            format_metric(name, base),
            format_metric(name, new),
            format_metric(name, change, signed=True),
        )
    parts.append(metrics)

    for title, changes, style in (
        ("new findings", diff.new_findings, "red"),
        ("removed findings", diff.removed_findings, "green"),
        ("moved findings (same code at another line; not a change)", diff.moved_findings, "dim"),
    ):
        if changes:
            parts.append(_findings_table(title, changes, style))

    changed = {**diff.version_changes, **diff.metadata_changes}
    if changed:
        versions = Table(title="versions and run settings that changed", title_justify="left", show_edge=False)
        for column in ("what", "base", "new"):
            versions.add_column(column)
        for key, (base_v, new_v) in changed.items():
            versions.add_row(Text(key), Text(base_v or "-"), Text(new_v or "-"))
        parts.append(versions)
    return Group(*parts)


def gate_line(diff: RunDiff) -> Any:
    """One line: regression (and why), no regression, or not comparable (never gated)."""
    from rich.text import Text

    if not diff.comparable:
        extra = f"; {len(diff.ungated_regressions)} change(s) would count as regressions" if diff.ungated_regressions else ""
        return Text(f"not comparable, not gated: {diff.not_comparable_reason}{extra}", style="yellow")
    if diff.regressions:
        text = Text(f"{len(diff.regressions)} regression(s):", style="bold red")
        for line in diff.regressions:
            text.append(f"\n  - {line}", style="red")
        return text
    return Text("no regression", style="bold green")


def _findings_table(title: str, changes: list[FindingChange], style: str) -> Any:
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
    for column in ("verdict", "op", "where", "message"):
        table.add_column(column, overflow="fold")
    for c in changes:
        where = str(c.location)
        if c.base_line is not None:
            where += f" (was line {c.base_line})"
        verdict_style = style if c.verdict.is_problem else "dim"
        table.add_row(Text(str(c.verdict), style=verdict_style), Text(c.op), Text(where), Text(c.message))
    return table
