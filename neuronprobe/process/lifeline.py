"""Workers die with their parent: ``PR_SET_PDEATHSIG`` (Linux ``prctl(2)``), set in the worker itself.

A worker runs in its own session (``os.setsid``) so that a timeout can kill its whole
tree; the other side of that is that nothing ends it when the CLI that started it is
killed (``kill -9``, an OOM kill, a CI job cancelled): it kept running, holding memory
and the model's loop. With the parent-death signal set, the kernel sends ``SIGKILL``
to the worker the moment its parent goes; a parent already gone before the call (the
race between ``fork`` and ``prctl``) is caught by comparing the parent's pid.

The signal follows the parent *thread* that forked (``prctl(2)``): the forking thread
must wait for the worker, as :func:`neuronprobe.process.isolation.run_isolated` and
:func:`neuronprobe.backends.xla_cpu.run_worker` do.

Stdlib only: the xla-cpu worker calls it too, in torch-xla's interpreter.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
PARENT_PID_ENV = "NEURONPROBE_PARENT_PID"  # the parent's pid, for a worker started with exec (no fork to close over)


def die_with_parent(parent_pid: int | None) -> bool:
    """Ask the kernel to SIGKILL this process when its parent dies; True when it is armed.

    ``parent_pid``: the pid the parent had before starting this process; if the current
    parent differs, the parent is already gone and this process ends at once.
    """
    if not sys.platform.startswith("linux"):  # pragma: no cover - Neuron hosts are Linux
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        armed = libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    except (OSError, AttributeError):  # pragma: no cover - no libc prctl
        return False
    if parent_pid is not None and os.getppid() != parent_pid:
        os.kill(os.getpid(), signal.SIGKILL)
    return armed


def parent_from_env() -> int | None:
    value = os.environ.get(PARENT_PID_ENV, "")
    return int(value) if value.isdigit() else None


__all__ = ["PARENT_PID_ENV", "die_with_parent", "parent_from_env"]
