"""Render a Report as one self-contained HTML page, or as a fragment for notebooks.

The page answers "will this run well on Neuron as it is, and if not, what do I
change, where" in its first screen (verdict banner, summary cards, findings)
and holds the detail below. Design rules, each for a reason:

* One file, nothing from the network: CSS and JS are inlined and plots are
  inline SVG, because Neuron hosts are often offline and reports get mailed
  around. A Content-Security-Policy meta tag forbids every fetch and allows
  only our own script (by its hash), so even a bug in escaping could not load
  or run anything else.
* Jinja2 with autoescape on: every string from the model, the compiler or the
  file system (paths, source lines, messages) is escaped. Only our own CSS, JS
  and matplotlib's SVG are marked safe.
* Readable without JS: tables are rendered in full on the server; the script
  only adds sorting, filtering and copy buttons.
* The notebook fragment (``embedded=True``) has the same content, no
  ``<html>``/``<head>``, and CSS whose every selector starts with
  ``.np-report``, so it styles nothing else in the notebook.
* Deterministic: the same Report renders to the same bytes (no render time,
  no random ids), so two reports diff cleanly.
* Nothing is read from the environment here: only the Report is rendered.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import importlib.resources
from dataclasses import dataclass, field
from typing import Any

from neuronprobe.formatting import format_bytes, format_duration, format_percent, format_signed
from neuronprobe.report.schema.buckets import Holdout
from neuronprobe.report.schema.findings import Finding, OpSummary
from neuronprobe.report.schema.report import ReportData
from neuronprobe.vocabulary import NOTE_VERDICTS, PROBLEM_VERDICTS, Phase, TopVerdict, Verdict, location

TEMPLATE_PAGE = "report.html.j2"
TEMPLATE_FRAGMENT = "embedded.html.j2"
CSS_FILE = "report.css"
JS_FILE = "report.js"

# Findings are shown worst first: what blocks compilation before what only slows it down.
FINDING_ORDER: tuple[Verdict, ...] = (*reversed(PROBLEM_VERDICTS), *NOTE_VERDICTS)
# The op inventory can list hundreds of modules for one op (every layer of a
# transformer); the table shows this many and folds the rest.
MODULES_SHOWN = 3
SHAPES_SHOWN = 3


@dataclass(frozen=True)
class Banner:
    """The one-line answer at the top of the report."""

    level: str  # CSS class: ok | warn | bad
    title: str
    detail: str


@dataclass
class FindingGroup:
    verdict: Verdict
    css: str
    legend: str
    findings: list[Finding] = field(default_factory=list)

    @property
    def calls(self) -> int:
        return sum(f.count for f in self.findings)


@dataclass
class Card:
    label: str
    value: str
    detail: str = ""
    level: str = ""  # "", "ok", "warn", "bad"


@dataclass
class OpRow:
    op: OpSummary
    css: str
    modules_shown: list[str]
    modules_more: list[str]
    shapes_shown: list[str]
    severity: int


def verdict_css(verdict: Verdict) -> str:
    """The CSS class of a verdict (the schema admits no other verdicts, so every one has a style)."""
    return f"v-{verdict}"


# -- the view model ----------------------------------------------------------------


def banner(report: ReportData) -> Banner:
    verdict = report.verdict
    target = report.target
    by_verdict = {v: len(report.findings_with({v})) for v in PROBLEM_VERDICTS}
    if verdict is TopVerdict.WILL_NOT_COMPILE:
        blocking = [f"{by_verdict[v]} {v}" for v in FINDING_ORDER if v.blocks_compile and by_verdict[v]]
        return Banner(
            "bad",
            f"Will not compile on {target} as it is",
            f"{', '.join(blocking)} finding(s) stop the Neuron compile; fix them first (see Findings below).",
        )
    if verdict is TopVerdict.RUNS_WITH_FALLBACKS:
        s = report.summary
        return Banner(
            "warn",
            f"Runs on {target}, with CPU fallbacks",
            f"{by_verdict[Verdict.CPU_FALLBACK]} op(s) run on the host: the forward splits into "
            f"{s.device_graphs} device graph(s) and copies {format_bytes(s.fallback_bytes_per_call)} "
            "between host and device per call.",
        )
    if verdict is TopVerdict.RUNS_UNOBSERVED:
        return Banner(
            "warn",
            f"Predicted to run on {target} as it is, not confirmed",
            "No captured op is predicted to fail, but the live backend's observation was stopped or died "
            "before it finished; see what could not be analysed below.",
        )
    if verdict is TopVerdict.INCOMPLETE:
        return Banner(
            "bad",
            f"Incomplete answer for {target}",
            f"No captured op is predicted to fail, but {report.capture.incomplete}; see what could not be analysed below.",
        )
    if verdict is TopVerdict.NOT_ANALYSED:
        return Banner(
            "bad",
            f"Could not be analysed for {target}",
            "Capture failed before any op was recorded; see what could not be analysed below.",
        )
    if verdict is TopVerdict.RUNS_SPLIT:
        return Banner(
            "warn",
            f"Runs on {target}, split into more than one device graph per call",
            f"Every captured op lowers, but the report counts {', '.join(report.splits_per_call())}: see the graph breaks and findings below.",
        )
    notes = report.findings_with(frozenset(NOTE_VERDICTS))
    return Banner(
        "ok",
        f"Runs on {target} as it is",
        "Every captured op lowers to Neuron or decomposes into ops that do."
        + (f" {len(notes)} precision note(s): the device computes them in a narrower dtype (see Findings below)." if notes else ""),
    )


def summary_cards(report: ReportData) -> list[Card]:
    s = report.summary
    unsupported = sum(n for v, n in report.verdict_counts().items() if v.is_problem)
    cards = [
        Card(
            "Supported op calls",
            format_percent(s.support_percentage),
            f"{s.ops_total:,} op calls, {s.distinct_ops:,} distinct ops; {max(unsupported, 0):,} not supported",
            "ok" if s.support_percentage >= 100 else ("bad" if report.verdict is TopVerdict.WILL_NOT_COMPILE else "warn"),
        ),
        Card(
            "Findings",
            f"{len(report.findings):,}",
            ", ".join(f"{len(report.findings_with({v}))} {v}" for v in FINDING_ORDER if report.findings_with({v})) or "nothing to fix",
            "ok" if not report.findings else ("bad" if report.verdict is TopVerdict.WILL_NOT_COMPILE else "warn"),
        ),
        Card(
            "Device graphs",
            f"{s.device_graphs:,}",
            "the forward is one Neuron graph" if s.device_graphs <= 1 else "host ops and breaks split the forward",
            "" if s.device_graphs <= 1 else "warn",
        ),
        Card(
            "Fallback copies per call",
            format_bytes(s.fallback_bytes_per_call),
            "host<->device bytes per forward for CPU fallbacks",
            "" if not s.fallback_bytes_per_call else "warn",
        ),
        Card("Graph breaks", f"{s.graph_breaks:,}", "places where capture had to stop the graph", "" if not s.graph_breaks else "warn"),
    ]
    cards.append(_compiles_card(report))
    if report.train is not None:
        cards.append(_phases_card(report))
    return cards


def _phases_card(report: ReportData) -> Card:
    """--train: the training step per phase, and what host reads in the loop cost."""
    t = report.train
    assert t is not None
    parts = [
        f"{phase}: {p.findings} finding(s)" + ("" if phase is Phase.LOOP else f", {format_percent(p.support_percentage)} of {p.ops_total:,} op calls")
        for phase, p in report.summary.phases.items()
    ]
    if t.observed_graphs_per_step is not None:
        parts.append(
            f"observed on the XLA device: {t.observed_graphs_per_step} graph(s), "
            f"{t.observed_host_syncs_per_step} host sync(s), "
            + (f"{t.observed_uploads_per_step} upload(s), " if t.observed_uploads_per_step is not None else "")
            + f"{t.observed_compiles} compile(s)"
        )
    worst = any(p.findings for p in report.summary.phases.values())
    return Card(
        "Training step",
        f"{t.graphs_per_step:,} graph(s) per step",
        f"{t.host_syncs_per_step} host sync(s) and {t.uploads_per_step} host-to-device upload(s) per step; "
        f"loss {t.loss}; optimizer {t.optimizer}. " + "; ".join(parts),
        "warn" if worst or t.graphs_per_step > 1 else "ok",
    )


def _compiles_card(report: ReportData) -> Card:
    section = report.recompiles
    if section is None or not section.predicted:
        return Card("Predicted compiles", "n/a", "no traffic given (--shapes or --lengths)")
    parts = [f"{name}: {p.graphs:,}" for name, p in section.predicted.items()]
    worst = max(p.graphs for p in section.predicted.values())
    best = min(p.graphs for p in section.predicted.values())
    value = f"{best:,}" if best == worst else f"{best:,}–{worst:,}"
    return Card("Predicted compiles", value, f"graphs for {section.calls:,} calls; " + ", ".join(parts))


def verdict_bar(report: ReportData) -> list[tuple[Verdict, str, int, float]]:
    """(verdict, css, op calls, percent of calls) for the stacked bar under the cards."""
    counts = report.verdict_counts()
    total = sum(counts.values())
    if total <= 0:
        return []
    return [(v, verdict_css(v), counts[v], 100.0 * counts[v] / total) for v in Verdict if counts.get(v)]


def finding_groups(report: ReportData) -> list[FindingGroup]:
    groups = []
    for verdict in FINDING_ORDER:
        found = [f for f in report.findings if f.verdict is verdict]
        if found:
            groups.append(FindingGroup(verdict, verdict_css(verdict), verdict.words, found))
    return groups


def op_rows(report: ReportData) -> list[OpRow]:
    """The inventory worst first, then by call count: the order that reads well without JS."""
    rows = [
        OpRow(
            op=o,
            css=verdict_css(o.verdict),
            modules_shown=o.modules[:MODULES_SHOWN],
            modules_more=o.modules[MODULES_SHOWN:],
            shapes_shown=o.example_shapes[:SHAPES_SHOWN],
            severity=o.verdict.rank,
        )
        for o in report.ops
    ]
    return sorted(rows, key=lambda r: (-r.severity, -r.op.count, r.op.op))


def holdout_rows(holdout: Holdout | None) -> list[tuple[str, str]]:
    """The held-out check as (label, value) rows: the split, then each ladder's overheads."""
    if holdout is None:
        return []
    rows = [
        ("held out", f"{holdout.fraction:g} of the items ({holdout.order})"),
        ("fitted on", f"{holdout.fit_lengths:,} lengths"),
        ("scored on", f"{holdout.test_lengths:,} lengths"),
    ]
    if holdout.overhead is not None:
        o = holdout.overhead
        rows.append(("proposed", f"{format_percent(o.tokens)} tokens, {format_percent(o.attention)} attention, {holdout.beyond_last:,} beyond last"))
    for name, s in holdout.baselines.items():
        rows.append((name, f"{format_percent(s.tokens)} tokens, {format_percent(s.attention)} attention, {s.beyond_last:,} beyond last"))
    return rows


