"""SVG plot of the parity section (issue 25): relative error per module, in execution order, one line per precision.
Same conventions as :mod:`neuronprobe.report.plots`."""

from __future__ import annotations

from neuronprobe.report.plots import BASELINE_COLORS, PROPOSED_COLOR, figure_to_svg, plain_label, report_figure
from neuronprobe.report.schema.parity import ParitySection
from neuronprobe.vocabulary import ParityRun

# Below this a relative error is drawn at the floor (log scale: an exact zero has no place on it).
REL_FLOOR = 1e-8


def drift_svg(section: ParitySection | None) -> str | None:
    """Each emulated precision's relative error per module call (log scale), the tolerance as a line, the first
    module past it marked."""
    if section is None:
        return None
    runs = [r for r in section.runs if r.run is ParityRun.EMULATED and r.modules and not r.note]
    if not runs:
        return None
    with report_figure("parity-drift") as (fig, ax):
        colors = [PROPOSED_COLOR, *BASELINE_COLORS]
        for i, run in enumerate(runs):
            color = colors[i % len(colors)]
            rel = [max(m.rel, REL_FLOOR) for m in run.modules]
            ax.plot(range(len(rel)), rel, color=color, linewidth=1.3, label=plain_label(run.precision.label))
            first = run.first_exceeding
            if first is not None:
                at = next(j for j, m in enumerate(run.modules) if m.module == first.module)
                ax.plot([at], [max(first.rel, REL_FLOOR)], marker="o", color=color, markersize=6)
                ax.annotate(plain_label(first.module or "(model)"), (at, max(first.rel, REL_FLOOR)), textcoords="offset points", xytext=(4, 6), fontsize=8)
        ax.axhline(section.rtol, color="#b91c1c", linestyle=(0, (4, 3)), linewidth=1.0, label=plain_label(f"tolerance (rtol {section.rtol:g})"))
        ax.set_yscale("log")
        ax.set_xlabel("module call, in execution order")
        ax.set_ylabel("relative error against fp32")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
        return figure_to_svg(fig, "parity-drift", "Relative error per module against the fp32 reference, per emulated precision")
