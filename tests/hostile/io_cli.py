"""Running the command line as a user does, for the hostile-input suites: a real process, a time bound.

A FIFO, ``/dev/zero`` and a looping model need a real process: CliRunner would hang the test
run itself. Each case checks what the issue asks of a refusal: the exit code, one line on
stderr with no traceback, every input byte-identical afterwards, all within a generous bound
(a subprocess timeout, never a timed assertion on speed).

Where the case is not about the process, :func:`refused_here` runs the command in this process
(CliRunner: no interpreter start, a fraction of the CPU) with the same four checks; its time
bound is :func:`bounded`: CPU seconds (a loaded machine stretches the wall clock, not these)
and a wall-clock watchdog far above them that turns a hang into a failure instead of a stall.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
IO_MODELS = Path(__file__).resolve().parent / "io_models"
# Generous: the slowest case (a looping get_model stopped at --timeout 3) ends in ~5 s.
BOUND_S = 120
# In-process cases: CPU seconds one refusal may use (each uses well under one), and the wall time after which it is a hang.
CPU_BOUND_S = 30.0
HANG_S = 300


@dataclass
class Ran:
    code: int
    stdout: str
    stderr: str


def run_cli(args: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None, bound_s: int = BOUND_S) -> Ran:
    """``python -m neuronprobe ARGS`` with a time bound (a hang fails the test instead of stalling the suite)."""
    full_env = {**os.environ, "HF_HUB_OFFLINE": "1", "NO_COLOR": "1", "COLUMNS": "400", **(env or {})}
    proc = subprocess.run(
        [sys.executable, "-m", "neuronprobe", *args],
        cwd=cwd or ROOT,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=bound_s,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    return Ran(proc.returncode, proc.stdout, proc.stderr)


def snapshot(paths: list[Path]) -> dict[Path, bytes]:
    """The bytes of every regular input, to compare after the run (FIFOs and devices are not read)."""
    out = {}
    for p in paths:
        if p.is_file() and not p.is_symlink():
            out[p] = p.read_bytes()
    return out


def refused_line(args: list[str], inputs: list[Path], *, code: int = 2, env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    """Run ``args``: exit ``code``, one ``error:`` line on stderr and no traceback, inputs unchanged; the line."""
    before = snapshot(inputs)
    ran = run_cli(args, env=env, cwd=cwd)
    assert ran.code == code, (ran.code, ran.stderr[-2000:])
    lines = ran.stderr.strip().splitlines()
    assert len(lines) == 1, ran.stderr[-2000:]
    assert lines[0].startswith("error: ") and "Traceback" not in ran.stderr and "internal error" not in ran.stderr, ran.stderr
    for p, data in before.items():
        assert p.read_bytes() == data, f"{p} changed"
    return lines[0]


@contextlib.contextmanager
def bounded(cpu_s: float = CPU_BOUND_S, hang_s: int = HANG_S) -> Iterator[None]:
    """The time bound of an in-process case: at most ``cpu_s`` of this process's CPU, and no hang.

    CPU time is what the code spends, whatever else the machine runs; a read that blocks spends
    none, so SIGALRM after ``hang_s`` of wall time raises in the main thread instead.
    """

    def hung(signum: int, frame: object) -> None:
        raise TimeoutError(f"still running after {hang_s} s of wall time: a hang")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(hang_s)
    started = time.process_time()
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    used = time.process_time() - started
    assert used < cpu_s, f"{used:.1f} s of CPU; the bound is {cpu_s:g} s"


def refused_here(args: list[str], inputs: list[Path], *, code: int = 2, env: dict[str, str] | None = None) -> str:
    """:func:`refused_line` in this process (CliRunner): exit ``code``, one ``error:`` line, inputs unchanged, bounded; the line."""
    from typer.testing import CliRunner

    from neuronprobe.cli import app

    before = snapshot(inputs)
    with bounded():
        result = CliRunner().invoke(app, args, env={"NO_COLOR": "1", "COLUMNS": "400", "HF_HUB_OFFLINE": "1", **(env or {})})
    assert result.exit_code == code, (result.exit_code, result.output[-2000:])
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output[-2000:]
    assert lines[0].startswith("error: ") and "Traceback" not in result.output and "internal error" not in result.output, result.output
    for p, data in before.items():
        assert p.read_bytes() == data, f"{p} changed"
    return lines[0]
