"""Workers die with their parent (issue 34.7): SIGKILL the CLI, and the analysis worker it forked is gone.

The worker runs in its own session (so that a timeout kills its whole tree); before the
parent-death signal a killed ``neuronprobe analyze`` left it spinning in the model's loop.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

HOSTILE = Path(__file__).parent
REPO = HOSTILE.parents[1]


def _children(pid: int) -> list[int]:
    """The pids whose parent is ``pid`` (from /proc: no psutil)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(entry))
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has ended; only its parent's wait is missing


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        for child in _children(todo.pop()):
            out.append(child)
            todo.append(child)
    return out


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _kill_cli_and_watch(cli: subprocess.Popen, is_worker, wait_s: float) -> None:
    """Wait for a worker ``is_worker(pid)`` under the CLI, SIGKILL the CLI, and require the worker gone within 5 s."""
    workers: list[int] = []
    try:
        deadline = time.monotonic() + wait_s
        while not workers:
            assert cli.poll() is None, "the CLI ended before its worker started"
            assert time.monotonic() < deadline, f"no worker appeared within {wait_s:g} s"
            workers = [p for p in _descendants(cli.pid) if is_worker(p)]
            time.sleep(0.1)
        time.sleep(1.0)  # the worker is past its start (the prctl)
        everyone = _descendants(cli.pid)
        assert all(_alive(p) for p in workers)
        os.kill(cli.pid, signal.SIGKILL)
        cli.wait()
        gone_by = time.monotonic() + 5
        while any(_alive(p) for p in everyone) and time.monotonic() < gone_by:
            time.sleep(0.05)
        left = [f"{p} ({_cmdline(p)[:80]})" for p in everyone if _alive(p)]
        assert not left, f"outlived their killed parent by 5 s: {left}"
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
        for pid in workers:  # never leave a spinning worker behind, even when the test fails
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_the_xla_cpu_worker_dies_with_the_analysis_worker_when_the_cli_is_killed(tmp_path, xla_env):
    cli = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "neuronprobe",
            "analyze",
            str(HOSTILE / "xla_loop_forever.py"),
            "-o",
            str(tmp_path / "r"),
            "--backend",
            "xla-cpu",
            "--timeout",
            "300",
        ],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    _kill_cli_and_watch(cli, lambda pid: "neuronprobe.backends.xla_worker" in _cmdline(pid), wait_s=180)


def test_a_killed_cli_takes_its_analysis_worker_with_it(tmp_path):
    cli = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "neuronprobe",
            "analyze",
            str(HOSTILE / "loop_forever.py"),
            "-o",
            str(tmp_path / "r"),
            "--backend",
            "static",
            "--timeout",
            "300",
        ],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    _kill_cli_and_watch(cli, lambda pid: True, wait_s=120)


def test_a_killed_nightly_takes_its_fork_server_and_the_worker_it_forked_with_it(tmp_path):
    """The nightly's workers are forked by its fork server (a child of the command): both go with the command."""
    config = tmp_path / "nightly.toml"
    config.write_text(f'backend = "static"\ntimeout = 300\n\n[[models]]\nmodel = "{HOSTILE / "loop_forever.py"}"\n')
    cli = subprocess.Popen(
        [sys.executable, "-m", "neuronprobe", "nightly", str(config), "-o", str(tmp_path / "r"), "--jobs", "1", "--no-cache"],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    # The worker is the server's child (the command's grandchild): wait for it, not only for the server.
    _kill_cli_and_watch(cli, lambda pid: pid not in _children(cli.pid), wait_s=180)


def test_a_killed_notebook_kernel_takes_the_magics_command_and_its_worker_with_it(tmp_path):
    """`%neuronprobe analyze` runs the command in a child of the kernel: a killed (or restarted) kernel ends it too.

    The stand-in kernel is a Python process calling the magic's own function; before the command armed
    its parent-death signal, it and its worker spun on for up to their --timeout after the kernel was gone.
    """
    line = shlex.join(["analyze", str(HOSTILE / "loop_forever.py"), "-o", str(tmp_path / "r"), "--backend", "static", "--timeout", "300"])
    kernel = subprocess.Popen(
        [sys.executable, "-c", "import sys; from neuronprobe.notebook import run_line; run_line(sys.argv[1])", line],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    # The analysis worker is the command's child (the kernel's grandchild): wait for it, then kill the kernel.
    _kill_cli_and_watch(kernel, lambda pid: pid not in _children(kernel.pid), wait_s=180)
