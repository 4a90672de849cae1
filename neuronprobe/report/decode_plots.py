"""SVG plots of the decode section (issue 24): the decode-step histogram with edges, and the
continuous-batching timeline. Same conventions as :mod:`neuronprobe.report.plots`."""

from __future__ import annotations

from typing import Any

from neuronprobe.report.plots import (
    BAR_COLOR,
    BASELINE_COLORS,
    BASELINE_MARK_HEIGHTS,
    HIST_MAX_BINS,
    LOG_X_SPREAD,
    PROPOSED_COLOR,
    figure_to_svg,
    plain_label,
    plain_numbers,
    report_figure,
)
from neuronprobe.report.schema.decode import DecodeProposal


def decode_histogram_svg(p: DecodeProposal | None) -> str | None:
    """Decode steps per required length, with the proposed token-generation edges and each baseline's."""
    if p is None or not p.histogram.values or len(p.histogram.values) != len(p.histogram.counts):
        return None
    import numpy as np

    values, counts = list(p.histogram.values), list(p.histogram.counts)
    low, high = max(min(values), 1), max(values)
    top = max(high, *p.edges)
    log_x = high / low >= LOG_X_SPREAD
    n_bins = max(1, min(HIST_MAX_BINS, len(set(values))))
    bins: Any = np.geomspace(low, high + 1, n_bins + 1) if log_x else n_bins
    with report_figure("decode-histogram") as (fig, ax):
        ax.hist(values, bins=bins, weights=counts, color=BAR_COLOR, label="decode steps")
        for j, base in enumerate(p.baselines):
            color = BASELINE_COLORS[j % len(BASELINE_COLORS)]
            height = BASELINE_MARK_HEIGHTS[j % len(BASELINE_MARK_HEIGHTS)]
            for n, edge in enumerate(base.edges):
                ax.axvline(edge, ymax=height, color=color, linestyle=(0, (3, 2)), linewidth=1.1, label=plain_label(f"{base.name} edges") if n == 0 else None)
        for n, edge in enumerate(p.edges):
            ax.axvline(edge, color=PROPOSED_COLOR, linewidth=1.6, label=plain_label(f"proposed edges (k={p.k})") if n == 0 else None)
        if log_x:
            ax.set_xscale("log")
            ax.set_xlim(low * 0.9, top * 1.1)
            plain_numbers(ax.xaxis)
            ax.set_xlabel("required length of the decode step (log scale)")
        else:
            ax.set_xlim(0, top * 1.04)
            ax.set_xlabel("required length of the decode step")
        ax.set_ylabel("decode steps")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
        return figure_to_svg(fig, "decode-histogram", "Decode-step histogram with proposed and baseline token-generation edges")


def decode_timeline_svg(p: DecodeProposal | None) -> str | None:
    """Per replayed step: the longest length and its bucket (left axis), the batch size and its bucket (right axis)."""
    t = None if p is None else p.timeline
    if t is None or not t.seconds:
        return None
    with report_figure("decode-timeline") as (fig, ax):
        ax.plot(t.seconds, t.longest, color=BAR_COLOR, linewidth=0.8, label="longest length in the batch")
        ax.step(t.seconds, t.bucket, where="post", color=PROPOSED_COLOR, linewidth=1.0, label="sequence bucket")
        ax.set_xlabel("seconds from the first request")
        ax.set_ylabel("tokens")
        ax.set_ylim(0, None)
        right = ax.twinx()
        right.step(t.seconds, t.batch, where="post", color=BASELINE_COLORS[0], linewidth=0.8, label="batch size")
        right.step(t.seconds, t.batch_bucket, where="post", color=BASELINE_COLORS[2], linewidth=0.8, linestyle=(0, (3, 2)), label="batch bucket")
        right.set_ylabel("sequences")
        right.set_ylim(0, t.max_batch + 1)
        lines = ax.get_legend_handles_labels()
        more = right.get_legend_handles_labels()
        ax.legend(lines[0] + more[0], lines[1] + more[1], loc="upper left", bbox_to_anchor=(1.08, 1.0))
        return figure_to_svg(fig, "decode-timeline", "Continuous-batching replay: batch size and buckets per step")
