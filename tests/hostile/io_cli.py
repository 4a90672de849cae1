"""Running the command line as a user does, for the hostile-input suites: a real process, a time bound.

A FIFO, ``/dev/zero`` and a looping model need a real process: CliRunner would hang the test
run itself. Each case checks what the issue asks of a refusal: the exit code, one line on
stderr with no traceback, every input byte-identical afterwards, all within a generous bound
(a subprocess timeout, never a timed assertion on speed).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
IO_MODELS = Path(__file__).resolve().parent / "io_models"
# Generous: the slowest case (a looping get_model stopped at --timeout 3) ends in ~5 s.
BOUND_S = 120


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
