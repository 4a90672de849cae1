"""The report's plots: small, deterministic inline SVG that draws what the sections hold."""

from __future__ import annotations

import re

import matplotlib
import pytest
from report_fixtures import rich_report

from neuronprobe.report import plots
from neuronprobe.report.model import BucketProposal, Histogram, Overhead, RecompileSection


@pytest.fixture(scope="module")
def svgs() -> dict[str, str]:
    report = rich_report()
    drawn = {
        "timeline": plots.timeline_svg(report.recompiles),
        "histogram": plots.histogram_svg(report.buckets),
        "curve": plots.curve_svg(report.buckets),
    }
    assert all(drawn.values())
    return {k: v for k, v in drawn.items() if v is not None}


def test_plots_are_bare_svg_elements_ready_to_inline(svgs: dict[str, str]) -> None:
    for svg in svgs.values():
        assert svg.startswith('<svg class="np-plot" role="img" aria-label="')
        assert svg.rstrip().endswith("</svg>")
        assert "<style" not in svg  # matplotlib's global `*{...}` rule is stripped
        assert "<dc:date>" not in svg and "Matplotlib v" not in svg  # no date, no creator: deterministic


def test_plots_stay_small(svgs: dict[str, str]) -> None:
    for name, svg in svgs.items():
        assert len(svg) < 40_000, name
        assert "<text" in svg, f"{name}: text stays text (svg.fonttype none), not glyph paths"


def test_plots_are_deterministic() -> None:
    report = rich_report()
    assert plots.timeline_svg(report.recompiles) == plots.timeline_svg(report.recompiles)
    assert plots.histogram_svg(report.buckets) == plots.histogram_svg(report.buckets)


def test_ids_are_scoped_per_plot_and_every_reference_resolves(svgs: dict[str, str]) -> None:
    seen: set[str] = set()
    for name, svg in svgs.items():
        ids = re.findall(r'\sid="([^"]*)"', svg)
        refs = set(re.findall(r'(?:href="#|url\(#)([^")]+)', svg))
        assert all(i.startswith(f"np-{name}-") for i in ids)
        assert refs <= set(ids), f"{name}: dangling reference"
        assert not seen & set(ids)
        seen |= set(ids)


def test_timeline_draws_one_line_per_policy_with_its_graph_count(svgs: dict[str, str]) -> None:
    assert "static: 37 graphs" in svgs["timeline"]
    assert "bucketed: 4 graphs" in svgs["timeline"]


def test_histogram_marks_proposed_and_baseline_edges(svgs: dict[str, str]) -> None:
    assert "proposed edges (k=4)" in svgs["histogram"]
    assert "powers of two edges" in svgs["histogram"]
    assert "nxd default edges" in svgs["histogram"]


def test_curve_marks_the_chosen_k(svgs: dict[str, str]) -> None:
    assert "chosen k=4" in svgs["curve"]
    assert "padded tokens" in svgs["curve"] and "attention cost" in svgs["curve"]


def test_nothing_to_draw_gives_none() -> None:
    assert plots.timeline_svg(None) is None
    assert plots.timeline_svg(RecompileSection(calls=10)) is None
    assert plots.histogram_svg(None) is None
    empty = BucketProposal(edges=[128], k=1, cost_model="tokens", overhead=Overhead(0.0, 0.0))
    assert plots.histogram_svg(empty) is None
    assert plots.curve_svg(empty) is None
    empty.histogram = Histogram(values=[1, 2], counts=[1])  # inconsistent: not drawn rather than wrong
    assert plots.histogram_svg(empty) is None


def test_labels_with_dollars_and_markup_are_drawn_as_plain_escaped_text() -> None:
    proposal = rich_report().buckets
    assert proposal is not None
    proposal.baselines[0].name = "$\\frac{<b>}{2}$ & co"
    svg = plots.histogram_svg(proposal)
    assert svg is not None
    assert "<b>" not in svg
    assert "$\\frac{&lt;b&gt;}{2}$ &amp; co edges" in svg  # the name exactly as written, not mathtext


def test_drawing_leaves_pyplot_and_rc_params_alone() -> None:
    before = dict(matplotlib.rcParams)
    import matplotlib.pyplot as plt

    figures = plt.get_fignums()
    plots.curve_svg(rich_report().buckets)
    assert plt.get_fignums() == figures
    assert dict(matplotlib.rcParams) == before


def test_long_tailed_lengths_get_a_log_axis_and_a_steep_curve_a_log_scale() -> None:
    proposal = rich_report().buckets
    assert proposal is not None
    proposal.histogram = Histogram(values=[100, 200, 300, 510], counts=[5, 40, 90, 60])  # 5x spread: linear
    svg = plots.histogram_svg(proposal)
    assert svg is not None and "sequence length (log scale)" not in svg
    proposal.histogram = Histogram(values=[8, 16, 40, 90, 200, 900, 4000], counts=[5, 40, 90, 60, 20, 4, 1])
    svg = plots.histogram_svg(proposal)
    assert svg is not None and "sequence length (log scale)" in svg
    # k=1 costs 610% against 18% at the chosen k: the curve's y axis is logarithmic
    curve = plots.curve_svg(proposal)
    assert curve is not None and "overhead, % of real work (log)" in curve


def test_many_graphs_draw_a_line_without_a_dot_per_graph() -> None:
    section = rich_report().recompiles
    assert section is not None
    section.calls = 2000
    section.predicted["static"].first_seen = list(range(0, 2000, 4))
    svg = plots.timeline_svg(section)
    assert svg is not None and "static: 500 graphs" in svg
    assert len(svg) < 40_000
