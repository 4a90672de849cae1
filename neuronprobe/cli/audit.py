"""``neuronprobe audit``: the CUDA assumptions of a repository (issue 14)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from neuronprobe import defaults
from neuronprobe.cli.common import (
    app,
    audit_reads,
    err_console,
    guarded,
    out_console,
    split_csv,
    write,
)
from neuronprobe.cli.options import DebugOpt
from neuronprobe.errors import EXIT_GATE_FAILED

# --- audit (issue 14) ---------------------------------------------------------------


@app.command()
def audit(
    # str, not Path: Path("") is ".", and an empty argument must be refused, not audit the current folder
    paths: Annotated[list[str] | None, typer.Argument(help="Files or folders to audit (a repository, its CI and Dockerfiles).")] = None,
    rules: Annotated[bool, typer.Option("--rules", help="List the rules with their fixes and sources, and exit.")] = False,
    stack: Annotated[
        str | None,
        typer.Option("--stack", help="Fixes for xla (torch-neuronx on trn1/inf2) or native (TorchNeuron on trn2/trn3); default from --target."),
    ] = None,
    target: Annotated[str, typer.Option(help="Neuron target: trn1, inf2 (stack xla), trn2 or trn3 (stack native).")] = defaults.DEFAULT_TARGET,
    json_path: Annotated[Path | None, typer.Option("--json", help="Write the findings as JSON here (also a --baseline).")] = None,
    sarif_path: Annotated[Path | None, typer.Option("--sarif", help="Write SARIF 2.1.0 here, for GitHub code scanning.")] = None,
    fail_on: Annotated[
        str | None,
        typer.Option("--fail-on", help="Exit 1 on a new finding at this severity or worse (error, warning, info), or of these rule ids."),
    ] = None,
    baseline: Annotated[Path | None, typer.Option("--baseline", help="A previous `audit --json`: only findings it lacks are new and gate.")] = None,
    jobs: Annotated[int | None, typer.Option("--jobs", "-j", help="Worker processes (default: one per core).")] = None,
    include_vendored: Annotated[bool, typer.Option("--include-vendored", help="Also audit vendored folders (vendor/, third_party/, ...).")] = False,
    debug: DebugOpt = False,
) -> None:
    """Find the CUDA assumptions in a repository and its CI that fail, or fail silently, on Trainium/Inferentia2."""
    with guarded(debug):
        from neuronprobe.audit.api import check_audit_options, check_audit_target
        from neuronprobe.audit.console import render_audit, render_rules
        from neuronprobe.audit.engine import gate

        chosen = check_audit_target(stack, target)
        console = out_console()
        if rules:
            for part in render_rules(stack):
                console.print(part)
            return
        gates = split_csv(fail_on)
        paths = list(paths or [])
        check_audit_options(paths, gates, jobs)
        from neuronprobe.files import check_outputs

        outputs = [(flag, p) for flag, p in (("--json", json_path), ("--sarif", sarif_path)) if p is not None]
        check_outputs(outputs, [*audit_reads(paths, include_vendored), baseline])
        section = _audit_with_progress(paths, chosen, jobs, include_vendored, baseline)
        for part in render_audit(section):
            console.print(part)
        if json_path is not None:
            from neuronprobe.audit.model import AUDIT_DOCUMENT

            write(json_path, AUDIT_DOCUMENT.dumps(section))  # versioned: schema_version first
            console.print(f"json: {json_path}", markup=False)
        if sarif_path is not None:
            from neuronprobe.audit.sarif import sarif_json
            from neuronprobe.version import __version__

            write(sarif_path, sarif_json(section, __version__))
            console.print(f"sarif: {sarif_path}", markup=False)
        hit = gate(section, gates)
        if hit:
            err_console().print(f"gate failed: {len(hit)} new finding(s) at --fail-on {','.join(gates)}", markup=False)
            raise typer.Exit(EXIT_GATE_FAILED)


def _audit_with_progress(paths: list[str], stack: str, jobs: int | None, include_vendored: bool, baseline: Path | None) -> Any:
    """Run the audit with a progress bar on stderr when stderr is a terminal."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from neuronprobe.audit.engine import audit_paths

    err = err_console()
    if not err.is_terminal:  # a CI log: no bar, and no stray blank line where it would have been
        return audit_paths(paths, stack, jobs=jobs, include_vendored=include_vendored, baseline=baseline)
    with Progress(TextColumn("auditing"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err, transient=True) as bar:
        task = bar.add_task("audit", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        return audit_paths(paths, stack, jobs=jobs, include_vendored=include_vendored, baseline=baseline, progress=progress)
