"""Console lines for the risky low-precision constructs of a parity run (issue 25, point 3).

``neuronprobe parity`` prints no op findings (it runs no op analysis), so its risky
constructs get their own block: the place, the rule, the message (with what the
emulation measured) and the fix. Returns a rich renderable; only the CLI prints it.
"""

from __future__ import annotations

from typing import Any

from neuronprobe.report.schema.findings import Finding
from neuronprobe.report.schema.report import ReportData
from neuronprobe.rules import RuleKind, bundled_registry


def risky_findings(report: ReportData) -> list[Finding]:
    """The report's findings made by the risky-construct rules, in report order."""
    ids = bundled_registry().ids([RuleKind.PRECISION])
    return [f for f in report.findings if f.rule in ids]


def render_risky(report: ReportData) -> Any:
    """The block, or a line saying none was found."""
    from rich.console import Group
    from rich.text import Text

    found = risky_findings(report)
    if not found:
        return Text("risky low-precision constructs: none in the precisions run", style="dim")
    parts: list[Any] = [Text(f"risky low-precision constructs: {len(found)}", style="bold")]
    for f in found:
        head = Text.assemble(("  " + str(f.location), "bold"), f"  {f.rule}  {f.op}")
        if f.count > 1:
            head.append(f"  x{f.count}")
        parts.append(head)
        if f.source_line:
            parts.append(Text(f"      {f.source_line}", style="cyan"))
        parts.append(Text(f"      {f.message}"))
        parts.append(Text(f"      fix: {f.fix}", style="dim"))
    return Group(*parts)
