"""The console summary: a rich renderable built from a Report (the CLI prints it)."""

from __future__ import annotations

from typing import Any

from neuronprobe.formatting import format_bytes, format_percent
from neuronprobe.report.schema.report import ReportData
from neuronprobe.report.schema.serving import ServingPlan
from neuronprobe.vocabulary import CaptureStrategy, Origin, TopVerdict, Verdict

TOP_FINDINGS = 10

# The banner's colour per top-line verdict (its words are TopVerdict.words).
BANNER_COLOUR: dict[TopVerdict, str] = {
    TopVerdict.RUNS: "green",
    TopVerdict.RUNS_SPLIT: "yellow",
    TopVerdict.RUNS_WITH_FALLBACKS: "yellow",
    TopVerdict.WILL_NOT_COMPILE: "red",
    TopVerdict.NOT_ANALYSED: "red",
    TopVerdict.RUNS_UNOBSERVED: "yellow",
    TopVerdict.INCOMPLETE: "red",
}


def verdict_style(verdict: Verdict) -> str:
    """Green for what compiles, blue for a note (compiles, results differ), yellow for a fallback, red for what stops the compile."""
    if verdict.is_note:
        return "blue"
    if not verdict.is_problem:
        return "green"
    return "red" if verdict.blocks_compile else "yellow"


def render_summary(report: ReportData) -> Any:
    from rich.console import Group
    from rich.text import Text

    s = report.summary
    top = report.verdict
    colour, words = BANNER_COLOUR[top], top.words
    backend = report.backend.name + (" (FAKE SDK, not hardware)" if report.backend.fake else "")
    head = Text.assemble(
        (f"{report.model}", "bold"),
        f" on {report.target}: ",
        (words, f"bold {colour}"),
        f"\nbackend {backend} · stack {report.support_table.stack}{' (compile)' if report.support_table.mode == 'compile' else ''} · capture {report.capture.method} · support table {report.support_table.version}",
    )
    if report.backend.detail:
        head.append(f"\n{report.backend.detail}", style="dim")
    if report.capture.strategy not in (None, CaptureStrategy.META, CaptureStrategy.AS_GIVEN):
        head.append(f"\n{strategy_line(report)}", style="dim")
    counts = Text(counts_line(report), style="dim")
    stats = Text(
        f"{s.ops_total} op calls, {s.distinct_ops} distinct · support {format_percent(s.support_percentage)} · "
        f"{s.device_graphs} device graph(s) · {s.graph_breaks} graph break(s) · "
        f"fallback transfers {format_bytes(s.fallback_bytes_per_call)} per call"
    )
    parts: list[Any] = [head, stats, counts]
    if report.train is not None:
        parts.extend(_training_lines(report))
    if report.findings:
        shown = sorted(report.findings, key=lambda f: -f.verdict.rank)[:TOP_FINDINGS]
        parts.append(Text(f"\nfindings: {len(report.findings)} (showing {len(shown)})", style="bold"))
        for f in shown:
            tag = f"{f.verdict}" + (f" {f.ncc_code}" if f.ncc_code else "") + _origin_tag(f.origins)
            if report.train is not None:
                tag = f"{f.phase:<9} {tag}"
            width = 36 if report.train is not None else 26
            line = Text.assemble(("  " + (tag + " ").ljust(width), verdict_style(f.verdict)), f"{f.op}  ", (str(f.location), "bold"))
            if f.count > 1:
                line.append(f"  x{f.count}")
            parts.append(line)
            if f.source_line:
                parts.append(Text(f"      {f.source_line}", style="cyan"))
            if f.call_chain:
                parts.append(Text(f"      via {f.chain_text}", style="dim"))
            if f.confirmation is not None:  # a risky low-precision construct, as the parity run measured it
                parts.append(Text(f"      parity: {f.confirmation.words}", style=verdict_style(f.verdict)))
            parts.append(Text(f"      fix: {f.fix}", style="dim"))
    elif top is TopVerdict.RUNS:
        parts.append(Text("no findings: every captured op lowers or decomposes", style="green"))
    elif top is TopVerdict.RUNS_SPLIT:
        parts.append(Text(f"every captured op lowers or decomposes, but the report counts {', '.join(report.splits_per_call())}", style="yellow"))
    elif top is TopVerdict.RUNS_UNOBSERVED:
        parts.append(Text("no findings predicted, but the observation that would confirm it was cut short (see 'not analysed')", style="yellow"))
    elif top is TopVerdict.INCOMPLETE:
        parts.append(Text(f"no findings in what was captured, but {report.capture.incomplete}", style="red"))
    if report.recompiles is not None:
        from neuronprobe.report.console_recompiles import render_recompiles

        parts.append(render_recompiles(report.recompiles))
    if report.parity is not None:
        from neuronprobe.report.console_parity import render_parity

        parts.append(render_parity(report.parity))
    if report.serving is not None:
        parts.extend(Text(line) for line in serving_lines(report.serving))
    if report.buckets is not None:
        b = report.buckets
        parts.append(Text(f"buckets: {b.edges} ({b.k} graphs) pad {format_percent(b.overhead.tokens)} tokens under {b.cost_model} cost"))
    if report.prediction_diff is not None:
        d = report.prediction_diff
        parts.append(
            Text(
                f"prediction vs observed: {len(d.predicted_ok_observed_failing)} predicted fine but failed, "
                f"{len(d.predicted_failing_observed_ok)} predicted failing but fine"
            )
        )
    for limit in report.not_analysed:
        parts.append(Text(f"not analysed: {limit.what}: {limit.why}", style="dim"))
    return Group(*parts)


