"""The command's standard streams: a closed or broken stdout ends quietly, with its own exit code.

``neuronprobe analyze m.py | head -3`` closes the pipe after three lines. Python
then raises BrokenPipeError at the next print, and click turned that into exit 1,
the code of a failed gate. Here stdout is wrapped once at start-up: the first
failed write points file descriptor 1 at ``/dev/null`` (so nothing else fails),
the command carries on (its reports are still written and its gates evaluated),
and the run ends with :data:`EXIT_STDOUT_CLOSED` instead of 0 or 1.

A stdout closed before the start (``neuronprobe ... >&-``) is the same case:
descriptor 1 is occupied by ``/dev/null`` first, so that no report file or pipe
can be opened as descriptor 1 and receive console text.

SIGTERM (a CI runner cancelling the job) becomes ``SystemExit(143)``: the worker's
process group is killed and temporary files are removed on the way out.

Console text is inert: a path or a name can hold terminal control characters
(``\\x1b]0;...`` retitles a terminal, ``\\x1b[2J`` clears it). :func:`inert` shows
each one escaped, and :func:`make_console` builds every console the commands
print to with a render hook that applies it to all text (tables, status lines,
errors), never to the styling rich adds itself. Rich markup in user text is
escaped where it is printed (``markup=False`` or ``rich.markup.escape``).

Stages (issue 33.8): the analysis says which stage it is in (:data:`STAGES`: load, capture,
classify, observe, traffic) with :func:`stage`; nothing listens unless a command asks
(:func:`stage_listener`), so the library, a notebook and the JSON output never see them. The
analysis worker forwards them to the command, which shows them on a terminal's stderr
(:func:`stage_display`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import signal
import sys
from typing import Any, TextIO

# 128 + SIGPIPE: what a shell reports for a process ended by a broken pipe.
EXIT_STDOUT_CLOSED = 141
# 128 + SIGTERM.
EXIT_TERMINATED = 143
# Exit codes that a lost stdout replaces: the user could not see the result they describe.
_REPLACED = (0, 1)

_state = {"lost": False}

# --- stages of an analysis ------------------------------------------------------------------

STAGES: tuple[str, ...] = ("load", "capture", "classify", "observe", "traffic")
# What each stage is doing, in the words the status line shows.
STAGE_WORDS: dict[str, str] = {
    "load": "loading the model",
    "capture": "capturing the ops the forward runs",
    "classify": "classifying each op against the support table",
    "observe": "observing the model on the backend's device",
    "traffic": "predicting compiles for the traffic",
}
# Set to 1 to show the stages on stderr even when it is not a terminal (a CI log, a test); 0 never shows them.
PROGRESS_ENV = "NEURONPROBE_PROGRESS"
_listeners: list[Any] = []


def stage(name: str) -> None:
    """The analysis enters stage ``name`` (one of :data:`STAGES`): every listener hears it; none: nothing happens."""
    if name not in STAGES:
        raise ValueError(f"unknown analysis stage {name!r}")  # a bug: the stages are a closed set
    for listener in list(_listeners):
        listener(name)


@contextlib.contextmanager
def stage_listener(listener: Any) -> Any:
    """``listener(stage)`` hears each stage the analysis enters while the body runs."""
    _listeners.append(listener)
    try:
        yield listener
    finally:
        _listeners.remove(listener)


def show_progress(stream: Any = None) -> bool:
    """Whether a command shows its stages: on a terminal's stderr, or when :data:`PROGRESS_ENV` forces it."""
    forced = os.environ.get(PROGRESS_ENV, "").strip()
    if forced in ("0", "1"):
        return forced == "1"
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


@contextlib.contextmanager
def stage_display(label: str) -> Any:
    """A status line on stderr naming the stage (a rich spinner on a terminal, one plain line per stage otherwise,
    when forced); yields the callback that takes the stages. Shows nothing when :func:`show_progress` is False."""
    if not show_progress():
        yield lambda name: None
        return
    console = make_console(stderr=True)
    if console.is_terminal:
        with console.status(f"{inert(label)}: starting", spinner="dots") as status:
            yield lambda name: status.update(f"{inert(label)}: {STAGE_WORDS.get(name, name)}")
        return
    yield lambda name: console.print(f"{label}: {STAGE_WORDS.get(name, name)}", markup=False, highlight=False)


