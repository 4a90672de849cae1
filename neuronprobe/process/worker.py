"""The analysis worker: user code runs in a child process that can be killed.

A model file is arbitrary code. Run inside neuronprobe's own process, a
``sys.exit(0)`` in ``forward`` ended the command with exit 0 and no report, an
endless loop hung it, and an unbounded allocation took the machine. As a command
(``analyze``, ``nightly``), neuronprobe therefore runs the whole library call
(loading, ``get_model``, inputs, capture, traffic evidence) in a forked child,
with the machinery of the live backend (:mod:`neuronprobe.process.isolation`):
its own process group, killed as a whole at the end, a wall-clock limit and a
bound on resident memory. The child sends the Report back as JSON; any other way
it ends becomes one :class:`WorkerFailure` sentence naming the model file and,
where known, the line.

The worker is generic: it runs any zero-argument callable that returns a
Report, so options added to ``analyze`` pass through it unchanged. The Python
API (``neuronprobe.analyze``) does not use it: a notebook user wants the objects
in their own process.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import signal
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neuronprobe import errors as _errors
from neuronprobe.defaults import DEFAULT_MEMORY_FRACTION, DEFAULT_TIMEOUT_S, MIN_MEMORY_BYTES
from neuronprobe.errors import InputError, InternalError, ModelLoadError, NeuronprobeError
from neuronprobe.formatting import format_memory
from neuronprobe.usercode import deepest_frame_file, exit_text, is_neuronprobe, line_in_stack_dump, line_in_traceback, where
from neuronprobe.vocabulary import StepStatus

if TYPE_CHECKING:
    from neuronprobe.process.forkserver import ForkServer

_UNITS = {"": 1, "b": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
_SIZE = re.compile(r"^\s*(?P<number>\d+(?:\.\d+)?)\s*(?P<unit>[kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)
_PERCENT = re.compile(r"^\s*(?P<number>\d+(?:\.\d+)?)\s*%\s*$")
# Exceptions that say "out of memory" wherever they are raised.
_OOM_TEXT = ("can't allocate memory", "Cannot allocate memory", "out of memory")


@dataclass(frozen=True)
class WorkerLimits:
    """What the worker may spend: wall-clock seconds and resident bytes (its whole process group)."""

    timeout_s: float = DEFAULT_TIMEOUT_S
    max_memory_bytes: int | None = None  # None: DEFAULT_MEMORY_FRACTION of the machine


class WorkerFailure(ModelLoadError):
    """The user's code ended the analysis: an exit, a signal, an uncaught exception, a limit."""


class WorkerInternalError(InternalError):
    """An exception raised inside neuronprobe's own code in the worker: a bug, reported as one (exit 3)."""


