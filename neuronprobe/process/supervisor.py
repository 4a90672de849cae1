"""The one supervisor of every worker: a deadline, a memory bound, a stack dump before a kill, the whole tree killed.

Workers start in three ways: forked from the command (:mod:`neuronprobe.process.isolation`),
forked by the fork server that already imported torch (:mod:`neuronprobe.process.forkserver`),
or executed in another interpreter (the xla-cpu worker in torch-xla's environment,
:mod:`neuronprobe.backends.xla_cpu`). Each is a :class:`Child`: a process id, the
messages it sends back, its exit status, and a kill. :func:`supervise` watches any of
them the same way until its conversation is complete, it dies, it passes its deadline
or its process group's resident memory passes the bound; then it asks for every
thread's stack (``SIGUSR1``) when it is being killed for a limit, and kills the child
and every process it started (:func:`kill_tree`), in any group or session. How the
step ended is one :class:`~neuronprobe.vocabulary.StepStatus`.

Stdlib only (and ``vocabulary``): the xla-cpu worker reads :data:`STACKS_DIR_ENV` from
here in torch-xla's interpreter.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from neuronprobe.vocabulary import StepStatus

# After a kill, how long to wait for the child to be reaped before giving up on it.
REAP_SECONDS = 5.0
# Poll interval while waiting for the child: short enough that a fast step is not slowed down.
POLL_SECONDS = 0.05
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


class Child(Protocol):
    """A started worker, however it was started."""

    @property
    def pid(self) -> int: ...

    def receive(self, wait: float) -> list[Any] | None:
        """The messages that arrived within ``wait`` seconds (maybe none); None once the channel is closed."""
        ...

    def exit_code(self) -> int | None:
        """The exit status (negative: the signal) once the process has ended, without reaping it; None while it runs."""
        ...

    def kill(self) -> None:
        """Kill the child's process tree (:func:`kill_tree`), then reap it (or have it reaped)."""
        ...


@dataclass(frozen=True)
class Deadline:
    """When the step is stopped, and the name of that limit for its message (``--timeout 60 s``)."""

    at: float  # time.monotonic()
    limit: str = ""


@dataclass
class Ending:
    """How a supervised child ended.

    ``status``: ``OK`` when the caller's ``on_message`` said the conversation is complete,
    ``DIED`` when the child ended (or closed its channel) first, ``TIMEOUT`` at the
    deadline, ``MEMORY`` when its process group passed the memory bound.
    """

    status: StepStatus
    seconds: float
    exit_code: int | None = None
    stacks: str = ""  # every thread's stack just before a TIMEOUT or MEMORY kill (when a stack file was armed)
    peak_rss_bytes: int = 0  # the largest resident size of the process group seen (when memory is bounded)
    limit: str = ""  # the deadline's name, for TIMEOUT


@dataclass(frozen=True)
class StackFiles:
    """Where the child (``own``) and the nested workers it started (``nested``, one ``<pid>.stacks`` each) dump their stacks."""

    own: Path
    nested: Path | None = None


def supervise(
    child: Child,
    on_message: Callable[[Any], bool],
    *,
    deadline: Callable[[], Deadline],
    max_rss_bytes: int | None = None,
    stacks: StackFiles | None = None,
    poll_s: float = POLL_SECONDS * 20,
) -> Ending:
    """Watch ``child`` until ``on_message`` returns True for a message, it ends, or a limit passes; then kill its tree.

    ``deadline()`` is asked before every wait, so a caller may move it as the child reports
    progress (the xla-cpu worker's per-step ``--op-timeout``). The child is killed (with every
    process it started) on every ending, a normal one included, so that nothing it started
    outlives the step.
    """
    start = time.monotonic()
    status: StepStatus | None = None
    limit, text, peak = "", "", 0
    watch = _MemoryWatch(child.pid) if max_rss_bytes is not None else None
    wait = MEMORY_POLL_SECONDS if watch is not None else poll_s
    try:
        while status is None:
            due = deadline()
            remaining = due.at - time.monotonic()
            if remaining <= 0:
                status, limit = StepStatus.TIMEOUT, due.limit
                break
            if watch is not None and max_rss_bytes is not None:
                peak = max(peak, watch.rss_bytes())
                if peak > max_rss_bytes:
                    status = StepStatus.MEMORY
                    break
            ended = child.exit_code() is not None  # before reading: what it sent before it ended is read below
            messages = child.receive(min(wait, remaining))
            for message in messages or ():
                if on_message(message):
                    status = StepStatus.OK
                    break
            if status is None and (messages is None or ended):
                status = StepStatus.DIED
        if status in (StepStatus.TIMEOUT, StepStatus.MEMORY) and stacks is not None:
            text = _dump_stacks(child.pid, stacks)
    finally:
        child.kill()
    return Ending(status or StepStatus.DIED, time.monotonic() - start, child.exit_code(), text, peak, limit)


def fixed_deadline(seconds: float, limit: str = "") -> Callable[[], Deadline]:
    """A deadline ``seconds`` from now."""
    due = Deadline(time.monotonic() + max(seconds, 0.0), limit)
    return lambda: due


# --- the process tree -------------------------------------------------------------------------


def kill_tree(pid: int) -> None:
    """SIGKILL the process group led by ``pid`` and every process it started, in any group or session.

    A nested step (the live backend inside the analysis worker, the xla-cpu worker)
    starts its own session; its compilers would outlive a kill of the worker's group alone.
    Call it before ``pid`` is reaped: until then its id (the group id) cannot be reused.
    """
    own = os.getpgrp()
    for _member, pgrp in sorted(_tree(pid).items()):
        if pgrp not in (pid, own):
            with contextlib.suppress(OSError):
                os.killpg(pgrp, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        os.kill(pid, signal.SIGKILL)  # a child that has not reached its setsid() yet is in its parent's group


def exit_code_of(pid: int) -> int | None:
    """The exit status of our child ``pid`` once it ended, without reaping it (``waitid`` with ``WNOWAIT``)."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:  # already reaped, or not ours
        return None
    if info is None:
        return None
    return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status


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


# --- stack dumps ---------------------------------------------------------------------------------


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


def _dump_stacks(pid: int, files: StackFiles) -> str:
    """Ask the child (and the nested workers it started) for every thread's stack and read the dumps.

    The child's dump comes first; a nested worker's follows, after its own "Current thread" block.
    """
    try:
        os.kill(pid, STACK_SIGNAL)
    except OSError:
        return ""
    others = _nested_dumps(pid, files.nested)
    every = (files.own, *others)
    deadline = time.monotonic() + STACK_DUMP_WAIT_SECONDS
    texts: dict[Path, str] = {}
    while time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)
        for file in every:
            with contextlib.suppress(OSError):
                texts[file] = file.read_text(encoding="utf-8", errors="replace")
        if all(texts.get(f, "").count("File ") and texts[f].endswith("\n") for f in every):
            time.sleep(POLL_SECONDS)  # let the other threads' stacks land too
            for file in every:
                with contextlib.suppress(OSError):
                    texts[file] = file.read_text(encoding="utf-8", errors="replace")
            break
    return "".join(texts.get(f, "") for f in every)


__all__ = [
    "REAP_SECONDS",
    "STACKS_DIR_ENV",
    "STACKS_SUFFIX",
    "STACK_SIGNAL",
    "Child",
    "Deadline",
    "Ending",
    "StackFiles",
    "exit_code_of",
    "fixed_deadline",
    "group_rss_bytes",
    "kill_tree",
    "supervise",
]
