"""Console text is data: user paths are printed literally, and a lost stdout has its own exit code."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from helpers import MODELS
from typer.testing import CliRunner
from warm_torch import warm_export  # noqa: F401  (an autouse fixture)

from neuronprobe.cli import app
from neuronprobe.console_io import EXIT_STDOUT_CLOSED

runner = CliRunner()
# Rich markup, an emoji code (":x:" is a cross mark) and a password-file line in one name.
HOSTILE_NAME = "r[/bold][red]root:x:0:0"


def test_paths_with_markup_and_emoji_codes_are_printed_literally(tmp_path):
    out = tmp_path / f"{HOSTILE_NAME}.json"
    result = runner.invoke(app, ["analyze", str(MODELS / "mlp.py"), "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert f"reports: {out}, {out.with_suffix('.html')}" in result.output
    assert out.exists() and out.with_suffix(".html").exists()


def test_an_error_naming_a_hostile_path_is_printed_literally(tmp_path):
    missing = tmp_path / f"{HOSTILE_NAME}.json"
    result = runner.invoke(app, ["report", str(missing)])
    assert result.exit_code == 2
    assert result.output.strip() == f"error: {missing}: no such report file"


def _cli(args: list[str], cwd: Path, **kwargs) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "neuronprobe.cli", *args], cwd=cwd, timeout=120, **kwargs)


def test_a_broken_stdout_pipe_ends_quietly_with_its_own_exit_code_and_still_writes(tmp_path):
    lengths = tmp_path / "L.txt"
    lengths.write_text("\n".join(str(n) for n in range(1, 400)) + "\n")
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line: `neuronprobe ... | head -0`
    try:
        done = _cli(["buckets", str(lengths), "--json", "out.json"], tmp_path, stdout=write, stderr=subprocess.PIPE)
    finally:
        os.close(write)
    assert done.returncode == EXIT_STDOUT_CLOSED == 141
    assert done.stderr == b""
    assert (tmp_path / "out.json").exists()


def test_a_closed_stdout_is_the_same_case(tmp_path):
    lengths = tmp_path / "L.txt"
    lengths.write_text("5\n9\n")
    done = subprocess.run(
        ["bash", "-c", f'"{sys.executable}" -m neuronprobe.cli buckets L.txt --json out.json >&-'],
        cwd=tmp_path,
        timeout=120,
        stderr=subprocess.PIPE,
    )
    assert done.returncode == EXIT_STDOUT_CLOSED
    assert done.stderr == b""
    assert (tmp_path / "out.json").read_text().startswith("{")
