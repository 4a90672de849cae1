"""What every command shares: the Typer app, the error edge (typed errors to one line and an exit code),
the consoles, atomic writes and the small parsers of comma lists.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperGroup

from neuronprobe.errors import BUG_REPORT_URL, EXIT_GATE_FAILED, EXIT_INTERNAL, EXIT_UNUSABLE, NeuronprobeError
from neuronprobe.request.check import int_list, rule_table, split_csv

if TYPE_CHECKING:  # pragma: no cover
    from neuronprobe.gates import GateFailure

BUG_SENTENCE = f"this is a bug in neuronprobe, please report it at {BUG_REPORT_URL}"

# The commands, in the order `neuronprobe --help` lists them (cli/__init__.py imports each module, which registers it).
COMMANDS = ("analyze", "parity", "audit", "report", "diff", "nightly", "buckets", "doctor", "cache", "rules", "setup")


class _InOrder(TyperGroup):
    """Lists the commands in :data:`COMMANDS` order (a sub-app such as ``nightly`` would otherwise come after every command)."""

    def list_commands(self, ctx: Any) -> list[str]:
        names = super().list_commands(ctx)
        return sorted(names, key=lambda n: COMMANDS.index(n) if n in COMMANDS else len(COMMANDS))


app = typer.Typer(
    cls=_InOrder,
    name="neuronprobe",
    help="Neuron compile-and-fallback profiler: which ops will not lower on Trainium/Inferentia2, "
    "why your traffic recompiles, and which buckets minimise padding.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _show_version(value: bool) -> None:
    if value:
        from neuronprobe.version import __version__

        typer.echo(f"neuronprobe {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[bool, typer.Option("--version", callback=_show_version, is_eager=True, help="Print the version and exit.")] = False,
) -> None:
    """Neuron compile-and-fallback profiler: which ops will not lower on Trainium/Inferentia2,
    why your traffic recompiles, and which buckets minimise padding."""


def err_console() -> Any:
    from neuronprobe.console_io import make_console

    return make_console(stderr=True)  # user text is data: no :x: emoji, control characters shown escaped


def out_console() -> Any:
    from neuronprobe.console_io import make_console

    return make_console()


def fail(message: str, code: int = EXIT_UNUSABLE) -> typer.Exit:
    from rich.markup import escape  # a message may quote "[[models]]" or "x[0]": not markup

    err_console().print(f"[bold red]error:[/] {escape(message)}", markup=True, highlight=False)
    return typer.Exit(code)


@contextlib.contextmanager
def guarded(debug: bool) -> Iterator[None]:
    """Map library errors to one line and an exit code; tracebacks only with --debug (the exit code is the same).

    First, every number the command's options took is checked at the edge (int64, finite).
    """
    try:
        _check_numbers()
        yield
    except typer.Exit:
        raise
    except NeuronprobeError as exc:
        if debug:
            _print_traceback(exc)
        raise fail(str(exc), exc.exit_code) from None
    except KeyboardInterrupt:
        raise fail("interrupted", 130) from None
    except RecursionError as exc:  # malformed input nested too deep for a parser we do not wrap
        if debug:
            _print_traceback(exc)
        raise fail("the input is nested too deep to read") from None
    except Exception as exc:  # an InternalError, or any other exception: a bug in neuronprobe (exit 3)
        if debug:
            _print_traceback(exc)
        from neuronprobe.files import unusable_path

        user = unusable_path(exc)  # a path the file system refuses (too long, a loop of links): the user's to fix
        if user is not None:
            raise fail(user) from None
        raise fail(_internal_error_line(exc, debug), EXIT_INTERNAL) from None


def _check_numbers() -> None:
    """Every integer and float option of the running command within int64 and finite (one sentence naming it)."""
    import importlib

    from neuronprobe.options import check_parameters

    # The click typer runs on (its own vendored copy from typer 0.29, else click): where typer.Context comes from.
    base = next(c for c in typer.Context.__mro__[1:] if c.__name__ == "Context")
    ctx = importlib.import_module(base.__module__.rsplit(".", 1)[0] + ".globals").get_current_context(silent=True)
    if ctx is None:
        return
    flags = {p.name: (p.opts[0] if p.opts else p.name) for p in ctx.command.params if p.name}
    check_parameters(ctx.params, flags)


def _internal_error_line(exc: BaseException, debug: bool = False) -> str:
    """The one line an internal error prints: what was raised, that it is a bug, and where to report it."""
    text = str(exc).strip().splitlines()
    what = f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
    hint = "" if debug else " (run again with --debug for the traceback)"
    return f"internal error: {what}; {BUG_SENTENCE}{hint}"


def _print_traceback(exc: BaseException) -> None:
    """--debug: the traceback (with the worker's, attached as a note) on stderr, before the one line."""
    import traceback

    traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)


def write(path: Path, data: str | bytes) -> Path:
    from neuronprobe.files import write_atomic

    try:
        return write_atomic(path, data)
    except OSError as exc:
        raise fail(f"cannot write {path}: {exc.strerror or exc}") from None


def json_text(value: Any, indent: int = 2) -> str:
    """A JSON file's text through the codec: NaN and infinity as strings, never as bare constants."""
    from neuronprobe.jsonio import dumps

    return dumps(value, indent=indent)


def import_paths(paths: list[Path] | None) -> list[Path]:
    """The --path folders, each checked (one that is no folder: exit 2 before any work)."""
    from neuronprobe.loaders.resolve import check_import_paths

    return check_import_paths(paths or [])


def command_line() -> str:
    """The command line as the user typed it, for the report's metadata (``neuronprobe`` and the arguments)."""
    return " ".join(["neuronprobe", *sys.argv[1:]])


def tuple_or_none(values: list[int] | None) -> tuple[int, ...] | None:
    return tuple(values) if values is not None else None


def analyze_outputs(json_path: Path | None, output_dir: Path, stem: str, html: bool) -> list[tuple[str, Path]]:
    """(option, path) of each file analyze writes: the JSON, then the HTML."""
    json_out = json_path or output_dir / f"{stem}.json"
    out = [("--json" if json_path else "the JSON report", json_out)]
    if html:
        out.append(("the HTML report", json_out.with_suffix(".html") if json_path else output_dir / f"{stem}.html"))
    return out


def audit_reads(paths: list[Path] | list[str], include_vendored: bool) -> list[Path]:
    """What an audit of ``paths`` reads (the roots, every file the walk picks, each .gitignore): no output may be one."""
    from neuronprobe.audit.engine import audit_inputs

    return audit_inputs(paths, include_vendored)


def exit_on_gates(failures: list[GateFailure]) -> None:
    """Print each failed gate (from neuronprobe.gates) on a line of its own; exit 1 if there is any."""
    err = err_console()
    for failure in failures:
        err.print(f"gate failed: {failure.message}", markup=False, highlight=False)
    if failures:
        raise typer.Exit(EXIT_GATE_FAILED)


__all__ = [
    "BUG_SENTENCE",
    "COMMANDS",
    "analyze_outputs",
    "app",
    "audit_reads",
    "command_line",
    "err_console",
    "exit_on_gates",
    "fail",
    "guarded",
    "import_paths",
    "int_list",
    "json_text",
    "out_console",
    "rule_table",
    "split_csv",
    "tuple_or_none",
    "write",
]
