"""Per-dimension histograms of a serving plan as small SVG bar charts (no matplotlib: numbers and escaped labels only).

The x axis is the dimension's value (prefill tokens, decode batch, context needed), so the ladder
edges can be drawn where they fall: the planned ladder as solid red lines, vLLM Neuron's default
ladder as dashed grey ones (issue 37.6). Each bar and each edge has a ``<title>`` tooltip.
"""

from __future__ import annotations

from html import escape

from neuronprobe.report.schema.serving import DimHistogram, ServingLadders, ServingPlan

WIDTH, HEIGHT, PAD = 360, 130, 18
PLANNED_COLOUR, DEFAULT_COLOUR, BAR_COLOUR = "#c0392b", "#555555", "#4a7ab5"


def _edges(plan: ServingPlan, h: DimHistogram, lad: ServingLadders | None) -> list[int]:
    """The ladder edges of ``lad`` on the dimension ``h`` shows ([] when the dimension is not a ladder's)."""
    if lad is None:
        return []
    name = h.name.lower()
    if name.startswith("prefill"):
        return list(lad.prefill_buckets)
    if name.startswith("decode batch"):
        return list(lad.batch_buckets)
    if name.startswith("decode context"):
        top = plan.engine.get("max_model_len")
        return list(lad.context_buckets) + ([int(top)] if top else [])
    return []


def histogram_svg(h: DimHistogram, planned: list[int] | None = None, default: list[int] | None = None) -> str | None:
    """Bars on a value axis (height by steps) with the planned and default ladder edges marked."""
    if not h.counts or max(h.counts) <= 0:
        return None
    planned, default = planned or [], default or []
    lo = min(h.lower)
    hi = max([*h.upper, *planned, *default]) + 1
    span = max(hi - lo, 1)
    plot_w, plot_h = WIDTH - 2 * PAD, HEIGHT - 2 * PAD - 10
    base = HEIGHT - PAD

    def x(v: float) -> float:
        return PAD + plot_w * (v - lo) / span

    top = max(h.counts)
    parts = [f'<text x="{PAD}" y="12" font-size="11">{escape(h.name)} ({lo}-{hi - 1})</text>']
    for a, b, c in zip(h.lower, h.upper, h.counts, strict=True):
        height = plot_h * c / top
        label = f"{a}" if a == b else f"{a}-{b}"
        parts.append(
            f'<rect x="{x(a):.1f}" y="{base - height:.1f}" width="{max(x(b + 1) - x(a) - 0.5, 1.0):.1f}" height="{height:.1f}" fill="{BAR_COLOUR}">'
            f"<title>{escape(label)}: {c} steps</title></rect>"
        )
    for edges, colour, dash, what in ((default, DEFAULT_COLOUR, ' stroke-dasharray="3,2"', "default"), (planned, PLANNED_COLOUR, "", "planned")):
        for e in edges:
            xe = x(e + 1)  # a bucket of size e holds every value <= e: its edge is the right end of value e
            parts.append(
                f'<line class="np-edge-{what}" x1="{xe:.1f}" x2="{xe:.1f}" y1="{PAD + 4}" y2="{base}" stroke="{colour}" stroke-width="1"{dash}>'
                f"<title>{what} bucket {e}</title></line>"
            )
    legend_y = HEIGHT - 4
    parts.append(
        f'<text x="{PAD}" y="{legend_y}" font-size="9" fill="{PLANNED_COLOUR}">| planned ladder ({len(planned)})</text>'
        f'<text x="{PAD + 130}" y="{legend_y}" font-size="9" fill="{DEFAULT_COLOUR}">: default ladder ({len(default)})</text>'
    )
    return (
        f'<svg class="np-plot" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img">'
        + "".join(parts)
        + "</svg>"
    )


def serving_svgs(plan: ServingPlan | None) -> list[str]:
    if plan is None:
        return []
    default = plan.baselines[0] if plan.baselines else None
    out = []
    for h in plan.histograms:
        svg = histogram_svg(h, _edges(plan, h, plan.proposed), _edges(plan, h, default))
        if svg is not None:
            out.append(svg)
    return out
