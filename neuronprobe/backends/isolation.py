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

Forking (rather than starting a fresh interpreter) hands the child the model
exactly as the user built it, including modules defined in a notebook.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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


def _child(
    conn: Any, fn: Callable[..., Any], args: tuple[Any, ...], log_path: str, workdir: str, env: dict[str, str]
) -> None:
    """Runs in the forked child: new session, redirected output, the step, one reply."""
    try:
        os.setsid()
    except OSError:
        pass
    try:
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        # sys.stdout/err may not be fds 1/2 (pytest's capture, a notebook's streams): point them at the log too.
        sys.stdout = sys.__stdout__ = open(1, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)
        sys.stderr = sys.__stderr__ = open(2, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)
        os.environ.update(env)
        _single_threaded_torch()
        os.makedirs(workdir, exist_ok=True)
        os.chdir(workdir)

        def progress(message: Any) -> None:
            conn.send(("progress", message))

        value = fn(*args, progress)
        reply: tuple[str, Any] = ("ok", value)
    except BaseException as exc:  # the step's own failure is data for the parent
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


def _kill_group(process: Any) -> None:
    pid = process.pid
    if pid is None:
        return
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        pass
    try:
        process.kill()
    except Exception:
        pass
    process.join(REAP_SECONDS)


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
) -> StepResult:
    """Run ``fn(*args, progress)`` in a forked child; kill it (and its compilers) after ``limit_s`` seconds.

    ``progress(message)`` sends an intermediate message; the last ones are kept
    when the step times out. The step's return value must be picklable.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    log_path = workdir / f"{name}.log"
    if not fork_available():  # pragma: no cover - Neuron hosts are Linux
        return StepResult(STATUS_ERROR, error="this platform cannot fork a worker process", error_type="OSError")
    ctx = multiprocessing.get_context("fork")
    parent_conn, child_conn = ctx.Pipe(duplex=False)
    process = ctx.Process(
        target=_child,
        args=(child_conn, fn, args, str(log_path), str(workdir / name), dict(env or {})),
        name=f"neuronprobe-{name}",
        daemon=True,
    )
    start = time.monotonic()
    process.start()
    child_conn.close()
    deadline = start + max(limit_s, 0.0)
    progress: list[Any] = []
    reply: tuple[str, Any] | None = None
    timed_out = False
    try:
        while reply is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            if not parent_conn.poll(min(POLL_SECONDS * 20, remaining)):
                continue
            try:
                kind, payload = parent_conn.recv()
            except (EOFError, OSError):
                break  # the child died without replying
            if kind == "progress":
                progress.append(payload)
            else:
                reply = (kind, payload)
    finally:
        # Done, timed out or dead: the group goes, so that no compiler the step
        # started outlives it. The child is not reaped yet, so its pid (the
        # group id) cannot have been reused by another process.
        _kill_group(process)
        parent_conn.close()
    seconds = time.monotonic() - start
    log = _read_log(log_path)
    if timed_out:
        return StepResult(STATUS_TIMEOUT, log=log, seconds=seconds, progress=progress)
    if reply is None:
        code = process.exitcode
        how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        return StepResult(
            STATUS_DIED, error=f"the worker died ({how})", log=log, seconds=seconds, progress=progress, exit_code=code
        )
    kind, payload = reply
    if kind == "ok":
        return StepResult(STATUS_OK, value=payload, log=log, seconds=seconds, progress=progress)
    error_type, message, tb = payload
    return StepResult(
        STATUS_ERROR,
        error=f"{error_type}: {message}" if message else error_type,
        error_type=error_type,
        traceback=tb,
        log=log,
        seconds=seconds,
        progress=progress,
    )


__all__ = ["StepResult", "run_isolated", "fork_available"]
