"""The fork server: workers forked from a process that has already imported torch.

A nightly worker forked from the command imports torch itself: about 2.4 s of a small
model's 3.8 s (issue 35.5). The fork server is one long-lived child of the command that
imports torch and neuronprobe's analysis modules once (:data:`PRELOAD`), then forks one
worker per request. The worker is the same as a worker forked from the command, and
supervised the same way (:func:`neuronprobe.process.supervisor.supervise`):

* it runs :func:`neuronprobe.process.isolation.child_main`: its own session (the server
  waits for its ``setsid`` before it answers, so a kill never reaches the server's group),
  its output, working folder, temporary folder and stack dump as configured, the same
  reply over a pipe whose write end the command passed to the server (``SCM_RIGHTS``);
* the command's supervisor watches its deadline and the resident memory of its process
  group, asks for its stacks and kills its tree; the server never reaps a worker before
  the supervisor has killed it and said ``release``, so its pid (its group id) cannot be
  reused in between; the server reports the worker's exit status on the same pipe;
* it dies with the server (``PR_SET_PDEATHSIG``), and the server dies with the command:
  it ends, killing its workers, once its control socket closes, which the kernel does
  when the command exits in any way (``kill -9`` included). No thread of the command
  needs to outlive the server, so it may be started from any thread.

The worker sees the command's working folder and environment as they are at the
request, not as they were when the server started. A step that cannot be pickled
(a closure, a lambda from a notebook) is forked from the command as before.

``NEURONPROBE_FORK_SERVER=0`` turns the server off (workers forked from the command,
each importing torch): for comparison (``benchmarks/bench_nightly.py``) and debugging.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import pickle
import threading
import time
import traceback
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing import connection, reduction
from typing import Any

from neuronprobe.process.isolation import ChildSetup, PipeReader, child_main, fork_child
from neuronprobe.process.supervisor import POLL_SECONDS, REAP_SECONDS, Child, exit_code_of, kill_tree

# What the server imports before it forks anyone: torch, the parts of torch an analysis imports on
# first use (export, dynamo, functorch, inductor's decompositions, sympy, networkx: about 1,200
# modules), and neuronprobe's pipeline with the modules it imports lazily. Measured on a small
# encoder (benchmarks/bench_nightly.py's zoo), loaded two-core machine: after torch and the pipeline
# only, the analysis took 9.2 s and imported 1,282 more modules; after this list, 1.6 s and 31.
# Imports only: no op runs in the server, so nothing of torch's state but its modules is shared.
PRELOAD: tuple[str, ...] = (
    "torch",
    "torch.export",
    "torch._dynamo",
    "torch._functorch.aot_autograd",
    "torch._inductor.decomposition",
    "torch.onnx",
    "sympy",
    "networkx",
    "neuronprobe.analysis",
    "neuronprobe.file_reads",
    "neuronprobe.capture.strategies",
    "neuronprobe.training",
    "neuronprobe.decoding",
    "neuronprobe.loaders.hf",
    "neuronprobe.backends.neuron",
    "neuronprobe.backends.xla_diff",
)
FORK_SERVER_ENV = "NEURONPROBE_FORK_SERVER"
# The server's loop: how often it looks for a worker that ended (and its control socket).
SERVER_POLL_SECONDS = POLL_SECONDS
# How long the server waits for a new worker's setsid() before it answers with its pid.
SETSID_WAIT_SECONDS = 5.0
# How long a launch waits for the server's answer (its first one follows PRELOAD's imports: seconds,
# a minute on a loaded machine); past it the server is dropped and the step is forked from the command.
ANSWER_WAIT_SECONDS = 300.0
# How long close() waits for the server to end after its socket closed.
CLOSE_WAIT_SECONDS = 5.0
_START, _RELEASE = b"S", b"R"
_ENDED = "__ended__"  # the server's message on a worker's pipe: ("__ended__", exit status)


def fork_server_enabled() -> bool:
    """False when ``NEURONPROBE_FORK_SERVER=0``: workers are then forked from the command."""
    return os.environ.get(FORK_SERVER_ENV, "1").strip() != "0"


class ServerChild:
    """A worker forked by the fork server, as the command's supervisor sees it (a :class:`Child`)."""

    def __init__(self, server: ForkServer, pid: int, conn: Any) -> None:
        self.server = server
        self._pid = pid
        self.reader = PipeReader(conn)
        self._code: int | None = None
        self._released = False

    @property
    def pid(self) -> int:
        return self._pid

    def receive(self, wait: float) -> list[Any] | None:
        messages = self.reader.receive(wait)
        if messages is None:
            return None
        mine = []
        for message in messages:
            if isinstance(message, tuple) and len(message) == 2 and message[0] == _ENDED:
                self._code = int(message[1])
            else:
                mine.append(message)
        return mine

    def exit_code(self) -> int | None:
        return self._code

    def kill(self) -> None:
        """Kill the worker's tree (the server holds it unreaped until now), wait for its end, let the server reap it."""
        if self._released:
            return
        kill_tree(self._pid)
        deadline = time.monotonic() + REAP_SECONDS
        while self._code is None and time.monotonic() < deadline:
            if self.receive(POLL_SECONDS) is None:
                break
        self._released = True
        self.server.release(self._pid)
        self.reader.conn.close()


