"""The report as Markdown and as plain text: what text-only notebook frontends show.

Jupyter frontends pick the richest output they can draw: the HTML fragment in
JupyterLab, classic Notebook and VS Code; Markdown in frontends that draw no HTML;
plain text in a terminal IPython. Both texts say the same as the console summary:
the top-line verdict in words, the counts, and the findings worst first with their
place (``In [n], line k`` for a notebook cell) and fix.

Every string from the report is data, as in the HTML (which autoescapes): a model
name such as ``<img src=x onerror=...>`` must not become an image in a notebook or
on GitHub. In Markdown each such string is one line with HTML's ``& < >`` as
entities and Markdown's own punctuation backslash-escaped (:func:`md_text`), or a
code span whose fence is longer than any run of backticks inside (:func:`md_code`).
Plain text has no markup, but a terminal does: control characters (an ANSI escape,
a bidi override) are shown escaped (:func:`neuronprobe.console_io.inert`).
"""

from __future__ import annotations

import re

from neuronprobe.console_io import inert
from neuronprobe.report.schema.findings import Finding
from neuronprobe.report.schema.report import ReportData
from neuronprobe.vocabulary import Verdict

# Findings listed in the text views; the rest are counted ("and N more").
TEXT_FINDINGS = 10


# Markdown punctuation that can open emphasis, a link, an image, a heading, a table cell, a strikethrough or code.
# An underscore between two letters or digits opens no emphasis (CommonMark 6.2), so `tiny_encoder` stays as it is.
_MD_PUNCTUATION = re.compile(r"([\\`*\[\]{}#!|~]|(?<![^\W_])_|_(?![^\W_]))")


def _one_line(text: object) -> str:
    return " ".join(inert(str(text)).split())


def md_text(text: object) -> str:
    """``text`` as inert Markdown: one line, ``& < >`` as HTML entities, Markdown punctuation escaped."""
    line = _one_line(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_PUNCTUATION.sub(r"\\\1", line)


def md_code(text: object) -> str:
    """``text`` as a Markdown code span (nothing inside is markup); a pipe escaped, as a GFM table cell needs."""
    line = _one_line(text).replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", line)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if line.startswith("`") or line.endswith("`") or not line.strip() else ""
    return f"{fence}{pad}{line}{pad}{fence}"


_cell = md_text


def _worst_first(report: ReportData, limit: int) -> list[Finding]:
    return sorted(report.findings, key=lambda f: -f.verdict.rank)[:limit]


def counts_text(report: ReportData) -> str:
    """The counts row, the same figures as the console's (:meth:`Report.verdict_counts`)."""
    counts = report.verdict_counts()
    return " · ".join(f"{v} {counts[v]}" for v in Verdict)


def _where(f: Finding) -> str:
    """The finding's place, with the model-code callers that led to it (``via a.py:3 (forward)``)."""
    place = _cell(f.location)
    return place + (f" (via {_cell(f.chain_text)})" if f.call_chain else "")


def render_markdown(report: ReportData, limit: int = TEXT_FINDINGS) -> str:
    """A Markdown summary: verdict, counts and a findings table (at most ``limit`` rows)."""
    s = report.summary
    lines = [
        f"**neuronprobe: {_cell(report.model)} on {_cell(report.target)}**: {report.verdict.words}",
        "",
        f"{s.ops_total} op calls, {s.distinct_ops} distinct · {s.device_graphs} device graph(s) · "
        f"{s.graph_breaks} graph break(s) · backend {_cell(report.backend.name)}",
        "",
        counts_text(report),
        "",
    ]
    shown = _worst_first(report, limit)
    if not shown:
        lines.append("No findings.")
        return "\n".join(lines) + "\n"
    lines += ["| verdict | op | where | fix |", "|---|---|---|---|"]
    lines += [f"| {f.verdict} | {md_code(f.op)} | {_where(f)} | {_cell(f.fix)} |" for f in shown]
    if len(report.findings) > len(shown):
        lines += ["", f"and {len(report.findings) - len(shown)} more finding(s): `report.findings_df()` lists them all."]
    return "\n".join(lines) + "\n"


def render_text(report: ReportData, limit: int = TEXT_FINDINGS) -> str:
    """Plain text for a terminal IPython: the same lines, without table markup."""
    s = report.summary
    lines = [
        f"neuronprobe: {_one_line(report.model)} on {_one_line(report.target)}: {report.verdict.words}",
        f"{s.ops_total} op calls, {s.distinct_ops} distinct · {s.device_graphs} device graph(s) · "
        f"{s.graph_breaks} graph break(s) · backend {_one_line(report.backend.name)}",
        counts_text(report),
    ]
    shown = _worst_first(report, limit)
    for f in shown:
        lines.append(f"  {f.verdict:<14} {_one_line(f.op)}  {_one_line(f.location)}" + (f" ({f.origins_text})" if len(f.origins) > 1 else ""))
        if f.source_line:
            lines.append(f"      {_one_line(f.source_line)}")
        if f.call_chain:
            lines.append(f"      via {_one_line(f.chain_text)}")
        if f.confirmation is not None:  # a risky low-precision construct, as the parity run measured it
            lines.append(f"      parity: {f.confirmation.words}")
        if f.fix:
            lines.append(f"      fix: {_one_line(f.fix)}")
    if len(report.findings) > len(shown):
        lines.append(f"and {len(report.findings) - len(shown)} more finding(s): report.findings_df() lists them all")
    return "\n".join(lines)
