"""The report's plots, drawn with matplotlib and returned as inline SVG strings.

Why SVG: the HTML report is one file that must open on a host with no network
and stay small, and vector plots stay sharp when zoomed. Why these settings:

* ``svg.fonttype = "none"`` writes text as ``<text>`` instead of glyph paths,
  which makes each plot several times smaller and lets the page's font show;
* a fixed ``svg.hashsalt`` per plot and no date in the metadata make the output
  byte-identical for the same report (reproducible reports diff cleanly), and
  a different salt per plot keeps the clip-path ids of two plots on one page
  from colliding;
* figures are built with ``matplotlib.figure.Figure`` (no pyplot), so drawing a
  report never touches a notebook user's pyplot state or backend.

Every function takes a section of the Report and returns ``None`` when that
section has nothing to draw; the template then says so in words.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from neuronprobe.report.schema.buckets import BucketProposal
from neuronprobe.report.schema.recompiles import RecompileSection

# Width x height in inches; at the report's ~760 px content width these read
# at about the size of the surrounding text.
FIGSIZE = (7.0, 2.8)
# A length histogram with more bars than this turns into noise at report
# width (and bloats the SVG); lengths are binned down to this many bars.
HIST_MAX_BINS = 60
# Above this many new graphs a policy's step line alone shows the story; a dot
# per graph would only add SVG elements (500 graphs: ~70 KB more, no more insight).
TIMELINE_MAX_MARKERS = 60
# Vertical extent of each baseline's edge marks, as a fraction of the axes
# height, so overlapping ladders stay distinguishable (the proposal is full height).
BASELINE_MARK_HEIGHTS = (0.86, 0.74, 0.62, 0.5, 0.38, 0.26)
# Request lengths are long-tailed (most requests short, a few near max_len); when
# the longest is this many times the shortest, a log axis keeps the body readable.
LOG_X_SPREAD = 20
# The overhead at k=1 can be hundreds of times that at the chosen k; beyond this
# ratio the curve's y axis is logarithmic (symlog: linear near 0, where large k ends).
LOG_Y_SPREAD = 20

PROPOSED_COLOR = "#c0392b"
BASELINE_COLORS = ("#2471a3", "#7d3c98", "#1e8449", "#b9770e", "#17a589", "#884ea0")
POLICY_COLORS = ("#c0392b", "#2471a3", "#1e8449", "#7d3c98", "#b9770e")
# Policies often need the same graphs (static and dynamic-batch on one batch size):
# each later line is thinner and dashed, so a line drawn on top never hides one below.
POLICY_STYLES = (("-", 2.6), ((0, (5, 2)), 1.6), ((0, (1, 1.5)), 1.3), ((0, (6, 2, 1, 2)), 1.1))
BAR_COLOR = "#b3b6b7"
TEXT_COLOR = "#222222"

PLOT_RC = {
    "svg.fonttype": "none",
    "font.size": 9,
    "font.family": "sans-serif",
    "axes.edgecolor": "#888888",
    "axes.labelcolor": TEXT_COLOR,
    "xtick.color": TEXT_COLOR,
    "ytick.color": TEXT_COLOR,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.frameon": False,
    "legend.fontsize": 8,
    "path.simplify": True,
}
# Dublin Core keys matplotlib writes by default; None drops them (no date: deterministic).
_NO_METADATA = {"Creator": None, "Date": None, "Format": None, "Type": None}


def plain_label(text: str) -> str:
    """Plain text for a matplotlib label: a ``$`` would otherwise start mathtext (and may not parse)."""
    return str(text).replace("$", r"\$")


@contextmanager
def report_figure(salt: str) -> Iterator[tuple[Any, Any]]:
    """A fresh Figure and Axes under the report's rc settings, without pyplot."""
    import matplotlib
    from matplotlib.figure import Figure

    with matplotlib.rc_context({**PLOT_RC, "svg.hashsalt": f"neuronprobe-{salt}"}):
        fig = Figure(figsize=FIGSIZE)
        ax = fig.add_subplot()
        yield fig, ax