def serving_lines(plan: ServingPlan) -> list[str]:
    """The serving section in two lines: the proposed ladders against the default's, and the compile bill
    (``buckets --runtime vllm-neuron`` prints the whole plan; the JSON and HTML hold all of it)."""
    out = []
    p = plan.proposed
    if p is not None:
        default = plan.baselines[0] if plan.baselines else None
        out.append(
            f"serving on vLLM Neuron: num_batched_tokens_buckets {p.prefill_buckets}, num_seqs_buckets {p.batch_buckets}, "
            f"decode_context_length_buckets {p.context_buckets or 'none'}: {p.graphs} graphs"
            + (
                ""
                if default is None
                else f" (the default ladders: {default.graphs}), modelled time +{p.time_overhead:.1f}% over unpadded (default +{default.time_overhead:.1f}%)"
            )
        )
    bill = plan.compile_bill
    if bill.calibrated and bill.wall_seconds is not None:
        host = "" if bill.host_peak_gib is None else f", host RAM peak {bill.host_peak_gib:.1f} GiB"
        out.append(f"serving compile bill: {len(bill.graphs)} graphs, {bill.wall_seconds / 60:.1f} min on {bill.workers} workers{host}, from {bill.source}")
    else:
        out.append(f"serving compile bill: {len(bill.graphs)} graphs; {bill.how_to_calibrate}")
    return out


def counts_line(report: ReportData) -> str:
    """The counts row, ``lowered 3  decomposed 1 .. compile_error 0``, from :meth:`Report.verdict_counts`."""
    counts = report.verdict_counts()
    return "  ".join(f"{v} {counts[v]}" for v in Verdict)


def _origin_tag(origins: list[Origin]) -> str:
    """`` observed`` for an observed finding, `` observed+predicted`` when both found it, nothing for a prediction."""
    if Origin.OBSERVED not in origins:
        return ""
    return " observed+predicted" if Origin.PREDICTED in origins else " observed"


def _training_lines(report: ReportData) -> list[Any]:
    """--train: how the step was built, what the loop costs, and the summary of each phase."""
    from rich.text import Text

    t = report.train
    assert t is not None
    lines = [
        Text(
            f"training step: loss {t.loss} · optimizer {t.optimizer}"
            + (" · train_step() from the model file" if t.train_step else "")
            + f" · {t.host_syncs_per_step} host sync(s) per step · {t.graphs_per_step} graph execution(s) per step"
            + f" · {t.uploads_per_step} host-to-device upload(s) per step",
            style="bold",
        )
    ]
    if t.observed_graphs_per_step is not None:
        lines.append(
            Text(
                f"  observed on the XLA device: {t.observed_graphs_per_step} graph execution(s), "
                f"{t.observed_host_syncs_per_step} host sync(s), "
                + (f"{t.observed_uploads_per_step} upload(s), " if t.observed_uploads_per_step is not None else "")
                + f"{t.observed_compiles} compile(s) in one step"
            )
        )
    for phase, p in report.summary.phases.items():
        if phase == "loop":
            lines.append(Text(f"  {phase:<9} {p.findings} host read(s) in train_step, each a device sync per step"))
            continue
        lines.append(Text(f"  {phase:<9} {p.ops_total:>6} op calls · support {format_percent(p.support_percentage):>6} · {p.findings} finding(s)"))
    return lines


def strategy_line(report: ReportData) -> str:
    """How the capture ran when it was not the plain meta-device path, and why the earlier ways failed."""
    why = "; ".join(f"{r.strategy}: {r.reason}" for r in report.capture.strategy_reasons)
    return f"capture strategy {report.capture.strategy}" + (f" (after {why})" if why else "")
