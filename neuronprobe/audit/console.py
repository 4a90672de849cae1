"""Console rendering of an audit and of the rule catalogue (rich renderables; the CLI prints them)."""

from __future__ import annotations

from itertools import groupby
from typing import Any

from neuronprobe.audit.model import SEVERITIES, SEVERITY_RANK, AuditSection
from neuronprobe.audit.rules import PROVENANCE_URLS, load_rules

STYLES = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def _file_order(section: AuditSection) -> list[str]:
    """Files worst first: by their worst severity, then by how many findings, then by name."""
    worst: dict[str, tuple[int, int]] = {}
    for f in section.findings:
        rank, count = worst.get(f.file, (len(SEVERITIES), 0))
        worst[f.file] = (min(rank, SEVERITY_RANK[f.severity]), count + 1)
    return sorted(worst, key=lambda name: (worst[name][0], -worst[name][1], name))


def render_audit(section: AuditSection) -> list[Any]:
    """Grouped by file, worst first; each finding with its line, rule, message and the fix for the stack."""
    from rich.text import Text

    parts: list[Any] = []
    by_file = {k: list(g) for k, g in groupby(sorted(section.findings, key=lambda f: f.file), key=lambda f: f.file)}
    for name in _file_order(section):
        parts.append(Text(name, style="bold underline"))
        for f in sorted(by_file[name], key=lambda f: (SEVERITY_RANK[f.severity], f.cell or 0, f.line, f.column)):
            line = Text("  ")
            line.append((f"cell {f.cell}, line {f.line}:{f.column}  " if f.cell is not None else f"{f.line}:{f.column}").ljust(8))
            line.append(f.severity.ljust(8), style=STYLES[f.severity])
            line.append(f"{f.rule}  ", style="bold")
            line.append(f.message)
            if not f.new:
                line.append("  (in baseline)", style="dim")
            parts.append(line)
            if f.snippet:
                parts.append(Text(f"          {f.snippet}", style="dim"))
            if f.copies:
                more = f" and {len(f.copies) - 3} more" if len(f.copies) > 3 else ""
                parts.append(
                    Text(
                        f"          also in {len(f.copies)} cop{'y' if len(f.copies) == 1 else 'ies'} of this file: {', '.join(f.copies[:3])}{more}",
                        style="dim",
                    )
                )
            parts.append(Text(f"          -> {f.fix}", style="green"))
    for p in section.problems:
        where = f"{p.file}:{p.line}" if p.line else p.file
        parts.append(Text(f"not audited/problem: {where}: {p.detail}", style="magenta"))
    counts = section.counts()
    summary = Text(f"{section.files_scanned} file(s) audited for the {section.stack} stack: ")
    summary.append(", ".join(f"{counts[s]} {s}(s)" for s in SEVERITIES))
    if section.suppressed:
        summary.append(f", {section.suppressed} suppressed inline")
    if section.baseline is not None:
        new = sum(1 for f in section.findings if f.new)
        summary.append(f"; {new} new since the baseline {section.baseline} ({section.baseline_known} known)")
    if section.problems:
        summary.append(f"; {len(section.problems)} problem(s)")
    parts.append(summary)
    return parts


def render_rules(stack: str | None = None) -> list[Any]:
    """Every rule with its severity, what it finds, why, the fix per stack and its sources."""
    from rich.text import Text

    parts: list[Any] = []
    for rule in load_rules().values():
        head = Text()
        head.append(rule.id, style="bold")
        head.append(f"  {rule.severity}", style=STYLES[rule.severity])
        head.append(f"  {rule.title}")
        parts.append(head)
        parts.append(Text(f"    {rule.why}"))
        for name, fix in (("xla", rule.fix_xla), ("native", rule.fix_native)):
            if stack in (None, name):
                label = "XLA-era torch-neuronx (trn1/inf2)" if name == "xla" else "TorchNeuron (trn2/trn3)"
                parts.append(Text(f"    fix, {label}: {fix}", style="green"))
        if rule.docs_silent:
            parts.append(Text(f"    docs silent: {rule.docs_silent}", style="dim"))
        if rule.provenance:
            parts.append(Text("    sources: " + ", ".join(PROVENANCE_URLS.get(p, p) for p in rule.provenance), style="dim"))
    parts.append(Text("Silence one finding with a comment on its line: # neuronprobe: ignore[rule-id]"))
    return parts
