"""Trend plots for the nightly history page: one small-multiples SVG per model.

Four panels across the nights: support %, CPU fallbacks (findings), compiled
graphs (device graphs, and graphs under the static-shape policy when traffic was
given) and padding overhead. Each (backend, target) is its own line: a night that
ran on the static tables is not joined to a night on the real SDK. The SVG
conventions (no pyplot, fonts as text, deterministic ids, page-unique ids) are
those of report/plots.py, whose serialiser this module reuses.
"""

from __future__ import annotations

import datetime as dt
import functools
from dataclasses import dataclass
from typing import Any

from neuronprobe.report.plots import PLOT_RC, figure_to_svg, plain_label

SHORT_HISTORY_DAYS = 7  # up to a week of nights: a tick per night still fits a panel
SUPPORT_HEADROOM = 0.5  # percentage points above 100 so a line at 100 % is not drawn on the frame
MIN_NIGHTS = 2  # a trend needs two nights; with one the page shows numbers only
FIGSIZE = (10.0, 2.3)  # four panels across the page width
# Figures kept per process: every night and every merge re-renders the whole index, and a
# model whose history did not change gets the same SVG (drawing is ~0.2 s of CPU a model).
TREND_CACHE_SIZE = 256
# Fixed margins in inches (see _fixed_margins): y tick labels, panel titles, the date ticks and their month line.
MARGIN_LEFT_IN, MARGIN_RIGHT_IN, MARGIN_TOP_IN, MARGIN_BOTTOM_IN = 0.5, 0.1, 0.3, 0.5
PANEL_GAP_IN = 0.55  # the next panel's y tick labels sit in the gap
LEGEND_ROW_IN = 0.22
LEGEND_COLUMNS = 4
SERIES_COLORS = ("#2471a3", "#c0392b", "#1e8449", "#7d3c98", "#b9770e")

# panel title -> the metric keys it draws (report/diff.py METRICS), solid line first, dashed second
PANELS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("support %", ("support_percentage",)),
    ("CPU fallbacks", ("cpu_fallbacks",)),
    ("compiled graphs", ("device_graphs", "static_graphs")),
    ("padding overhead %", ("padding_overhead",)),
)
_COUNT_PANELS = frozenset({"CPU fallbacks", "compiled graphs"})  # whole numbers: integer ticks
_DASHED_LABEL = {"static_graphs": "static-shape policy"}


@dataclass(frozen=True)
class TrendPoint:
    date: str  # YYYY-MM-DD
    series: str  # e.g. "neuron/trn1"
    values: dict[str, float | None]  # metric key -> value


# A model's points as a hashable key, in the caller's order (same-date points are drawn in that order).
_PointsKey = tuple[tuple[str, str, tuple[tuple[str, float | None], ...]], ...]


def trend_svg(points: list[TrendPoint], salt: str, title: str) -> str | None:
    """The model's trends as one inline SVG; None with fewer than MIN_NIGHTS nights.

    The SVG is a function of the points, salt, title and matplotlib's settings alone
    (the output is deterministic), so a history drawn once in this process is not
    drawn again: the nightly index is re-rendered whole by every night and merge.
    """
    if len({p.date for p in points}) < MIN_NIGHTS:
        return None
    import matplotlib

    key: _PointsKey = tuple((p.date, p.series, tuple(sorted(p.values.items()))) for p in points)
    # The settings PLOT_RC leaves alone come from the caller's rcParams: a notebook that changes them gets a fresh figure.
    settings = repr(sorted(matplotlib.rcParams.items()))
    return _cached_trend_svg(key, salt, title, settings)


def clear_trend_cache() -> None:
    """Forget the drawn figures (a benchmark measures drawing, not the cache)."""
    _cached_trend_svg.cache_clear()


@functools.lru_cache(maxsize=TREND_CACHE_SIZE)
def _cached_trend_svg(key: _PointsKey, salt: str, title: str, settings: str) -> str:
    return _draw(tuple(TrendPoint(date, series, dict(values)) for date, series, values in key), salt, title)