@dataclass
class _ServerProcess:
    """The command's side of a running server: its pid and control socket (what the finaliser closes)."""

    pid: int
    control: Any


def _shutdown(process: _ServerProcess) -> None:
    """Close the control socket (the server kills its workers and ends), then reap the server."""
    with contextlib.suppress(OSError):
        process.control.close()
    deadline = time.monotonic() + CLOSE_WAIT_SECONDS
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(process.pid, os.WNOHANG)
        except ChildProcessError:
            return
        if pid:
            return
        time.sleep(POLL_SECONDS)
    kill_tree(process.pid)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(process.pid, 0)


class ForkServer:
    """Starts workers from a process that has already imported :data:`PRELOAD`; started on the first launch.

    Use it as a context manager, or call :meth:`close`; it is closed when garbage-collected too.
    """

    def __init__(self, preload: tuple[str, ...] = PRELOAD) -> None:
        self.preload = preload
        self._lock = threading.Lock()
        self._process: _ServerProcess | None = None
        self._finalizer: Any = None

    def __enter__(self) -> ForkServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        """The server's pid once it started."""
        return self._process.pid if self._process is not None else None

    def _start(self) -> _ServerProcess:
        ours, theirs = connection.Pipe(duplex=True)  # a socket pair: it carries the workers' pipe ends too
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the server
            try:
                ours.close()
                _serve(theirs, self.preload, parent)
            finally:
                os._exit(0)
        theirs.close()
        process = _ServerProcess(pid, ours)
        self._finalizer = weakref.finalize(self, _shutdown, process)
        return process

    def launch(self, fn: Callable[..., Any], args: tuple[Any, ...], setup: ChildSetup, *, name: str, daemon: bool) -> Child:
        """A :class:`~neuronprobe.process.isolation.Launcher`: ``fn(*args, progress)`` in a worker the server forks.

        A step that cannot be pickled is forked from this process instead (it then imports what it needs itself).
        """
        try:
            request = pickle.dumps((fn, args, setup, os.getcwd(), dict(os.environ)))
        except (pickle.PicklingError, TypeError, AttributeError):
            return fork_child(fn, args, setup, name=name, daemon=daemon)
        reader, writer = connection.Pipe(duplex=False)
        try:
            with self._lock:
                if self._process is None:
                    self._process = self._start()
                control = self._process.control
                control.send_bytes(_START + request)
                reduction.send_handle(control, writer.fileno(), self._process.pid)
                if not control.poll(ANSWER_WAIT_SECONDS):
                    raise TimeoutError(f"the fork server did not answer within {ANSWER_WAIT_SECONDS:g} s")
                answer = control.recv()
        except (EOFError, OSError) as exc:  # the server is gone or stuck: this step runs as before, forked from here
            reader.close()
            self._lost(exc)
            return fork_child(fn, args, setup, name=name, daemon=daemon)
        finally:
            writer.close()
        kind, value = answer
        if kind != "started":
            reader.close()
            return fork_child(fn, args, setup, name=name, daemon=daemon)
        return ServerChild(self, int(value), reader)

    def release(self, pid: int) -> None:
        """The supervisor is done with worker ``pid``: the server may reap it."""
        with self._lock:
            if self._process is None:
                return
            with contextlib.suppress(OSError):
                self._process.control.send_bytes(_RELEASE + str(pid).encode())

    def _lost(self, exc: BaseException) -> None:
        """The server ended (killed from outside) or is stuck: end it; the next launch starts a new one."""
        with self._lock:
            if self._finalizer is not None:
                self._finalizer()
            self._process = self._finalizer = None

    def close(self) -> None:
        """End the server and the workers still running under it."""
        with self._lock:
            if self._finalizer is not None:
                self._finalizer()
            self._process = self._finalizer = None


