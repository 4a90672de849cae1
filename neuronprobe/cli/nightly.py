"""``neuronprobe nightly``: many models, their history and a regression gate (issue 6)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from neuronprobe.cli.common import (
    BUG_SENTENCE,
    app,
    command_line,
    err_console,
    fail,
    guarded,
    out_console,
    write,
)
from neuronprobe.cli.options import DebugOpt
from neuronprobe.errors import EXIT_GATE_FAILED, EXIT_INTERNAL, EXIT_UNUSABLE

RUN, MERGE = "run", "merge"
HELP = "Analyse every model of CONFIG, diff each against its last run on the same backend, update the history page."


class NightlyGroup(TyperGroup):
    """``nightly CONFIG ...`` is ``nightly run CONFIG ...`` (the night); ``nightly merge SHARD_DIR...`` merges shard folders.

    A first argument that names no sub-command (a config file, or an option of the run) goes to ``run``,
    so the command line of every existing night keeps working.
    """

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            args = [RUN, *args]
        return super().parse_args(ctx, args)


nightly_app = typer.Typer(cls=NightlyGroup, help=HELP, no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
app.add_typer(nightly_app, name="nightly")

DateOpt = Annotated[str | None, typer.Option("--date", help="The night's name, YYYY-MM-DD (default: today in UTC); for reruns and tests.")]


@nightly_app.command(RUN)
def nightly(
    config: Annotated[
        Path,
        typer.Argument(help="The nightly CONFIG.toml: defaults, and one \\[\\[models]] table per model. `nightly merge SHARD_DIR...` merges shard folders."),
    ],
    output_dir: Annotated[
        Path, typer.Option("--output-dir", "-o", help="The reports folder: <date>/<model>.{json,html} and index.html (with --shard: the shard folder).")
    ] = Path("reports"),
    date: DateOpt = None,
    require_backend: Annotated[
        str | None,
        typer.Option("--require-backend", help="Fail with exit 2 unless this backend is really there (overrides the config)."),
    ] = None,
    jobs: Annotated[
        int | None,
        typer.Option("--jobs", "-j", help="Models analysed at once, each in its own worker (default: one per core, fewer when memory is short)."),
    ] = None,
    total_memory: Annotated[
        str | None,
        typer.Option("--total-memory", help="Memory all workers share, e.g. 32G or 75% (default 75% of the machine); a worker waits while it would not fit."),
    ] = None,
    shard: Annotated[
        str | None,
        typer.Option("--shard", help="Analyse only part I of N (1-based, N <= 256) into the -o shard folder; `nightly merge` writes the history."),
    ] = None,
    history: Annotated[
        Path | None,
        typer.Option("--history", help="The reports folder: with --shard, balance shards by its last durations."),
    ] = None,
    cache_dir: Annotated[
        Path | None,
        typer.Option(
            "--cache", help="Reuse the last report of a model whose inputs did not change (default: <output-dir>/.cache; with --shard: off unless given)."
        ),
    ] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Analyse every model, whatever the cache holds.")] = False,
    debug: DebugOpt = False,
) -> None:
    """Analyse every model of CONFIG, diff each against its last run on the same backend, update the history page
    (the default: `nightly CONFIG` is `nightly run CONFIG`).

    Exit 1 on a regression; 2 when the config is unusable, a model cannot be analysed or a required backend is missing;
    3 when a model's analysis hit a bug in neuronprobe.
    """
    with guarded(debug):
        from neuronprobe.nightly.night import plan_night, run_night, save_night
        from neuronprobe.nightly.run import INDEX_FILE

        night = plan_night(
            config,
            output_dir,
            date=date,
            require_backend=require_backend,
            jobs=jobs,
            total_memory=total_memory,
            shard=shard,
            history=history,
            cache_dir=cache_dir,
            no_cache=no_cache,
        )
        err = err_console()
        if night.cache is not None and night.cache.off:  # no key it can trust: say so, analyse everything
            err.print(f"note: {night.cache.off}", markup=False)
        with _night_progress(len(night.models)) as on_done:
            done = run_night(night, command_line=command_line(), on_done=on_done)
        save_night(night, done, write)
        for note in done.notes:
            err.print(f"note: {note}", markup=False)
        if night.shard is not None:
            failed = done.failed()
            for a in failed:
                err.print(f"error: {a.name}: {a.error}", markup=False, style="red")
            index, of = night.shard
            out_console().print(f"shard {index}/{of}: {len(done.analysed)} model(s), {len(failed)} failed: {output_dir}", markup=False)
            return  # a shard gates nothing: the merge gives the night's exit code
        _finish_nightly(done.result, output_dir / INDEX_FILE)


@nightly_app.command(MERGE)
def merge(
    shard_dirs: Annotated[
        list[Path] | None, typer.Argument(help="The shard folders of one nightly run (`nightly CONFIG --shard I/N`).", show_default=False)
    ] = None,
    history: Annotated[
        Path | None, typer.Option("--history", help="The reports folder to write the night into (reports, diffs, index), as a whole night would.")
    ] = None,
    date: DateOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Merge the shard folders of one night into the history: reports, diffs and index, then the night's gate.

    Exit codes as a whole night: 1 on a regression, 2 when a shard is missing, foreign or unreadable, 3 for a bug.
    """
    with guarded(debug):
        from neuronprobe.files import check_outputs
        from neuronprobe.nightly.run import INDEX_FILE, write_night
        from neuronprobe.nightly.shards import merge_output_files, merge_shards

        if not shard_dirs or history is None:
            raise fail("nightly merge SHARD_DIR... --history DIR: give the shard folders and the reports folder")
        _night, outputs = merge_output_files(shard_dirs, date)
        shard_inputs = [p for folder in shard_dirs for p in Path(folder).iterdir() if p.is_file()]  # merge reads them: never an output
        check_outputs([("the nightly output", history / f) for f in outputs], shard_inputs, folders=[("--history", history)])
        result = merge_shards(shard_dirs, history, date)
        write_night(result, history, write)
        _finish_nightly(result, history / INDEX_FILE)


