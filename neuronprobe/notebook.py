"""``%load_ext neuronprobe``: the report of a model, inline, from a notebook cell.

Two magics, both good guests (they leave the user's namespace and process as they were):

* ``%neuronprobe analyze MODEL [options]`` runs the command line in a child process, with
  exactly the CLI's arguments (``--target``, ``--backend xla-cpu``, ``--train``, gates, ...),
  and shows the report it wrote inline. The model code runs in that child, never in the
  kernel, so nothing it does (threads, ``sys.exit``, torch settings) reaches the notebook.
  Other subcommands (``buckets``, ``audit``, ``doctor``) run the same way and print their output.
* ``%%neuronprobe [--target T] [--train] ...`` analyses the model the cell builds: the cell
  defines ``get_model()`` and ``get_example_inputs()``, or leaves ``model`` and ``inputs``.
  The cell runs in a copy of the user's namespace, so its names stay out of it; its code is
  compiled under IPython's own name for the cell, so every finding says ``In [n], line k``.

Returned values are :class:`~neuronprobe.report.model.Report` objects: the notebook draws the
last one, and ``r = %neuronprobe analyze m.py`` keeps it.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from neuronprobe.cells import execution_count, is_cell_file

# What the cell magic does not take of `analyze`'s options: the model is the cell's (no file, no --set,
# no --path), parity rebuilds a model from its seed, the library writes no file, and env is the worker's.
NOT_IN_A_CELL = frozenset({"model", "set", "path", "env", "parity", "json", "output_dir", "html", "command_line"})
# The command-line subcommand whose report the line magic shows inline.
ANALYZE = "analyze"


class MagicUsageError(ValueError):
    """A magic line neuronprobe cannot use: one sentence, no traceback."""


def cell_fields() -> list[str]:
    """The request fields a ``%%neuronprobe`` line takes: every analyze option that applies to a model object."""
    from neuronprobe.request.model import FIELDS

    return [n for n in FIELDS if n not in NOT_IN_A_CELL]


def cell_options() -> tuple[str, ...]:
    """The flags of :func:`cell_fields`, and ``--name`` (the report's name for the cell's model)."""
    from neuronprobe.request.model import flag_of

    return (*(flag_of(n) for n in cell_fields()), "--name")


def _cell_parser() -> argparse.ArgumentParser:
    """The analyze flags as the one request (:mod:`neuronprobe.request`) defines them: a comma list stays a string (the API splits it)."""
    from neuronprobe.request.model import FIELDS

    parser = argparse.ArgumentParser(prog="%%neuronprobe", add_help=False, exit_on_error=False)
    for name in cell_fields():
        spec = FIELDS[name]
        flag, hint = spec.metadata["flag"], str(spec.type)
        default = spec.default
        if hint == "bool":
            parser.add_argument(flag, dest=name, action="store_true", default=default)
            continue
        kind: Any = int if hint.startswith("int") else float if hint.startswith("float") else str
        parser.add_argument(flag, dest=name, default=None if isinstance(default, tuple) and not default else default, type=kind)
    parser.add_argument("--name", default=None)
    return parser


def parse_cell_options(line: str) -> dict[str, Any]:
    """The keyword arguments of ``neuronprobe.analyze`` that a ``%%neuronprobe`` line asks for."""
    try:
        known, unknown = _cell_parser().parse_known_args(shlex.split(line))
    except (argparse.ArgumentError, ValueError) as exc:
        raise MagicUsageError(f"%%neuronprobe {line.strip()}: {exc}") from None
    if unknown:
        raise MagicUsageError(f"%%neuronprobe does not take {' '.join(unknown)}; it takes {', '.join(cell_options())}")
    return {k: v for k, v in vars(known).items() if v is not None or k == "name"}


def model_from_namespace(ns: dict[str, Any]) -> tuple[Any, Any]:
    """``(model, example inputs)`` from what a cell left: ``get_model``/``get_example_inputs``, else ``model``/``inputs``."""
    get_model, get_inputs = ns.get("get_model"), ns.get("get_example_inputs")
    if callable(get_model):
        if not callable(get_inputs):
            raise MagicUsageError("the cell defines get_model() but not get_example_inputs()")
        return get_model(), get_inputs()
    if "model" in ns and "inputs" in ns:
        return ns["model"], ns["inputs"]
    raise MagicUsageError("the cell must define get_model() and get_example_inputs(), or leave `model` and `inputs`")


def run_cell(shell: Any, line: str, cell: str) -> Any:
    """What ``%%neuronprobe`` does: run the cell in a copy of the namespace, then analyse its model."""
    import neuronprobe

    options = parse_cell_options(line)
    # The cell's body starts on the line after the magic: one blank line first keeps line k the cell's line k.
    source = "\n" + cell
    number = _running_cell_number(shell)
    filename = shell.compile.cache(source, number, raw_code=source)
    ns = dict(shell.user_ns)  # a shallow copy: what the cell defines stays out of the user's namespace
    try:
        exec(compile(source, filename, "exec", dont_inherit=True), ns)
        model, inputs = model_from_namespace(ns)
    except MagicUsageError:
        raise
    except (Exception, SystemExit) as exc:  # the cell's own error: one line naming its line, no neuronprobe frames
        raise _cell_failure(exc, filename, number) from None
    return neuronprobe.analyze(model, inputs, **options)


def _cell_failure(exc: BaseException, filename: str, number: int) -> MagicUsageError:
    """``In [7], line 3: the cell raised ValueError: bad shape``: where in the cell, never where in neuronprobe."""
    import traceback

    line = None
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        if frame.f_code.co_filename == filename:
            line = lineno  # the innermost line of the cell (a function the cell defined included)
    where = f"In [{number}], line {line}" if line is not None else f"In [{number}]"
    try:
        text = str(exc).strip().splitlines()
    except Exception:  # an exception whose __str__ raises: its type still names it, never a traceback of ours
        text = []
    return MagicUsageError(f"{where}: the cell raised {type(exc).__name__}" + (f": {text[0]}" if text else ""))


def _running_cell_number(shell: Any) -> int:
    """The execution count of the cell running this magic (the ``n`` of ``In [n]``).

    ``shell.execution_count`` is already the *next* count while a cell runs (IPython 9.18
    ``run_cell_async`` increments it before executing), so the count is read from the cell's own
    frame, which IPython compiled under its name for the cell.
    """
    frame = sys._getframe(1)
    while frame is not None:
        number = execution_count(frame.f_code.co_filename) if is_cell_file(frame.f_code.co_filename) else None
        if number is not None:
            return number
        frame = frame.f_back  # type: ignore[assignment]
    return max(int(shell.execution_count) - 1, 1)


def run_line(line: str) -> Any:
    """What ``%neuronprobe SUBCOMMAND ...`` does: the CLI in a child process; a Report for analyze."""
    from neuronprobe.process.lifeline import PARENT_PID_ENV
    from neuronprobe.report.model import load_report

    try:
        args = shlex.split(line)
    except ValueError as exc:  # an unclosed quote: the shell would refuse the line too
        raise MagicUsageError(f"%neuronprobe {line.strip()}: {exc} (close the quote)") from None
    if not args:
        raise MagicUsageError("usage: %neuronprobe analyze MODEL [options] (the command line's arguments)")
    with tempfile.TemporaryDirectory(prefix="neuronprobe-magic-") as tmp:
        json_path = _json_path(args)
        extra: list[str] = []
        if args[0] == ANALYZE and json_path is None:
            json_path = str(Path(tmp) / "report.json")
            extra = ["--json", json_path]
        proc = subprocess.run(
            [sys.executable, "-m", "neuronprobe", *args, *extra],
            capture_output=True,
            text=True,
            check=False,
            # The command dies with this kernel (python -m neuronprobe arms PR_SET_PDEATHSIG): a killed or
            # restarted kernel does not leave an analysis running for up to its --timeout.
            env={**os.environ, "NO_COLOR": "1", PARENT_PID_ENV: str(os.getpid())},
        )
        if args[0] != ANALYZE or proc.returncode not in (0, 1, 4) or not json_path or not os.path.exists(json_path):
            sys.stdout.write(proc.stdout)
            sys.stderr.write(proc.stderr)
            return None
        sys.stderr.write(proc.stderr)  # gate failures and warnings: one line each
        return load_report(json_path)


def _json_path(args: list[str]) -> str | None:
    """The ``--json`` path the user gave on the magic line, if any."""
    for i, arg in enumerate(args):
        if arg == "--json" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--json="):
            return arg.split("=", 1)[1]
    return None


def load_ipython_extension(ipython: Any) -> None:
    """Register ``%neuronprobe`` and ``%%neuronprobe`` (``%load_ext neuronprobe``)."""
    from neuronprobe.errors import GateFailed, NeuronprobeError

    def magic(line: str, cell: str | None = None) -> Any:
        try:
            return run_line(line) if cell is None else run_cell(ipython, line, cell)
        except GateFailed as exc:  # --fail-on in a cell: the report still shows, the failed gate on stderr (the CLI's exit 1)
            print(f"neuronprobe: gate failed: {exc}", file=sys.stderr)
            return exc.result
        except (MagicUsageError, NeuronprobeError) as exc:
            print(f"neuronprobe: {exc}", file=sys.stderr)
            return None

    ipython.register_magic_function(magic, magic_kind="line_cell", magic_name="neuronprobe")


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext neuronprobe``: the magics go away."""
    magics = ipython.magics_manager.magics
    for kind in ("line", "cell"):
        magics[kind].pop("neuronprobe", None)
