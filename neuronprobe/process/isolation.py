"""Run one piece of Neuron SDK work in a child process that can be killed.

The Neuron compiler can hang, crash or eat the host's memory. neuronprobe
therefore never runs SDK work in its own process: each step runs in a forked
child that

* starts its own process group (``os.setsid``), so that a timeout kills the
  child *and* the ``neuronx-cc`` processes it started;
* sends its stdout and stderr, at the file-descriptor level, to a log file,
  because the compiler writes its diagnostics (``[NCC_*] ...``) straight to the
  inherited descriptors and the SDK logs through ``logging``;
* runs in its own working folder (``partition`` writes ``orig_trace.pt`` to the
  current directory) with extra environment variables (the temporary compile cache);
* sends back one JSON-able result (plus optional progress messages) over a pipe.

The analysis worker (:mod:`neuronprobe.process.worker`) runs user code the same way, with
two more guards: a bound on the resident memory of the whole process group
(polled from ``/proc``, see ``max_rss_bytes``), and a dump of every thread's stack
(``faulthandler`` on ``SIGUSR1``) just before a step is killed, so that a timeout or
a memory kill can name the line that was running. The stack dump reaches the
workers the step starts too: the child's environment names a folder
(:data:`STACKS_DIR_ENV`) where a nested worker (the xla-cpu backend's, in its own
interpreter) registers ``<pid>.stacks``; each registered process of the step's tree
gets the signal and its dump is read with the child's.

Forking (rather than starting a fresh interpreter) hands the child the model
exactly as the user built it, including modules defined in a notebook. The
supervision itself (deadline, memory, stacks, the kill) is
:func:`neuronprobe.process.supervisor.supervise`, the same for every worker; a worker
may also be forked by the fork server (:mod:`neuronprobe.process.forkserver`), which
runs the same :func:`child_main` in a process that has already imported torch.
"""

from __future__ import annotations

import contextlib
import faulthandler
import multiprocessing
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from neuronprobe.process.lifeline import die_with_parent
from neuronprobe.process.supervisor import (
    POLL_SECONDS,
    REAP_SECONDS,
    STACK_SIGNAL,
    STACKS_DIR_ENV,
    Child,
    StackFiles,
    exit_code_of,
    fixed_deadline,
    kill_tree,
    supervise,
)
from neuronprobe.vocabulary import StepStatus

# The compiler log kept per step: enough for every NCC_* line of a large model,
# small enough for the report and the pipe.
MAX_LOG_CHARS = 200_000


@dataclass
class StepResult:
    """What happened to one isolated step."""

    status: StepStatus  # OK | FAILED (it raised) | TIMEOUT | MEMORY | DIED
    value: Any = None
    error: str = ""  # "RuntimeError: neuronx-cc failed with 1" for status FAILED
    error_type: str = ""
    traceback: str = ""
    log: str = ""  # the child's stdout+stderr (compiler output included)
    seconds: float = 0.0
    progress: list[Any] = field(default_factory=list)
    exit_code: int | None = None
    stacks: str = ""  # faulthandler's dump of every thread, taken just before a timeout or memory kill
    peak_rss_bytes: int = 0  # the largest resident size of the process group seen (when memory is bounded)

    def __post_init__(self) -> None:
        self.status = StepStatus(self.status)

    @property
    def ok(self) -> bool:
        return self.status is StepStatus.OK


@dataclass(frozen=True)
class ChildSetup:
    """How the child prepares before the step: what :func:`child_main` receives besides the step itself.

    ``log_path`` None keeps the inherited stdout/stderr; ``workdir`` None keeps the
    working folder; ``stack_path`` set arms a faulthandler dump on SIGUSR1; ``tmpdir`` is
    where the step's temporary files go.
    """

    log_path: str | None
    workdir: str | None
    env: dict[str, str]
    stack_path: str | None = None
    tmpdir: str | None = None


class Launcher(Protocol):
    """Starts ``fn(*args, progress)`` in a child prepared by ``setup``; returns it to supervise.

    The child sends ``("progress", message)`` messages, then one ``("ok", value)`` or
    ``("error", (type, message, traceback))`` reply (see :func:`child_main`).
    """

    def __call__(self, fn: Callable[..., Any], args: tuple[Any, ...], setup: ChildSetup, *, name: str, daemon: bool) -> Child: ...


def fork_available() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