# -- assets and rendering -----------------------------------------------------------


@functools.cache
def _asset(name: str) -> str:
    return importlib.resources.files("neuronprobe.report").joinpath("templates", name).read_text(encoding="utf-8")


def _csp(script: str) -> str:
    """No fetches of any kind; inline styles (ours and the SVGs'); only our script, pinned by hash."""
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    return f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'"


@functools.lru_cache(maxsize=1)
def environment() -> Any:
    """The one Jinja environment of every HTML page neuronprobe writes (report, notebook view, nightly index).

    Autoescape on for every template whatever its name (the data comes from user code),
    undefined names are errors, and the filters format numbers as the console does.
    """
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("neuronprobe.report", "templates"),
        autoescape=True,  # every template, whatever its name: the data comes from user code
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(
        bytes=format_bytes,
        seconds=format_duration,
        pct=format_percent,
        loc=location,
        signed=format_signed,
        vcss=verdict_css,
    )
    return env


def _plots(report: ReportData) -> dict[str, Any]:
    from markupsafe import Markup

    from neuronprobe.report import decode_plots, parity_plots, plots

    svgs = {
        "timeline": plots.timeline_svg(report.recompiles),
        "histogram": plots.histogram_svg(report.buckets),
        "curve": plots.curve_svg(report.buckets),
        "decode_histogram": decode_plots.decode_histogram_svg(report.decode),
        "decode_timeline": decode_plots.decode_timeline_svg(report.decode),
        "parity": parity_plots.drift_svg(report.parity),
    }
    # matplotlib writes the SVG and escapes the labels in it; it is the only markup we trust as is.
    return {k: Markup(v) if v is not None else None for k, v in svgs.items()}


