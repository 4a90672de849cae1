"""The terminal tables of ``nightly``, ``doctor`` and ``rules``: renderers, so the command line only prints them.

Each takes the data its command already has (no detection, no registry lookup here: the report
layer knows nothing of how the data was made) and returns a rich ``Table``; every value a user or
the environment wrote goes in as ``Text``, never as markup.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rich.table import Table
from rich.text import Text


def render_nightly_table(result: Any) -> Table:
    """Tonight's models: name, status and the night each was compared with (a ``NightlyResult``)."""
    from neuronprobe.report.nightly_html import STATUS_TEXT

    table = Table(title=f"nightly {result.date}", title_justify="left", show_edge=False)
    for column in ("model", "status", "baseline"):
        table.add_column(column)
    for o in result.outcomes:
        table.add_row(Text(o.name), Text(STATUS_TEXT[o.status]), Text(o.baseline_date or "-"))
    return table


def render_rules_table(entries: list[Any]) -> Table:
    """Every registered rule: id, verdict (the first of several, ``+n`` more), severity, catalogue and provenance."""
    table = Table(title=f"{len(entries)} rules", title_justify="left", show_edge=False)
    for column in ("id", "verdict", "severity", "catalogue"):
        table.add_column(column, no_wrap=True)
    table.add_column("provenance", overflow="fold")
    for r in entries:
        verdicts = f"{r.verdicts[0]} +{len(r.verdicts) - 1}" if len(r.verdicts) > 1 else (r.verdict or "-")  # all in --json
        table.add_row(Text(r.id), Text(verdicts), Text(str(r.severity)), Text(str(r.kind)), Text(r.provenance))
    return table


def render_doctor_table(
    detection: Any,
    chosen: Any,
    packages: Mapping[str, str],
    xla_summary: str,
    native_label: str,
    checks: Iterable[Any],
    degraded: list[str],
) -> Table:
    """The detected Neuron environment: the stack and its packages (``packages``: module -> distribution),
    the devices, the live backend, what ``--backend auto`` picks, the xla-cpu environment, the native
    table and each private torch internal's self-check."""
    table = Table(title="neuronprobe doctor", title_justify="left", show_header=False, show_edge=False)
    table.add_column("what", style="bold")
    table.add_column("value", overflow="fold")
    stack = detection.kind_label + (" — THE TEST FAKE, not hardware" if detection.fake else "")
    table.add_row("Neuron stack", Text(stack))
    for module, dist in packages.items():
        version = detection.versions.get(dist)
        path = detection.paths.get(module)
        value = f"{version or '(version unknown)'}  {path}" if path else "not installed"
        table.add_row(dist, Text(value))
    table.add_row("Neuron devices", Text(f"{detection.devices} (/dev/neuron*)"))
    if detection.problem:
        table.add_row("live backend", Text(f"unavailable: {detection.problem}", style="red"))
        table.add_row("what to do", Text(detection.hint))
    else:
        table.add_row("live backend", Text("available" + (" (tests only: NEURONPROBE_ALLOW_FAKE_SDK=1)" if detection.fake else "")))
    if chosen is not None:
        table.add_row("--backend auto", Text(f"{chosen.name}: {chosen.detail}"))
    for note in detection.notes:
        table.add_row("note", Text(note))
    table.add_row("xla-cpu environment", Text(xla_summary))  # a path: data, not markup
    table.add_row("native table", Text(native_label))
    for check in checks:
        status = "ok     " if check.ok else "MISSING"
        value = f"{status} {check.internal}" + ("" if check.ok else f" ({check.detail}): degrades {check.degrades}")
        table.add_row("torch internal", Text(value, style="" if check.ok else "red"))
    table.add_row("degraded features", Text("; ".join(degraded) or "none"))
    return table


__all__ = ["render_doctor_table", "render_nightly_table", "render_rules_table"]