def _single_threaded_torch() -> None:
    """A forked child inherits the parent's OpenMP pool state but not its threads: once the
    parent has run any parallel CPU op, the child's first parallel region waits forever.
    One intra-op thread avoids the pool entirely."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


# The child's stack-dump file: kept open (faulthandler writes to its descriptor) for the child's life.
_stack_file: Any = None


def child_main(conn: Any, fn: Callable[..., Any], args: tuple[Any, ...], setup: ChildSetup, parent_pid: int | None = None) -> None:
    """Runs in the child, however it was forked: new session, redirected output, the step, one reply.

    The child dies with its parent (:func:`neuronprobe.process.lifeline.die_with_parent`):
    in its own session, nothing else would end it when the CLI is killed.
    """
    global _stack_file
    with contextlib.suppress(OSError):
        os.setsid()
    die_with_parent(parent_pid)
    try:
        if setup.stack_path is not None:
            _stack_file = open(setup.stack_path, "w", encoding="utf-8")  # noqa: SIM115 - faulthandler writes to it until the worker exits
            faulthandler.register(STACK_SIGNAL, file=_stack_file, all_threads=True, chain=False)
        sys.stdout.flush()
        sys.stderr.flush()
        if setup.log_path is not None:
            fd = os.open(setup.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            os.close(fd)
            # sys.stdout/err may not be fds 1/2 (pytest's capture, a notebook's streams): point them at the log too.
            sys.stdout = sys.__stdout__ = open(1, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)  # type: ignore[misc]  # noqa: SIM115 - the worker's stream; __stdout__ too, for code that reads it
            sys.stderr = sys.__stderr__ = open(2, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)  # type: ignore[misc]  # noqa: SIM115 - the worker's stream; __stderr__ too
        os.environ.update(setup.env)
        if setup.tmpdir is not None:  # the step's temporary files (and its subprocesses', through TMPDIR) go where the parent removes them
            os.environ["TMPDIR"] = setup.tmpdir
            tempfile.tempdir = setup.tmpdir
        _single_threaded_torch()
        if setup.workdir is not None:
            os.makedirs(setup.workdir, exist_ok=True)
            os.chdir(setup.workdir)

        def progress(message: Any) -> None:
            conn.send(("progress", message))

        value = fn(*args, progress)
        reply: tuple[str, Any] = ("ok", value)
    except BaseException as exc:  # the step's own failure (SystemExit and KeyboardInterrupt too) is data
        reply = ("error", (type(exc).__name__, str(exc), traceback.format_exc()))
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:
            pass
    try:
        conn.send(reply)
    except Exception as exc:  # an unpicklable value: say so rather than die silently
        conn.send(("error", ("TypeError", f"the step's result could not be sent back: {exc}", "")))
    conn.close()


def _child(conn: Any, fn: Callable[..., Any], args: tuple[Any, ...], setup: ChildSetup, parent_pid: int) -> None:
    """multiprocessing's target in the forked child."""
    child_main(conn, fn, args, setup, parent_pid)


