"""``neuronprobe diff``: two reports compared (issue 6)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from neuronprobe.cli.common import (
    app,
    exit_on_gates,
    guarded,
    out_console,
    write,
)
from neuronprobe.cli.options import DebugOpt

# --- diff and nightly (issue 6) ----------------------------------------------------


@app.command()
def diff(
    base: Annotated[Path, typer.Argument(help="The baseline report JSON.")],
    new: Annotated[Path, typer.Argument(help="The new report JSON.")],
    json_path: Annotated[Path | None, typer.Option("--json", help="Write the diff as JSON here.")] = None,
    html_path: Annotated[Path | None, typer.Option("--html", help="Write the NEW report as HTML here, with a 'changes since baseline' section.")] = None,
    fail_on_regression: Annotated[
        bool,
        typer.Option(
            "--fail-on-regression",
            help="Exit 1 on a regression (new problem finding, lower support %, more graphs, more padding). "
            "Runs on different backends, targets or neuronx-cc versions are shown but never gated.",
        ),
    ] = False,
    debug: DebugOpt = False,
) -> None:
    """Compare two reports: new and removed findings, support %, graphs, padding and versions."""
    with guarded(debug):
        from neuronprobe.files import check_outputs
        from neuronprobe.report.diff import DIFF_DOCUMENT, diff_reports, run_label
        from neuronprobe.report.diff_console import render_diff
        from neuronprobe.report.model import load_report

        check_outputs(
            [(flag, path) for flag, path in (("--json", json_path), ("--html", html_path)) if path is not None],
            [base, new],
        )
        base_report = load_report(str(base))
        new_report = load_report(str(new))
        result = diff_reports(
            base_report,
            new_report,
            base_label=f"{base}: {run_label(base_report)}",
            new_label=f"{new}: {run_label(new_report)}",
        )
        out_console().print(render_diff(result))
        if json_path is not None:
            write(json_path, DIFF_DOCUMENT.dumps(result))  # versioned: schema_version first
        if html_path is not None:
            from neuronprobe.report.html import render_html

            new_report.baseline_diff = result
            write(html_path, render_html(new_report))
        if fail_on_regression:
            from neuronprobe.gates import Gates, evaluate_gates

            exit_on_gates(evaluate_gates(new_report, Gates(fail_on_regression=True), diff=result))
