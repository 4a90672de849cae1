"""Per-dimension histograms of a serving plan as small SVG bar charts (no matplotlib: numbers and escaped labels only)."""

from __future__ import annotations

from html import escape

from neuronprobe.report.serving_model import DimHistogram, ServingPlan

WIDTH, HEIGHT, PAD = 360, 120, 18


def histogram_svg(h: DimHistogram) -> str | None:
    """One bar per bin, height by steps; the title of each bar gives its range and count."""
    if not h.counts or max(h.counts) <= 0:
        return None
    top = max(h.counts)
    n = len(h.counts)
    bar = (WIDTH - 2 * PAD) / n
    rects = []
    for i, (lo, hi, c) in enumerate(zip(h.lower, h.upper, h.counts, strict=True)):
        height = (HEIGHT - 2 * PAD) * c / top
        span = f"{lo}" if lo == hi else f"{lo}-{hi}"
        rects.append(
            f'<rect x="{PAD + i * bar:.1f}" y="{HEIGHT - PAD - height:.1f}" width="{max(bar - 1, 0.5):.1f}" height="{height:.1f}" fill="#4a7ab5">'
            f"<title>{escape(span)}: {c} steps</title></rect>"
        )
    label = f'<text x="{PAD}" y="12" font-size="11">{escape(h.name)} ({h.lower[0]}-{h.upper[-1]})</text>'
    return f'<svg class="np-plot" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img">{label}{"".join(rects)}</svg>'


def serving_svgs(plan: ServingPlan | None) -> list[str]:
    if plan is None:
        return []
    return [s for s in (histogram_svg(h) for h in plan.histograms) if s is not None]