@contextlib.contextmanager
def _night_progress(total: int) -> Iterator[Callable[[Any], None]]:
    """A progress bar on a terminal; otherwise (a CI log) one line per finished model."""
    import threading

    from neuronprobe.formatting import format_duration
    from neuronprobe.report.nightly_html import STATUS_TEXT

    err = err_console()
    lock = threading.Lock()
    done = [0]
    if not err.is_terminal:

        def line(item: Any) -> None:
            with lock:
                done[0] += 1
                if item.reused_from is not None:
                    state = f"reused the report of {item.reused_from} (inputs unchanged)"
                else:
                    state = f"{STATUS_TEXT['failed'] if item.report is None else 'analysed'} in {format_duration(item.seconds)}"
                err.print(f"[{done[0]}/{total}] {item.name}: {state}", markup=False)

        yield line
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("nightly"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err, transient=True) as bar:
        task = bar.add_task("nightly", total=total)

        def advance(item: Any) -> None:
            with lock:
                bar.advance(task)

        yield advance


def _finish_nightly(result: Any, index: Path) -> None:
    """Print the night and exit with its worst outcome: a neuronprobe bug (3), a model that could not be analysed (2), a regression (1)."""
    _print_nightly(result, index)
    if result.internal_errors:
        raise typer.Exit(EXIT_INTERNAL)
    if result.failures:
        raise typer.Exit(EXIT_UNUSABLE)
    if result.gate_failures:
        raise typer.Exit(EXIT_GATE_FAILED)


def _print_nightly(result: Any, index: Path) -> None:
    """A table of tonight's models, then every regression, failure and warning on a line of its own."""
    from neuronprobe.report.console_tables import render_nightly_table

    console, err = out_console(), err_console()
    console.print(render_nightly_table(result))
    for o in result.outcomes:
        if o.diff is not None and not o.diff.comparable:
            console.print(f"{o.name}: not comparable, not gated: {o.diff.not_comparable_reason}", markup=False)
    console.print(f"history: {index}", markup=False)
    for warning in result.warnings:
        err.print(f"warning: {warning}", markup=False)
    for o in result.failures:
        err.print(f"error: {o.name}: {o.error}", markup=False, style="red")
    if result.internal_errors:
        err.print(f"error: {BUG_SENTENCE}", markup=False, style="red")
    gates = result.gate_failures
    for failure in gates:
        for line in failure.failed:
            err.print(f"regression: {line}", markup=False, style="red")
    if gates:
        err.print(f"gate failed: {sum(f.count for f in gates)} regression(s)", markup=False)