def figure_to_svg(fig: Any, salt: str, title: str) -> str:
    """Serialise a figure to an ``<svg>`` element fit for inlining into HTML."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata=_NO_METADATA, bbox_inches="tight", pad_inches=0.05)
    text = buf.getvalue()
    text = text[text.index("<svg") :]  # drop the XML declaration and DOCTYPE: invalid inside HTML
    text = _SVG_STYLE.sub("", text)  # its `*{...}` rule would restyle the whole page; report.css has it, scoped
    text = _scope_ids(text, salt)
    # Let CSS size the plot (it scales to the column) and give screen readers a name.
    return re.sub(
        r"<svg\b",
        f'<svg class="np-plot" role="img" aria-label="{_attr(title)}"',
        text,
        count=1,
    )


_SVG_STYLE = re.compile(r"<style[^>]*>.*?</style>\s*", re.S)
_ID_ATTR = re.compile(r'\sid="([^"]*)"')
_ID_REF = re.compile(r'(href="#|url\(#)([^")]+)')


def _scope_ids(svg: str, salt: str) -> str:
    """Drop the ids nothing refers to and prefix the rest, so several plots share one page.

    matplotlib names every group (``figure_1``, ``axes_1``, ...), which would repeat
    in every plot on the page; only clip paths and marker definitions are referenced.
    """
    used = {m.group(2) for m in _ID_REF.finditer(svg)}
    prefix = f"np-{salt}-"

    def rename_id(m: re.Match[str]) -> str:
        return f' id="{prefix}{m.group(1)}"' if m.group(1) in used else ""

    svg = _ID_ATTR.sub(rename_id, svg)
    return _ID_REF.sub(lambda m: f"{m.group(1)}{prefix}{m.group(2)}", svg)


def _attr(text: str) -> str:
    from markupsafe import escape

    return str(escape(text))


def timeline_svg(section: RecompileSection | None) -> str | None:
    """Graphs compiled so far against the call index, one step line per policy."""
    if section is None:
        return None
    series = {name: sorted(p.first_seen) for name, p in section.predicted.items() if p.first_seen}
    if not series:
        return None
    last_call = max(section.calls - 1, max(max(v) for v in series.values()))
    with report_figure("timeline") as (fig, ax):
        for i, (name, first_seen) in enumerate(series.items()):
            xs = [0, *first_seen, last_call]
            ys = [0, *range(1, len(first_seen) + 1), len(first_seen)]
            color = POLICY_COLORS[i % len(POLICY_COLORS)]
            style, width = POLICY_STYLES[i % len(POLICY_STYLES)]
            ax.step(xs, ys, where="post", color=color, linestyle=style, linewidth=width, label=plain_label(f"{name}: {len(first_seen)} graphs"))
            if len(first_seen) <= TIMELINE_MAX_MARKERS:
                ax.plot(first_seen, range(1, len(first_seen) + 1), "o", color=color, markersize=2.5)
        ax.set_xlabel("call index in the traffic")
        ax.set_ylabel("graphs compiled so far")
        ax.set_xlim(0, max(last_call, 1))
        ax.set_ylim(0, None)
        ax.legend(loc="upper left")
        return figure_to_svg(fig, "timeline", "Graphs compiled over the traffic, per policy")


def plain_numbers(axis: Any) -> None:
    """Tick labels as plain numbers (100, 1000), not powers of ten, on a log axis."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def histogram_svg(proposal: BucketProposal | None) -> str | None:
    """The length distribution with the proposed bucket edges and each baseline's edges."""
    if proposal is None:
        return None
    values = list(proposal.histogram.values)
    counts = list(proposal.histogram.counts)
    if not values or len(values) != len(counts):
        return None
    import numpy as np

    low, high = max(min(values), 1), max(values)
    top = max(high, *(proposal.edges or [0]))
    log_x = high / low >= LOG_X_SPREAD
    n_bins = max(1, min(HIST_MAX_BINS, len(set(values))))
    bins: Any = np.geomspace(low, high + 1, n_bins + 1) if log_x else n_bins
    with report_figure("histogram") as (fig, ax):
        ax.hist(values, bins=bins, weights=counts, color=BAR_COLOR, label="requests")
        for j, baseline in enumerate(proposal.baselines):
            color = BASELINE_COLORS[j % len(BASELINE_COLORS)]
            height = BASELINE_MARK_HEIGHTS[j % len(BASELINE_MARK_HEIGHTS)]
            for n, edge in enumerate(baseline.edges):
                ax.axvline(
                    edge, ymax=height, color=color, linestyle=(0, (3, 2)), linewidth=1.1, label=plain_label(f"{baseline.name} edges") if n == 0 else None
                )
        for n, edge in enumerate(proposal.edges):
            ax.axvline(edge, color=PROPOSED_COLOR, linewidth=1.6, label=plain_label(f"proposed edges (k={proposal.k})") if n == 0 else None)
        # Baseline edges far outside the traffic would squash the histogram; the table lists them all.
        if log_x:
            ax.set_xscale("log")
            ax.set_xlim(low * 0.9, top * 1.1)
            plain_numbers(ax.xaxis)
            ax.set_xlabel("sequence length (log scale)")
        else:
            ax.set_xlim(0, top * 1.04)
            ax.set_xlabel("sequence length")
        ax.set_ylabel("requests")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
        return figure_to_svg(fig, "histogram", "Length histogram with proposed and baseline bucket edges")


def curve_svg(proposal: BucketProposal | None) -> str | None:
    """Padding overhead against the number of buckets k, with the chosen k marked."""
    if proposal is None or not proposal.curve:
        return None
    points = sorted(proposal.curve, key=lambda p: p.k)
    ks = [p.k for p in points]
    with report_figure("curve") as (fig, ax):
        ax.plot(ks, [p.overhead.tokens for p in points], "o-", color=BASELINE_COLORS[0], markersize=3, linewidth=1.3, label="padded tokens")
        ax.plot(ks, [p.overhead.attention for p in points], "s-", color=BASELINE_COLORS[1], markersize=3, linewidth=1.3, label="attention cost")
        ax.axvline(proposal.k, color=PROPOSED_COLOR, linewidth=1.2, linestyle=(0, (4, 2)))
        ax.plot(
            [proposal.k, proposal.k],
            [proposal.overhead.tokens, proposal.overhead.attention],
            "o",
            color=PROPOSED_COLOR,
            markersize=6,
            label=plain_label(f"chosen k={proposal.k}"),
        )
        ax.set_xticks(ks)
        ax.set_xlabel("buckets k (= compiled graphs)")
        largest = max(max(p.overhead.tokens, p.overhead.attention) for p in points)
        at_chosen = max(proposal.overhead.tokens, proposal.overhead.attention, 1.0)
        if largest / at_chosen >= LOG_Y_SPREAD:
            ax.set_yscale("symlog", linthresh=1.0)
            plain_numbers(ax.yaxis)
            ax.set_ylabel("overhead, % of real work (log)")
        else:
            ax.set_ylabel("overhead, % of real work")
        ax.set_ylim(0, None)
        ax.legend(loc="upper right")
        return figure_to_svg(fig, "curve", f"Padding overhead against the number of buckets; k={proposal.k} chosen")