class PipeReader:
    """The parent's end of a worker's reply pipe: every message that has arrived, None once it is closed."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.closed = False

    def receive(self, wait: float) -> list[Any] | None:
        if self.closed:
            return None
        messages: list[Any] = []
        try:
            if not self.conn.poll(wait):
                return messages
            while True:
                messages.append(self.conn.recv())
                if not self.conn.poll(0):
                    return messages
        except (EOFError, OSError):  # closed: what came before the end is still read, None comes next time
            self.closed = True
            return messages or None


class ForkedChild:
    """A child forked by this process (multiprocessing's fork), talking back over a pipe."""

    def __init__(self, process: Any, conn: Any) -> None:
        self.process = process
        self.reader = PipeReader(conn)
        self._reaped = False

    @property
    def pid(self) -> int:
        return int(self.process.pid)

    def receive(self, wait: float) -> list[Any] | None:
        return self.reader.receive(wait)

    def exit_code(self) -> int | None:
        if self._reaped:
            return self.process.exitcode
        return exit_code_of(self.pid)  # not reaped: its id stays ours until kill() is done with it

    def kill(self) -> None:
        kill_tree(self.pid)
        with contextlib.suppress(Exception):
            self.process.kill()
        self.process.join(REAP_SECONDS)
        self._reaped = True
        self.reader.conn.close()


def fork_child(fn: Callable[..., Any], args: tuple[Any, ...], setup: ChildSetup, *, name: str, daemon: bool) -> Child:
    """The :class:`Launcher` that forks the child from this process."""
    ctx = multiprocessing.get_context("fork")
    parent_conn, child_conn = ctx.Pipe(duplex=False)
    process = ctx.Process(target=_child, args=(child_conn, fn, args, setup, os.getpid()), name=f"neuronprobe-{name}", daemon=daemon)
    process.start()
    child_conn.close()
    return ForkedChild(process, parent_conn)


def _read_log(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return text if len(text) <= MAX_LOG_CHARS else "[... log truncated ...]\n" + text[-MAX_LOG_CHARS:]


def run_isolated(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    *,
    limit_s: float,
    workdir: Path,
    name: str,
    env: dict[str, str] | None = None,
    capture_output: bool = True,
    chdir: bool = True,
    max_rss_bytes: int | None = None,
    dump_stacks: bool = False,
    daemon: bool = True,
    tmpdir: Path | None = None,
    on_progress: Callable[[Any], None] | None = None,
    launcher: Launcher | None = None,
) -> StepResult:
    """Run ``fn(*args, progress)`` in a child; kill it (and its compilers) after ``limit_s`` seconds.

    ``progress(message)`` sends an intermediate message; the last ones are kept
    when the step times out. The step's return value must be picklable.

    ``capture_output`` False leaves the child's stdout/stderr where the parent's
    are; ``chdir`` False keeps the caller's working folder (a model file may read
    files relative to it); ``max_rss_bytes`` kills the group once its resident
    memory passes the bound (status ``memory``); ``dump_stacks`` records every
    thread's stack just before a timeout or memory kill (``StepResult.stacks``);
    ``daemon`` False lets the step start processes of its own (a DataLoader's workers);
    ``tmpdir`` is where the step's temporary files go (``tempfile`` and ``TMPDIR``): a folder the
    caller removes, so that a step killed before its own clean-up leaves nothing behind.
    ``on_progress`` hears each progress message as it arrives (a command's status line).
    ``launcher`` starts the child (default: forked from this process; a fork server's
    :meth:`~neuronprobe.process.forkserver.ForkServer.launch` starts it from a process that
    has already imported torch); it is supervised the same way either way.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    log_path = workdir / f"{name}.log"
    stacks = StackFiles(workdir / f"{name}.stacks", workdir / f"{name}.nested-stacks") if dump_stacks else None
    env = dict(env or {})
    if stacks is not None and stacks.nested is not None:
        stacks.nested.mkdir(exist_ok=True)
        env[STACKS_DIR_ENV] = str(stacks.nested)
    if not fork_available():  # pragma: no cover - Neuron hosts are Linux
        return StepResult(StepStatus.FAILED, error="this platform cannot fork a worker process", error_type="OSError")
    setup = ChildSetup(
        str(log_path) if capture_output else None,
        str(workdir / name) if chdir else None,
        env,
        str(stacks.own) if stacks is not None else None,
        str(tmpdir) if tmpdir is not None else None,
    )
    start = time.monotonic()
    child = (launcher or fork_child)(fn, args, setup, name=name, daemon=daemon)
    deadline = fixed_deadline(limit_s)  # from the child's start: a fork server still importing torch is not the step's time
    progress: list[Any] = []
    replies: list[tuple[str, Any]] = []

    def on_message(message: Any) -> bool:
        kind, payload = message
        if kind == "progress":
            progress.append(payload)
            if on_progress is not None:
                on_progress(payload)
            return False
        replies.append((kind, payload))
        return True

    ending = supervise(child, on_message, deadline=deadline, max_rss_bytes=max_rss_bytes, stacks=stacks, poll_s=POLL_SECONDS * 20)
    seconds = time.monotonic() - start
    log = _read_log(log_path) if capture_output else ""
    common: dict[str, Any] = {"log": log, "seconds": seconds, "progress": progress, "peak_rss_bytes": ending.peak_rss_bytes}
    if ending.status is StepStatus.TIMEOUT:
        return StepResult(StepStatus.TIMEOUT, stacks=ending.stacks, **common)
    if ending.status is StepStatus.MEMORY:
        return StepResult(StepStatus.MEMORY, error=f"the worker's resident memory passed {max_rss_bytes} bytes", stacks=ending.stacks, **common)
    if not replies:
        code = ending.exit_code
        how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        return StepResult(StepStatus.DIED, error=f"the worker died ({how})", exit_code=code, **common)
    kind, payload = replies[0]
    if kind == "ok":
        return StepResult(StepStatus.OK, value=payload, **common)
    error_type, message, tb = payload
    return StepResult(StepStatus.FAILED, error=f"{error_type}: {message}" if message else error_type, error_type=error_type, traceback=tb, **common)


__all__ = ["ChildSetup", "Launcher", "StepResult", "child_main", "fork_available", "fork_child", "run_isolated"]