def _serving_plots(report: ReportData) -> list[Any]:
    from markupsafe import Markup

    from neuronprobe.report.serving_plots import serving_svgs

    # hand-written SVG: numbers and html-escaped labels only (report/serving_plots.py)
    return [Markup(s) for s in serving_svgs(report.serving)]


def _anchor_prefix(report: ReportData, embedded: bool) -> str:
    """Ids for in-page links; in a notebook several reports share one page, so theirs are distinct."""
    if not embedded:
        return ""
    digest = hashlib.sha1(f"{report.model}\0{report.metadata.time}\0{report.target}".encode()).hexdigest()
    return f"np{digest[:8]}-"


# A notebook view longer than this is folded: a static table of the worst findings stays open (it is
# what GitHub's notebook viewer, which strips styles and scripts, shows), the full report is one click away.
FOLD_FINDINGS = 5
FOLD_OPS = 30


def _fold(report: ReportData) -> dict[str, Any]:
    """Whether the notebook view folds the full report, and the findings its glance table lists."""
    from neuronprobe.report.markdown import TEXT_FINDINGS

    fold = len(report.findings) > FOLD_FINDINGS or len(report.ops) > FOLD_OPS
    glance = sorted(report.findings, key=lambda f: -f.verdict.rank)[:TEXT_FINDINGS]
    return {"fold": fold, "glance": glance, "more": len(report.findings) - len(glance)}


def render_html(report: ReportData, *, embedded: bool = False) -> str:
    """Render ``report`` as a standalone HTML page, or as a notebook fragment when ``embedded``."""
    from markupsafe import Markup

    script = _asset(JS_FILE)
    context = {
        "report": report,
        "embedded": embedded,
        "banner": banner(report),
        "cards": summary_cards(report),
        "verdict_bar": verdict_bar(report),
        "groups": finding_groups(report),
        "op_rows": op_rows(report),
        "op_verdicts": [v for v in Verdict if any(o.verdict is v for o in report.ops)],
        "phases": [p for p in Phase if p in report.summary.phases] if report.train is not None else [],
        "legend": [(v, verdict_css(v), v.words) for v in Verdict],
        "plots": _plots(report),
        "css": Markup(_asset(CSS_FILE)),
        "script": Markup(script),
        "csp": _csp(script),
        "aid": _anchor_prefix(report, embedded),
        "holdout": holdout_rows(report.buckets.holdout) if report.buckets is not None else [],
        "serving_plots": _serving_plots(report),
    }
    if embedded:
        context.update(_fold(report))
    template = TEMPLATE_FRAGMENT if embedded else TEMPLATE_PAGE
    return environment().get_template(template).render(context)
