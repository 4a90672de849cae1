"""``neuronprobe report``: the HTML report again from a report JSON (issue 5)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from neuronprobe.cli.common import (
    app,
    guarded,
    out_console,
    write,
)
from neuronprobe.cli.options import DebugOpt

# --- report (issue 5) --------------------------------------------------------------


@app.command()
def report(
    run: Annotated[Path, typer.Argument(metavar="RUN.json", help="A report JSON written by `neuronprobe analyze`.")],
    output: Annotated[Path | None, typer.Option("--output", "-o", help="The HTML file to write (default: RUN with .html).")] = None,
    debug: DebugOpt = False,
) -> None:
    """Re-render the self-contained HTML report from a report JSON, on any machine."""
    with guarded(debug):
        from neuronprobe.files import check_outputs
        from neuronprobe.report.html import render_html
        from neuronprobe.report.model import load_report

        out = output if output is not None else run.with_suffix(".html")
        check_outputs([("--output", out)], [run])
        loaded = load_report(str(run))
        write(out, render_html(loaded))
        out_console().print(f"report: {out}", markup=False)