# C0 controls but newline and tab, DEL, C1 controls, and the bidirectional overrides that
# reorder what a reader sees (Trojan Source, CVE-2021-42574).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def inert(text: str) -> str:
    """``text`` with every terminal control character shown escaped (``\\x1b``, ``\\u202e``); newlines and tabs kept."""
    return _CONTROL.sub(_escaped, text)


class _InertHook:
    """A rich render hook: every renderable is rendered, then its text segments go through :func:`inert`."""

    def process_renderables(self, renderables: list[Any]) -> list[Any]:
        return [_Inert(r) for r in renderables]


class _Inert:
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __rich_console__(self, console: Any, options: Any) -> Any:
        from rich.segment import Segment

        for segment in console.render(self.inner, options):
            if segment.control or not _CONTROL.search(segment.text):
                yield segment
            else:
                yield Segment(inert(segment.text), segment.style)


def make_console(stderr: bool = False) -> Any:
    """The console a command prints to (stdout, or stderr): user text is data, never markup, emoji or control codes.

    A string given to ``print`` is escaped before rich sees it (rich drops a bell or a
    carriage return silently; the user should see the name as it is); everything else
    (tables, ``Text``, status lines) through the render hook.
    """
    from rich.console import Console

    class InertConsole(Console):
        def print(self, *objects: Any, **kwargs: Any) -> None:
            super().print(*(inert(o) if isinstance(o, str) else o for o in objects), **kwargs)

    console = InertConsole(stderr=stderr, highlight=False, soft_wrap=True, emoji=False)
    console.push_render_hook(_InertHook())  # type: ignore[arg-type]
    return console


def stdout_lost() -> bool:
    return _state["lost"]


def _silence_fd(fd: int) -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    if devnull != fd:
        os.dup2(devnull, fd)
        os.close(devnull)


def _is_broken(exc: BaseException) -> bool:
    return isinstance(exc, BrokenPipeError) or (isinstance(exc, OSError) and exc.errno in (errno.EPIPE, errno.EBADF))


class GuardedStdout:
    """sys.stdout that, on the first broken-pipe write, goes quiet instead of raising."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def _lost(self) -> None:
        _state["lost"] = True
        with contextlib.suppress(OSError, ValueError):
            _silence_fd(self._stream.fileno())

    def write(self, text: str) -> int:
        if _state["lost"]:
            return len(text)
        try:
            return self._stream.write(text)
        except (OSError, ValueError) as exc:
            if isinstance(exc, OSError) and not _is_broken(exc):
                raise
            self._lost()
            return len(text)

    def flush(self) -> None:
        if _state["lost"]:
            return
        try:
            self._stream.flush()
        except (OSError, ValueError) as exc:
            if isinstance(exc, OSError) and not _is_broken(exc):
                raise
            self._lost()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(EXIT_TERMINATED)


def guard_streams() -> None:
    """Occupy closed descriptors 1 and 2 with /dev/null, wrap stdout, turn SIGTERM into SystemExit."""
    for fd in (1, 2):
        try:
            os.fstat(fd)
        except OSError:
            _silence_fd(fd)
            if fd == 1:
                _state["lost"] = True
    if sys.stdout is None or _state["lost"]:
        sys.stdout = open(1, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115 - replaces the process's stream
    if sys.stderr is None:
        sys.stderr = open(2, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115 - replaces the process's stream
    if not isinstance(sys.stdout, GuardedStdout):
        sys.stdout = GuardedStdout(sys.stdout)
    with contextlib.suppress(ValueError):  # not the main thread: leave the default
        signal.signal(signal.SIGTERM, _on_sigterm)


def final_exit_code(code: Any) -> Any:
    """The command's exit code, with a lost stdout replacing 0 and 1 (never report a gate on a broken pipe)."""
    if code is None:
        code = 0
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    if _state["lost"] and code in _REPLACED:
        return EXIT_STDOUT_CLOSED
    return code


__all__ = [
    "EXIT_STDOUT_CLOSED",
    "EXIT_TERMINATED",
    "PROGRESS_ENV",
    "STAGES",
    "GuardedStdout",
    "final_exit_code",
    "guard_streams",
    "inert",
    "make_console",
    "show_progress",
    "stage",
    "stage_display",
    "stage_listener",
    "stdout_lost",
]