def machine_memory_bytes() -> int:
    """Physical memory of the machine (Linux sysconf)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-Linux
        return 16 * 2**30


def default_max_memory() -> int:
    return int(machine_memory_bytes() * DEFAULT_MEMORY_FRACTION)


def parse_memory(text: str | int, flag: str = "--max-memory") -> int:
    """``8G``, ``512MiB``, ``1.5g``, ``80%`` (of the machine) or a byte count; an InputError otherwise."""
    if isinstance(text, bool):
        raise InputError(f"{flag} {text!r}: give a size such as 8G, 512M or 75%")
    if isinstance(text, int):
        value = text
    else:
        m, p = _SIZE.match(str(text)), _PERCENT.match(str(text))
        if p:
            share = float(p.group("number"))
            if not 0 < share <= 100:
                raise InputError(f"{flag} {text}: a share of the machine's memory is between 0% and 100%")
            value = int(machine_memory_bytes() * share / 100)
        elif m:
            value = int(float(m.group("number")) * _UNITS[m.group("unit").lower()])
        else:
            raise InputError(f"{flag} {text!r}: give a size such as 8G, 512M or 75% (of the machine's memory)")
    if value < MIN_MEMORY_BYTES:
        raise InputError(f"{flag} {text}: the worker needs at least {format_memory(MIN_MEMORY_BYTES)} to load torch")
    from neuronprobe.options import INT64_MAX

    if value > INT64_MAX:  # 99999999999999999999999999G was accepted as 10^35 bytes
        raise InputError(f"{flag} {text}: at most 8 EiB (a 64-bit byte count)")
    return value


def check_timeout(seconds: float, flag: str = "--timeout") -> float:
    if not math.isfinite(seconds) or seconds <= 0:
        raise InputError(f"{flag} {seconds:g}: use a positive number of seconds")
    return seconds


@dataclass(frozen=True)
class PlainResult:
    """A call's result that is not a Report (a model's attention shape): sent back as it is (pickled)."""

    value: Any


# --- the child's side ------------------------------------------------------------------


def _child_call(call: Callable[[], Any], progress: Callable[[Any], None]) -> dict[str, Any]:
    """Run the library call; a typed neuronprobe error comes back as data, with its class and exit code.

    An :class:`InternalError` comes back as data too, marked ``internal``: it is a bug
    wherever it was raised, even while the model's own frames are on the stack
    (a chained traceback would otherwise name the model's line and blame the model).
    """
    from neuronprobe.console_io import stage_listener

    try:
        with stage_listener(lambda name: progress(("stage", name))):  # the command's status line (issue 33.8)
            report = call()
    except (NeuronprobeError, InternalError) as exc:
        import traceback

        return {
            "error": {
                "type": type(exc).__name__,
                "message": str(exc),
                "exit_code": exc.exit_code,
                "traceback": traceback.format_exc(),
                "internal": isinstance(exc, InternalError),
            }
        }
    if isinstance(report, PlainResult):
        return {"value": report.value}
    if isinstance(report, tuple):  # (report, payload): files the CLI writes after the run (parity --save-reference)
        report, payload = report
        return {"report": report.to_json(indent=None), "payload": payload}
    return {"report": report.to_json(indent=None)}


# --- the parent's side ------------------------------------------------------------------


def _error_class(name: str) -> type[NeuronprobeError]:
    """The NeuronprobeError subclass called ``name`` (so that callers can still catch it), else the base."""
    todo: list[type[NeuronprobeError]] = [NeuronprobeError]
    while todo:
        cls = todo.pop()
        if cls.__name__ == name:
            return cls
        todo.extend(cls.__subclasses__())
    return getattr(_errors, name, NeuronprobeError)


def _reraise(error: dict[str, Any]) -> Exception:
    exc: NeuronprobeError | WorkerInternalError
    if error.get("internal"):
        exc = _internal_error(str(error["type"]), str(error["message"]))
    else:
        exc = _error_class(str(error["type"]))(str(error["message"]))
        exc.exit_code = int(error["exit_code"])
    if error.get("traceback") and hasattr(exc, "add_note"):  # shown with --debug
        exc.add_note(f"in the analysis worker:\n{str(error['traceback']).rstrip()}")
    return exc


def _internal_error(name: str, message: str) -> WorkerInternalError:
    """A WorkerInternalError that prints as the original (``RecursionError: ...``), as it would in-process."""
    cls = type(name if name.isidentifier() else "WorkerInternalError", (WorkerInternalError,), {})
    return cls(message)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _is_internal(traceback_text: str) -> bool:
    """Raised in neuronprobe's own code (not the model's, not torch's): a neuronprobe bug."""
    file = deepest_frame_file(traceback_text)
    if not file:
        return False
    return is_neuronprobe(file)


def _failure_message(result: Any, label: str, model_file: Path | None, limits: WorkerLimits, memory: int) -> str:
    if result.status is StepStatus.TIMEOUT:
        line = line_in_stack_dump(result.stacks, model_file)
        return f"{where(label, line)}: the analysis did not finish within --timeout {limits.timeout_s:g} s and was stopped; fix the loop, or raise --timeout"
    if result.status is StepStatus.MEMORY:
        line = line_in_stack_dump(result.stacks, model_file)
        return (
            f"{where(label, line)}: the analysis used more than --max-memory {format_memory(memory)} "
            "(resident memory of the worker and every process it started) and was stopped; make the model or its inputs smaller, or raise --max-memory"
        )
    if result.status is StepStatus.DIED:
        code = result.exit_code
        if code is not None and code < 0:
            return f"{label}: the analysis was killed by {_signal_name(-code)} (the model code or the system ended it)"
        return f"{label}: the model code ended the analysis with exit code {code} (os._exit?) before it finished"
    # An exception escaped the library call in the child.
    line = line_in_traceback(result.traceback, model_file)
    kind, message = result.error_type, result.error.partition(": ")[2]
    if kind == "SystemExit":
        exit_arg: Any = message
        with contextlib.suppress(ValueError):
            exit_arg = int(message) if message else None
        return f"{where(label, line)}: the model code called {exit_text(exit_arg)}; a model file must return, not exit"
    if kind == "KeyboardInterrupt":
        return f"{where(label, line)}: the model code raised KeyboardInterrupt"
    if kind == "MemoryError" or any(t in result.error for t in _OOM_TEXT):
        return f"{where(label, line)}: the analysis ran out of memory ({kind}); make the model or its inputs smaller"
    return f"{where(label, line)}: the model code raised {result.error.splitlines()[0] if result.error else kind}"


def run_in_worker(
    call: Callable[[], Any],
    *,
    label: str,
    model_file: str | os.PathLike[str] | None = None,
    limits: WorkerLimits = WorkerLimits(),
    on_stage: Callable[[str], None] | None = None,
    server: ForkServer | None = None,
) -> Any:
    """Run ``call()`` (which returns a Report) in a killable child; return the Report rebuilt from its JSON.

    ``call()`` may return ``(report, payload)`` instead: then ``(Report, payload)`` comes back, the
    payload pickled as it is (bytes the CLI writes after the run, such as a frozen reference's files).

    ``label`` names the model in messages (the model file as the user wrote it, or
    an ``hf:`` spec); ``model_file`` is where to look for the line. Raises the
    child's own NeuronprobeError (same class, same exit code), a WorkerFailure
    for any other ending, or a WorkerInternalError (an :class:`InternalError`,
    exit 3) for a bug in neuronprobe. ``on_stage`` hears each stage the analysis enters (a status line).
    ``server``: a fork server that forks the child from a process that has already imported torch
    (``call`` must then be picklable, or it is forked from here as without one).
    """
    from neuronprobe.process.isolation import run_isolated
    from neuronprobe.report.model import Report

    memory = limits.max_memory_bytes if limits.max_memory_bytes is not None else default_max_memory()
    file = Path(model_file) if model_file is not None else None
    with tempfile.TemporaryDirectory(prefix="neuronprobe-worker-") as tmp:
        own_tmp = Path(tmp) / "tmp"  # the worker's (and the xla-cpu worker's) temporary files: removed here on every ending
        own_tmp.mkdir()
        result = run_isolated(
            _child_call,
            (call,),
            limit_s=limits.timeout_s,
            workdir=Path(tmp),
            name="analysis",
            capture_output=False,
            chdir=False,
            max_rss_bytes=memory,
            dump_stacks=True,
            daemon=False,
            tmpdir=own_tmp,
            on_progress=_stage_forwarder(on_stage),
            launcher=server.launch if server is not None else None,
        )
    if result.status is StepStatus.OK:
        value = result.value
        if "error" in value:
            raise _reraise(value["error"])
        if "value" in value:
            return value["value"]
        if "payload" in value:
            return Report.from_json(value["report"]), value["payload"]
        return Report.from_json(value["report"])
    failure: Exception = WorkerFailure(_failure_message(result, label, file, limits, memory))
    if (
        result.status is StepStatus.FAILED
        and result.error_type not in ("SystemExit", "KeyboardInterrupt", "MemoryError")
        and line_in_traceback(result.traceback, file) is None
        and _is_internal(result.traceback)
    ):
        failure = _internal_error(result.error_type, result.error.partition(": ")[2])
    # --debug shows the parent's traceback; the worker's own (or its stacks at the kill) go with it as a note.
    detail = result.traceback or result.stacks
    if detail and hasattr(failure, "add_note"):
        failure.add_note(f"in the analysis worker:\n{detail.rstrip()}")
    raise failure


def _stage_forwarder(on_stage: Callable[[str], None] | None) -> Callable[[Any], None] | None:
    """The child's ("stage", name) progress messages, to ``on_stage``."""
    if on_stage is None:
        return None

    def forward(message: Any) -> None:
        if isinstance(message, tuple) and len(message) == 2 and message[0] == "stage" and isinstance(message[1], str):
            on_stage(message[1])

    return forward


def limits_from_options(timeout: float, max_memory: str | int | None, names: tuple[str, str] = ("--timeout", "--max-memory")) -> WorkerLimits:
    """The worker's limits from the command's options, validated (exit 2 before any work)."""
    seconds = check_timeout(timeout, names[0])
    memory = parse_memory(max_memory, names[1]) if max_memory is not None else None
    return WorkerLimits(timeout_s=seconds, max_memory_bytes=memory)


def spec_model_file(spec: str) -> Path | None:
    """The model file a spec names (where its lines are), or None for hf:/tv:/timm: specs."""
    path = Path(spec)
    return path if ":" not in spec.split("/", 1)[0] and path.is_file() else None


def analyze_in_worker(
    spec: str, call: Callable[[], Any], limits: WorkerLimits, on_stage: Callable[[str], None] | None = None, server: ForkServer | None = None
) -> Any:
    """``call()`` (an analysis of ``spec`` returning a Report) in the worker, messages naming ``spec``."""
    return run_in_worker(call, label=spec, model_file=spec_model_file(spec), limits=limits, on_stage=on_stage, server=server)


__all__ = [
    "DEFAULT_TIMEOUT_S",
    "PlainResult",
    "WorkerFailure",
    "WorkerInternalError",
    "WorkerLimits",
    "analyze_in_worker",
    "check_timeout",
    "default_max_memory",
    "limits_from_options",
    "parse_memory",
    "run_in_worker",
    "spec_model_file",
]