def _draw(points: tuple[TrendPoint, ...], salt: str, title: str) -> str:
    """Draw the four panels: one line per series and metric, dashed for the second metric of a panel."""
    import matplotlib
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    series = sorted({p.series for p in points})
    with matplotlib.rc_context({**PLOT_RC, "svg.hashsalt": f"neuronprobe-{salt}"}):
        fig = Figure(figsize=FIGSIZE)
        axes = fig.subplots(1, len(PANELS))
        for ax, (panel, keys) in zip(axes, PANELS, strict=False):
            drawn = False
            for i, name in enumerate(series):
                mine = sorted((p for p in points if p.series == name), key=lambda p: p.date)
                color = SERIES_COLORS[i % len(SERIES_COLORS)]
                for key, style in zip(keys, ("-", "--"), strict=False):
                    xy = [(_day(p.date), p.values.get(key)) for p in mine]
                    xy = [(x, y) for x, y in xy if y is not None]
                    if not xy:
                        continue
                    label = name if key == keys[0] else f"{name}, {_DASHED_LABEL.get(key, key)}"
                    ax.plot(*zip(*xy, strict=False), style, marker="o", markersize=3, linewidth=1.3, color=color, label=plain_label(label))
                    drawn = True
            ax.set_title(panel, fontsize=9, loc="left")
            if not drawn:
                ax.set_xticks([])
                ax.set_yticks([])
                ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", va="center", color="#888888")
                continue
            _date_axis(ax, [_day(p.date) for p in points])
            if panel in _COUNT_PANELS:
                top = max((v for p in points for k in keys if (v := p.values.get(k)) is not None), default=0)
                ax.set_ylim(0, max(1.0, top) * 1.15)  # a flat zero line still gets a readable 0..1 axis
                ax.yaxis.set_major_locator(MaxNLocator(integer=True))
            elif panel == "support %":
                low = min(v for p in points if (v := p.values.get(keys[0])) is not None)
                ax.set_ylim(max(0.0, low - max(1.0, (100.0 - low) * 0.2)), 100.0 + SUPPORT_HEADROOM)
            else:
                ax.set_ylim(0, None)
        if len(series) > 1 or any(p.values.get("static_graphs") is not None for p in points):
            handles, labels = [], []
            for ax in axes:
                for h, lab in zip(*ax.get_legend_handles_labels(), strict=False):
                    if lab not in labels:
                        handles.append(h)
                        labels.append(lab)
            ncols = min(LEGEND_COLUMNS, len(labels))
            fig.legend(handles, labels, loc="lower center", ncols=ncols)
            legend_rows = -(-len(labels) // ncols)
        else:
            legend_rows = 0
        _fixed_margins(fig, legend_rows)
        return figure_to_svg(fig, salt, title)


def _fixed_margins(fig: Any, legend_rows: int) -> None:
    """Room for titles, tick labels and the legend, in inches that do not depend on the data.

    Constrained layout measured every label of every panel several times per figure
    (half of the drawing's CPU); these margins fit the labels a trend has (a date and
    its month below the axis, up to five characters of y tick), and savefig's tight
    bounding box still takes in anything longer (a wide legend), so nothing is cut off.
    """
    width, height = FIGSIZE
    fig.subplots_adjust(
        left=MARGIN_LEFT_IN / width,
        right=1 - MARGIN_RIGHT_IN / width,
        top=1 - MARGIN_TOP_IN / height,
        bottom=(MARGIN_BOTTOM_IN + legend_rows * LEGEND_ROW_IN) / height,
        wspace=PANEL_GAP_IN / ((width - MARGIN_LEFT_IN - MARGIN_RIGHT_IN - (len(PANELS) - 1) * PANEL_GAP_IN) / len(PANELS)),
    )


def _date_axis(ax: Any, days: list[dt.date]) -> None:
    """Ticks on whole nights: one per day over a short history, automatic (never hours) over a long one."""
    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter, DayLocator

    first, last = min(days), max(days)
    locator = DayLocator() if (last - first).days <= SHORT_HISTORY_DAYS else AutoDateLocator(minticks=3, maxticks=6)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(ConciseDateFormatter(locator))
    margin = dt.timedelta(hours=12)  # half a night either side, so the end points are not on the frame
    ax.set_xlim(_midnight(first) - margin, _midnight(last) + margin)


def _midnight(day: dt.date) -> dt.datetime:
    return dt.datetime.combine(day, dt.time())


def _day(date: str) -> dt.date:
    return dt.date.fromisoformat(date)
