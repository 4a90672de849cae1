"""Console rendering of the parity section: one line per precision, where each drifts first, and the legend.

Returns a rich renderable; only the CLI prints it (``report/console.py`` includes it).
"""

from __future__ import annotations

from typing import Any

from neuronprobe.formatting import format_duration
from neuronprobe.report.schema.parity import ModuleDrift, OutputAgreement, ParitySection, PrecisionRun
from neuronprobe.vocabulary import OutputKind, ParityRun

# Modules listed per precision on the console (the worst by relative error); JSON and HTML have every one.
WORST_MODULES = 3


def module_name(path: str) -> str:
    """How a module path reads: the model itself is ``(model)``."""
    return path or "(model)"


def percent(rel: float) -> str:
    """A relative error in three significant digits: ``0.347%``, ``100%``."""
    return f"{rel * 100:.3g}%"


def error_words(d: ModuleDrift) -> str:
    """``rel 0.34% · max-abs 0.0031 · 1.2 ulp`` (and the new non-finite values)."""
    text = f"rel {percent(d.rel)} · max-abs {d.max_abs:.3g} · {d.ulps:.3g} ulp"
    return text + (f" · {d.nonfinite} new non-finite" if d.nonfinite else "")


def agreement_words(a: OutputAgreement) -> str:
    """Top-1 kept, and for language models NxD Inference's top-k checks and where greedy decoding diverges."""
    text = f"top-1 kept on {a.top1_same}/{a.rows} {'positions' if a.kind is OutputKind.LANGUAGE_MODEL else 'examples'}"
    if a.kind is not OutputKind.LANGUAGE_MODEL:
        return text
    failing = [f"top-{c.k or 'all'} ({c.failed}/{c.checked} logits past rtol {c.rtol:g})" for c in a.topk if not c.passed]
    text += " · NxDI logit tolerances " + ("pass" if not failing else "fail: " + ", ".join(failing))
    if a.greedy_divergence is None:
        text += " · greedy decoding never diverges"
    else:
        tie = " (a tie within 0.001)" if a.divergence_tie else ""
        text += f" · greedy decoding diverges at position {a.greedy_divergence}{tie}"
    return text


def _run_lines(run: PrecisionRun) -> list[Any]:
    from rich.text import Text

    tag = "xla-cpu (observed)" if run.run is ParityRun.XLA_CPU else "emulated"
    head = Text.assemble(("  " + run.precision.label, "bold"), (f"  {tag}", "dim"))
    if run.error:
        return [head, Text(f"    no numbers: {run.error}", style="yellow")]
    lines = [head]
    if run.note:
        return [head, Text(f"    {run.note}", style="green")]
    if run.output is not None:
        style = "red" if run.output.exceeds else ""
        lines.append(Text(f"    output: {error_words(run.output)}" + (f" ({format_duration(run.seconds)})" if run.seconds else ""), style=style))
    if run.agreement is not None:
        flipped = run.agreement.top1_same < run.agreement.rows
        lines.append(Text(f"    {agreement_words(run.agreement)}", style="red" if flipped else ""))
    first = run.first_exceeding
    if first is not None:
        line = Text.assemble("    first past the tolerance: ", (module_name(first.module), "bold red"), f" ({first.module_type})")
        line.append(f" at {first.where}" if first.where.known else "")
        lines.append(line)
        op = f"the op adding most error inside it: {first.dominant_op}" if first.dominant_op else "no op inside it adds error: it comes in with its input"
        lines.append(Text(f"      {error_words(first)} · {op}", style="dim"))
    elif run.modules:
        lines.append(Text("    every module within the tolerance", style="green"))
    worst = sorted((m for m in run.modules if m.module), key=lambda m: -m.rel)[:WORST_MODULES]
    if worst and first is not None:
        lines.append(Text("    worst: " + ", ".join(f"{module_name(m.module)} {percent(m.rel)}" for m in worst), style="dim"))
    return lines


def render_parity(section: ParitySection) -> Any:
    """The parity section as a rich Group."""
    from rich.console import Group
    from rich.text import Text

    parts: list[Any] = [
        Text.assemble(
            ("\nnumerical parity", "bold"),
            f": {section.reference} (seed {section.seed}, {format_duration(section.reference_seconds)}) against emulated Neuron precisions; "
            f"a module passes when max-abs <= {section.atol:g} + {section.rtol:g} x max|reference|",
        ),
        Text(f"inputs: {section.inputs}", style="dim"),
    ]
    if section.shrunk:
        parts.append(Text(section.shrunk, style="yellow"))
    for run in section.runs:
        parts.extend(_run_lines(run))
    if section.xla_vs_emulation:
        parts.append(Text(section.xla_vs_emulation))
    parts.append(Text("emulated: " + "; ".join(section.emulated), style="dim"))
    parts.append(Text("not emulated: " + "; ".join(section.not_emulated), style="dim"))
    return Group(*parts)
