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
exactly as the user built it, including modules defined in a notebook.
"""

from __future__ import annotations

import contextlib
import faulthandler
import multiprocessing
import os
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuronprobe.process.lifeline import die_with_parent

# After a kill, how long to wait for the child to be reaped before giving up on it.
REAP_SECONDS = 5.0
# Poll interval while waiting for the child: short enough that a fast step is not slowed down.
POLL_SECONDS = 0.05
# The compiler log kept per step: enough for every NCC_* line of a large model,
# small enough for the report and the pipe.
MAX_LOG_CHARS = 200_000

STATUS_OK = "ok"
STATUS_ERROR = "error"
STATUS_TIMEOUT = "timeout"
STATUS_DIED = "died"
STATUS_MEMORY = "memory"  # the process group's resident memory passed max_rss_bytes

# How often the resident memory of the step's process group is measured when it is bounded,
# and every how many polls the whole process table is scanned for processes it started.
MEMORY_POLL_SECONDS = 0.1
MEMORY_RESCAN_POLLS = 10
# After asking the child for its stacks (SIGUSR1), how long to wait for the dump before killing.
STACK_DUMP_WAIT_SECONDS = 1.0
STACK_SIGNAL = signal.SIGUSR1
# The folder a nested worker writes its own stack dump to (``<pid>.stacks``), named in the step's environment.
STACKS_DIR_ENV = "NEURONPROBE_STACKS_DIR"
STACKS_SUFFIX = ".stacks"
_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@dataclass
class StepResult:
    """What happened to one isolated step."""

    status: str  # ok | error | timeout | died
    value: Any = None
    error: str = ""  # "RuntimeError: neuronx-cc failed with 1" for status == error
    error_type: str = ""
    traceback: str = ""
    log: str = ""  # the child's stdout+stderr (compiler output included)
    seconds: float = 0.0
    progress: list[Any] = field(default_factory=list)
    exit_code: int | None = None
    stacks: str = ""  # faulthandler's dump of every thread, taken just before a timeout or memory kill
    peak_rss_bytes: int = 0  # the largest resident size of the process group seen (when memory is bounded)

    @property
    def ok(self) -> bool:
        return self.status == STATUS_OK


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


def _child(
    conn: Any,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    log_path: str | None,
    workdir: str | None,
    env: dict[str, str],
    stack_path: str | None = None,
    tmpdir: str | None = None,
    parent_pid: int | None = None,
) -> None:
    """Runs in the forked child: new session, redirected output, the step, one reply.

    The child dies with its parent (:func:`neuronprobe.process.lifeline.die_with_parent`):
    in its own session, nothing else would end it when the CLI is killed.

    ``log_path`` None keeps the inherited stdout/stderr; ``workdir`` None keeps the
    working folder; ``stack_path`` set arms a faulthandler dump on SIGUSR1.
    """
    global _stack_file
    with contextlib.suppress(OSError):
        os.setsid()
    die_with_parent(parent_pid)
    try:
        if stack_path is not None:
            _stack_file = open(stack_path, "w", encoding="utf-8")  # noqa: SIM115 - faulthandler writes to it until the worker exits
            faulthandler.register(STACK_SIGNAL, file=_stack_file, all_threads=True, chain=False)
        sys.stdout.flush()
        sys.stderr.flush()
        if log_path is not None:
            fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            os.close(fd)
            # sys.stdout/err may not be fds 1/2 (pytest's capture, a notebook's streams): point them at the log too.
            sys.stdout = sys.__stdout__ = open(1, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)  # type: ignore[misc]  # noqa: SIM115 - the worker's stream; __stdout__ too, for code that reads it
            sys.stderr = sys.__stderr__ = open(2, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)  # type: ignore[misc]  # noqa: SIM115 - the worker's stream; __stderr__ too
        os.environ.update(env)
        if tmpdir is not None:  # the step's temporary files (and its subprocesses', through TMPDIR) go where the parent removes them
            os.environ["TMPDIR"] = tmpdir
            tempfile.tempdir = tmpdir
        _single_threaded_torch()
        if workdir is not None:
            os.makedirs(workdir, exist_ok=True)
            os.chdir(workdir)

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


def kill_tree(pid: int) -> None:
    """SIGKILL the process group led by ``pid`` and every process it started, in any group or session.

    A nested step (the live backend inside the analysis worker, the xla-cpu worker)
    starts its own session; its compilers would outlive a kill of the worker's group alone.
    Call it before reaping ``pid``: until then its id (the group id) cannot be reused.
    """
    own = os.getpgrp()
    for _member, pgrp in sorted(_tree(pid).items()):
        if pgrp not in (pid, own):
            with contextlib.suppress(OSError):
                os.killpg(pgrp, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        os.killpg(pid, signal.SIGKILL)


def _kill_group(process: Any) -> None:
    """Kill the step's process tree (:func:`kill_tree`) and reap the step."""
    pid = process.pid
    if pid is None:
        return
    kill_tree(pid)
    with contextlib.suppress(Exception):
        process.kill()
    process.join(REAP_SECONDS)


