"""The nightly history page (reports/index.html): every model's latest run, its diff, its trends.

Rendered from templates/nightly_index.html.j2 with Jinja2 autoescape. Input is
the history of reports (from disk plus tonight's) and tonight's failures; the page
links each night's per-model HTML and JSON by relative paths, so the reports
folder can be uploaded or served as it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from neuronprobe.report.diff import METRICS, format_metric, metric
from neuronprobe.report.html import environment
from neuronprobe.report.nightly_plots import TrendPoint, trend_svg
from neuronprobe.report.schema.report import ReportData
from neuronprobe.report.schema.run_diff import RunDiff

TEMPLATE = "nightly_index.html.j2"
MAX_ROWS = 30  # history rows per model table; the trend plot shows the same nights


@dataclass(frozen=True)
class NightReport:
    """A model's report from one night, and where its files are (relative to the reports folder)."""

    date: str
    name: str
    report: ReportData
    json_path: str
    html_path: str


@dataclass
class HistoryRow:
    date: str
    series: str
    verdict: str
    values: dict[str, str]  # metric key -> formatted value
    commit: str
    status: str
    json_path: str
    html_path: str


@dataclass
class ModelView:
    name: str
    anchor: str
    latest: NightReport | None
    ran_tonight: bool
    error: str
    status: str
    diff: RunDiff | None
    rows: list[HistoryRow] = field(default_factory=list)
    trend: str | None = None
    diff_metrics: list[tuple[str, str, str, str]] = field(default_factory=list)  # label, base, new, change


STATUS_TEXT = {
    "regression": "regression",
    "ok": "no regression",
    "not_comparable": "not comparable (not gated)",
    "first_run": "first run on this backend",
    "failed": "analysis failed",
    "absent": "not run tonight",
}


def run_status(report: ReportData) -> str:
    """regression | ok | not_comparable | first_run, from the report's diff against its baseline."""
    diff = report.baseline_diff
    if diff is None:
        return "first_run"
    if diff.has_regression:
        return "regression"
    return "ok" if diff.comparable else "not_comparable"


def render_index(history: list[NightReport], date: str, order: list[str], failures: dict[str, str], warnings: list[str]) -> str:
    """The history page for the night ``date``.

    ``order`` lists tonight's models in config order (they come first); models seen
    only in the history follow by name. ``failures`` maps a model to tonight's error.
    """
    names = list(dict.fromkeys([*order, *sorted({n.name for n in history})]))
    models = [_model_view(name, [n for n in history if n.name == name], date, failures.get(name, "")) for name in names]
    counts = {s: sum(1 for m in models if m.status == s) for s in STATUS_TEXT}
    return (
        environment()
        .get_template(TEMPLATE)
        .render(
            date=date,
            models=models,
            counts=counts,
            status_text=STATUS_TEXT,
            metrics=METRICS,
            warnings=warnings,
            nights=sorted({n.date for n in history}),
        )
    )


def _model_view(name: str, nights: list[NightReport], date: str, error: str) -> ModelView:
    nights = sorted(nights, key=lambda n: n.date)
    latest = nights[-1] if nights else None
    ran_tonight = latest is not None and latest.date == date and not error
    if error:
        status = "failed"
    elif ran_tonight and latest is not None:
        status = run_status(latest.report)
    else:
        status = "absent"
    diff = latest.report.baseline_diff if latest is not None else None
    anchor = "m-" + re.sub(r"[^A-Za-z0-9_-]", "-", name)
    points = [TrendPoint(n.date, _series(n.report), {k: metric(n.report, k) for k in METRICS}) for n in nights]
    return ModelView(
        name=name,
        anchor=anchor,
        latest=latest,
        ran_tonight=ran_tonight,
        error=error,
        status=status,
        diff=diff,
        diff_metrics=_diff_metrics(diff),
        rows=[_row(n) for n in reversed(nights[-MAX_ROWS:])],
        trend=trend_svg(points, salt=anchor, title=f"{name}: support, fallbacks, graphs and padding across nights"),
    )


def _row(n: NightReport) -> HistoryRow:
    meta = n.report.metadata
    commit = (meta.git_commit or "")[:10] + ("+dirty" if meta.git_commit and meta.git_dirty else "")
    return HistoryRow(
        date=n.date,
        series=_series(n.report),
        verdict=n.report.verdict,
        values={k: format_metric(k, metric(n.report, k)) for k in METRICS},
        commit=commit,
        status=run_status(n.report),
        json_path=n.json_path,
        html_path=n.html_path,
    )


def _series(report: ReportData) -> str:
    """The line a night belongs to in the trend plots: backend (and fake) and target."""
    fake = " (fake)" if report.backend.fake else ""
    return f"{report.backend.name}{fake}/{report.target}"


def _diff_metrics(diff: RunDiff | None) -> list[tuple[str, str, str, str]]:
    rows = []
    for key, (base, new) in diff.metrics.items() if diff is not None else ():
        change = new - base if base is not None and new is not None else None
        rows.append((METRICS.get(key, key), format_metric(key, base), format_metric(key, new), format_metric(key, change, signed=True)))
    return rows