# --- the server's side --------------------------------------------------------------------------


def _preload(modules: tuple[str, ...]) -> None:
    """Import what every worker needs; a module that fails is left for the worker to import (and report)."""
    for name in modules:
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    gc.collect()
    gc.freeze()  # the preloaded objects stay out of the workers' collections: fewer copied pages per fork


def _serve(control: Any, preload: tuple[str, ...], parent: int) -> None:
    """The server's loop: fork a worker per request, report each worker's end, reap it once released."""
    with contextlib.suppress(OSError):
        os.setsid()  # no terminal signal (Ctrl-C) reaches it: the command ends it
    if os.getppid() != parent:  # the command ended before the server started
        return
    _preload(preload)
    pipes: dict[int, Any] = {}  # running worker -> the write end of its pipe (for the end message)
    ended: set[int] = set()  # ended (a zombie held for the supervisor's kill), not yet released
    released: set[int] = set()  # released before it ended: reaped when it does
    try:
        while True:
            if control.poll(SERVER_POLL_SECONDS):
                try:
                    data = control.recv_bytes()
                except (EOFError, OSError):
                    break  # the command closed the server, or died
                if data.startswith(_START):
                    _fork_worker(control, data[len(_START) :], pipes)
                elif data.startswith(_RELEASE):
                    pid = int(data[len(_RELEASE) :])
                    if pid in ended:
                        ended.discard(pid)
                        _reap(pid)
                    else:
                        released.add(pid)
            for pid in list(pipes):
                code = exit_code_of(pid)
                if code is None:
                    continue
                conn = pipes.pop(pid)
                with contextlib.suppress(OSError, ValueError):
                    conn.send((_ENDED, code))
                conn.close()
                if pid in released:
                    released.discard(pid)
                    _reap(pid)
                else:
                    ended.add(pid)
    finally:
        for pid in [*pipes, *ended, *released]:
            kill_tree(pid)
        for pid in [*pipes, *ended, *released]:
            _reap(pid)


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def _fork_worker(control: Any, request: bytes, pipes: dict[int, Any]) -> None:
    """Fork one worker for ``request``; answer ("started", pid) once it leads its own session."""
    fd = reduction.recv_handle(control)
    conn = connection.Connection(fd, readable=False)
    server = os.getpid()
    try:
        pid = os.fork()
    except OSError as exc:
        conn.close()
        control.send(("failed", str(exc)))
        return
    if pid == 0:  # the worker
        try:
            with contextlib.suppress(OSError):
                os.setsid()
            control.close()
            for other in pipes.values():
                other.close()
            _worker(conn, request, server)
        finally:
            os._exit(0)
    deadline = time.monotonic() + SETSID_WAIT_SECONDS
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            if os.getpgid(pid) == pid:
                break
        if exit_code_of(pid) is not None:
            break
        time.sleep(0.001)
    pipes[pid] = conn
    control.send(("started", pid))


def _worker(conn: Any, request: bytes, server: int) -> None:
    """In the forked worker: the command's folder and environment, then the step as a forked child runs it."""
    try:
        fn, args, setup, cwd, environ = pickle.loads(request)
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(environ)
    except BaseException as exc:  # the request names something this process cannot import: the step's failure
        conn.send(("error", (type(exc).__name__, f"the worker could not read its request: {exc}", traceback.format_exc())))
        return
    child_main(conn, fn, args, setup, server)


__all__ = ["FORK_SERVER_ENV", "PRELOAD", "ForkServer", "ServerChild", "fork_server_enabled"]
