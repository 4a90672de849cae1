"""The report as Markdown and as plain text: what text-only notebook frontends show.

Jupyter frontends pick the richest output they can draw: the HTML fragment in
JupyterLab, classic Notebook and VS Code; Markdown in frontends that draw no HTML;
plain text in a terminal IPython. Both texts say the same as the console summary:
the top-line verdict in words, the counts, and the findings worst first with their
place (``In [n], line k`` for a notebook cell) and fix.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from neuronprobe.vocabulary import Verdict

if TYPE_CHECKING:  # the model's classes only name types here: the model imports these renderers
    from neuronprobe.report.model import Finding, Report


# Findings listed in the text views; the rest are counted ("and N more").
TEXT_FINDINGS = 10


def _cell(text: object) -> str:
    """One Markdown table cell: pipes escaped, one line."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _worst_first(report: Report, limit: int) -> list[Finding]:
    return sorted(report.findings, key=lambda f: -f.verdict.rank)[:limit]


def counts_text(report: Report) -> str:
    """The counts row, the same figures as the console's (:meth:`Report.verdict_counts`)."""
    counts = report.verdict_counts()
    return " · ".join(f"{v} {counts[v]}" for v in Verdict)


def _where(f: Finding) -> str:
    """The finding's place, with the model-code callers that led to it (``via a.py:3 (forward)``)."""
    place = _cell(f.location)
    return place + (f" (via {_cell(f.chain_text)})" if f.call_chain else "")


def render_markdown(report: Report, limit: int = TEXT_FINDINGS) -> str:
    """A Markdown summary: verdict, counts and a findings table (at most ``limit`` rows)."""
    s = report.summary
    lines = [
        f"**neuronprobe: {_cell(report.model)} on {report.target}**: {report.verdict.words}",
        "",
        f"{s.ops_total} op calls, {s.distinct_ops} distinct · {s.device_graphs} device graph(s) · "
        f"{s.graph_breaks} graph break(s) · backend {report.backend.name}",
        "",
        counts_text(report),
        "",
    ]
    shown = _worst_first(report, limit)
    if not shown:
        lines.append("No findings.")
        return "\n".join(lines) + "\n"
    lines += ["| verdict | op | where | fix |", "|---|---|---|---|"]
    lines += [f"| {f.verdict} | `{_cell(f.op)}` | {_where(f)} | {_cell(f.fix)} |" for f in shown]
    if len(report.findings) > len(shown):
        lines += ["", f"and {len(report.findings) - len(shown)} more finding(s): `report.findings_df()` lists them all."]
    return "\n".join(lines) + "\n"


def render_text(report: Report, limit: int = TEXT_FINDINGS) -> str:
    """Plain text for a terminal IPython: the same lines, without table markup."""
    s = report.summary
    lines = [
        f"neuronprobe: {report.model} on {report.target}: {report.verdict.words}",
        f"{s.ops_total} op calls, {s.distinct_ops} distinct · {s.device_graphs} device graph(s) · "
        f"{s.graph_breaks} graph break(s) · backend {report.backend.name}",
        counts_text(report),
    ]
    shown = _worst_first(report, limit)
    for f in shown:
        lines.append(f"  {f.verdict:<14} {f.op}  {f.location}" + (f" ({f.origins_text})" if len(f.origins) > 1 else ""))
        if f.source_line:
            lines.append(f"      {f.source_line}")
        if f.call_chain:
            lines.append(f"      via {f.chain_text}")
        if f.confirmation is not None:  # a risky low-precision construct, as the parity run measured it
            lines.append(f"      parity: {f.confirmation.words}")
        if f.fix:
            lines.append(f"      fix: {' '.join(f.fix.split())}")
    if len(report.findings) > len(shown):
        lines.append(f"and {len(report.findings) - len(shown)} more finding(s): report.findings_df() lists them all")
    return "\n".join(lines)