def _proc_table() -> dict[int, tuple[int, int, int]]:
    """pid -> (ppid, pgrp, rss pages) for every process we can read, from /proc."""
    table: dict[int, tuple[int, int, int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return table
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:  # gone since the listing, or not ours to read
            continue
        # Fields after the command name (which may hold spaces and parentheses): 3 state, 4 ppid, 5 pgrp, ... 24 rss.
        rest = stat.rsplit(b")", 1)[-1].split()
        if len(rest) > 21:
            table[int(entry)] = (int(rest[1]), int(rest[2]), int(rest[21]))
    return table


def _tree(root: int, table: dict[int, tuple[int, int, int]] | None = None) -> dict[int, int]:
    """pid -> pgrp of the step's processes: its process group, and its descendants in any group."""
    table = _proc_table() if table is None else table
    members = {pid for pid, (_, pgrp, _) in table.items() if pgrp == root}
    members.add(root)
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    todo = list(members)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in members:
                members.add(child)
                todo.append(child)
    return {pid: table[pid][1] for pid in members if pid in table}


def group_rss_bytes(pgid: int) -> int:
    """Resident memory of the step ``pgid`` and every process it started (its group and descendants)."""
    table = _proc_table()
    return sum(table[pid][2] for pid in _tree(pgid, table)) * _PAGE_BYTES


def _rss_pages(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            rest = fh.read().rsplit(b")", 1)[-1].split()
    except OSError:
        return 0
    return int(rest[21]) if len(rest) > 21 else 0


class _MemoryWatch:
    """The step's resident memory, cheaply: its known processes every poll, a full /proc scan every second.

    A full scan reads every process's stat file (about 45 us each), too much to
    repeat every 0.1 s on a busy CI host; a process started between two scans is
    counted from the next one.
    """

    def __init__(self, root: int) -> None:
        self.root = root
        self.members: list[int] = [root]
        self.polls = 0

    def rss_bytes(self) -> int:
        if self.polls % MEMORY_RESCAN_POLLS == 0:
            table = _proc_table()
            self.members = list(_tree(self.root, table))
            total = sum(table[pid][2] for pid in self.members)
        else:
            total = sum(_rss_pages(pid) for pid in self.members)
        self.polls += 1
        return total * _PAGE_BYTES


def _nested_dumps(pid: int, folder: Path | None) -> list[Path]:
    """The stack files of the nested workers in ``pid``'s tree that registered one, asked for their dump."""
    if folder is None:
        return []
    try:
        registered = {int(p.name.removesuffix(STACKS_SUFFIX)): p for p in folder.iterdir() if p.name.removesuffix(STACKS_SUFFIX).isdigit()}
    except OSError:
        return []
    asked = []
    for member in sorted(set(_tree(pid)) & set(registered)):
        if member == pid:
            continue
        with contextlib.suppress(OSError):
            os.kill(member, STACK_SIGNAL)
            asked.append(registered[member])
    return asked


def _dump_stacks(pid: int, path: Path | None, nested: Path | None = None) -> str:
    """Ask the child (and the nested workers it started) for every thread's stack and read the dumps.

    The child's dump comes first; a nested worker's follows, after its own "Current thread" block.
    """
    if path is None:
        return ""
    try:
        os.kill(pid, STACK_SIGNAL)
    except OSError:
        return ""
    others = _nested_dumps(pid, nested)
    deadline = time.monotonic() + STACK_DUMP_WAIT_SECONDS
    texts: dict[Path, str] = {}
    while time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)
        for file in (path, *others):
            with contextlib.suppress(OSError):
                texts[file] = file.read_text(encoding="utf-8", errors="replace")
        if all(texts.get(f, "").count("File ") and texts[f].endswith("\n") for f in (path, *others)):
            time.sleep(POLL_SECONDS)  # let the other threads' stacks land too
            for file in (path, *others):
                with contextlib.suppress(OSError):
                    texts[file] = file.read_text(encoding="utf-8", errors="replace")
            break
    return "".join(texts.get(f, "") for f in (path, *others))


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
) -> StepResult:
    """Run ``fn(*args, progress)`` in a forked child; kill it (and its compilers) after ``limit_s`` seconds.

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
    """
    workdir.mkdir(parents=True, exist_ok=True)
    log_path = workdir / f"{name}.log"
    stack_path = workdir / f"{name}.stacks" if dump_stacks else None
    nested_stacks = workdir / f"{name}.nested-stacks" if dump_stacks else None
    env = dict(env or {})
    if nested_stacks is not None:
        nested_stacks.mkdir(exist_ok=True)
        env[STACKS_DIR_ENV] = str(nested_stacks)
    if not fork_available():  # pragma: no cover - Neuron hosts are Linux
        return StepResult(STATUS_ERROR, error="this platform cannot fork a worker process", error_type="OSError")
    ctx = multiprocessing.get_context("fork")
    parent_conn, child_conn = ctx.Pipe(duplex=False)
    process = ctx.Process(
        target=_child,
        args=(
            child_conn,
            fn,
            args,
            str(log_path) if capture_output else None,
            str(workdir / name) if chdir else None,
            env,
            str(stack_path) if stack_path is not None else None,
            str(tmpdir) if tmpdir is not None else None,
            os.getpid(),
        ),
        name=f"neuronprobe-{name}",
        daemon=daemon,
    )
    start = time.monotonic()
    process.start()
    child_conn.close()
    deadline = start + max(limit_s, 0.0)
    progress: list[Any] = []
    reply: tuple[str, Any] | None = None
    timed_out = over_memory = False
    stacks = ""
    peak = 0
    watch: _MemoryWatch | None = None
    wait = MEMORY_POLL_SECONDS if max_rss_bytes is not None else POLL_SECONDS * 20
    try:
        while reply is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            if max_rss_bytes is not None and process.pid is not None:
                watch = watch or _MemoryWatch(process.pid)
                peak = max(peak, watch.rss_bytes())
                if peak > max_rss_bytes:
                    over_memory = True
                    break
            if not parent_conn.poll(min(wait, remaining)):
                continue
            try:
                kind, payload = parent_conn.recv()
            except (EOFError, OSError):
                break  # the child died without replying
            if kind == "progress":
                progress.append(payload)
                if on_progress is not None:
                    on_progress(payload)
            else:
                reply = (kind, payload)
        if (timed_out or over_memory) and process.pid is not None:
            stacks = _dump_stacks(process.pid, stack_path, nested_stacks)
    finally:
        # Done, timed out or dead: the group goes, so that no compiler the step
        # started outlives it. The child is not reaped yet, so its pid (the
        # group id) cannot have been reused by another process.
        _kill_group(process)
        parent_conn.close()
    seconds = time.monotonic() - start
    log = _read_log(log_path) if capture_output else ""
    if timed_out:
        return StepResult(STATUS_TIMEOUT, log=log, seconds=seconds, progress=progress, stacks=stacks, peak_rss_bytes=peak)
    if over_memory:
        return StepResult(
            STATUS_MEMORY,
            error=f"the worker's resident memory passed {max_rss_bytes} bytes",
            log=log,
            seconds=seconds,
            progress=progress,
            stacks=stacks,
            peak_rss_bytes=peak,
        )
    if reply is None:
        code = process.exitcode
        how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        return StepResult(
            STATUS_DIED,
            error=f"the worker died ({how})",
            log=log,
            seconds=seconds,
            progress=progress,
            exit_code=code,
            peak_rss_bytes=peak,
        )
    kind, payload = reply
    if kind == "ok":
        return StepResult(STATUS_OK, value=payload, log=log, seconds=seconds, progress=progress, peak_rss_bytes=peak)
    error_type, message, tb = payload
    return StepResult(
        STATUS_ERROR,
        error=f"{error_type}: {message}" if message else error_type,
        error_type=error_type,
        traceback=tb,
        log=log,
        seconds=seconds,
        progress=progress,
        peak_rss_bytes=peak,
    )


__all__ = ["STACKS_DIR_ENV", "StepResult", "fork_available", "group_rss_bytes", "kill_tree", "run_isolated"]
