"""Shared helpers for the tests: where the model files are and what they expect."""

from __future__ import annotations

import contextlib
import re
import traceback
from dataclasses import dataclass
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
MODELS = TESTS / "models"
BROKEN = TESTS / "broken"
EXAMPLES = ROOT / "examples"

_EXPECT = re.compile(r"#\s*(EXPECT|RAISES)\b\s*(?P<verdict>\w+)?\s*(?P<op>\S+)?")


def expectations(path: Path) -> list[tuple[int, str | None, str | None]]:
    """(line, verdict, op) for each ``# EXPECT verdict op`` marker in a model file."""
    out = []
    for number, text in enumerate(path.read_text().splitlines(), start=1):
        m = _EXPECT.search(text)
        if m:
            out.append((number, m.group("verdict"), m.group("op")))
    return out


def marker_line(path: Path) -> int:
    marks = expectations(path)
    assert marks, f"{path} has no # EXPECT/# RAISES marker"
    return marks[0][0]


def refused(args: list[str], *inputs: Path) -> str:
    """Run the CLI with ``args``: exit 2, one ``error:`` line and no traceback, every input byte-identical; the line."""
    from typer.testing import CliRunner

    from neuronprobe.cli import app

    before = {p: p.read_bytes() for p in inputs}
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in result.output, result.output
    for p, data in before.items():
        assert p.read_bytes() == data, p
    return lines[0]


@dataclass(frozen=True)
class CliRun:
    """What a `neuronprobe` process gives back: its exit code, stdout and stderr (subprocess.CompletedProcess's names)."""

    returncode: int
    stdout: str
    stderr: str


def cli_in_process(*args: str) -> CliRun:
    """`neuronprobe ARGS` run in this process from the repository root, as a subprocess would run it, without
    the 2-3 s a new interpreter spends importing torch. For tests about what the command does (exit codes, the
    error line on stderr, the files written), not about the process (signals, pipes, imports, the environment):
    those start a real one. An exception the command let escape is on stderr with its traceback, as Python prints it."""
    from typer.testing import CliRunner

    from neuronprobe.cli import app

    with contextlib.chdir(ROOT):
        result = CliRunner().invoke(app, list(args))
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit) and result.exc_info is not None:
        stderr += "".join(traceback.format_exception(*result.exc_info))
    return CliRun(result.exit_code, result.stdout, stderr)


def one_model_shard(tmp_path: Path, seconds: object = 1.0) -> Path:
    """A shard folder as `nightly --shard 1/1` leaves it for `nightly merge`: one model, failed, that ran ``seconds``."""
    import json

    shard = tmp_path / "shard-1"
    shard.mkdir()
    manifest = {
        "format": 1,
        "config_sha256": "0" * 64,
        "neuronprobe": "0.1.0",
        "rules": "1",
        "backend": "static",
        "require_backend": None,
        "date": "2026-01-02",
        "history": 30,
        "shard": [1, 1],
        "config_models": ["m"],
        "models": [{"name": "m", "error": "m.py: the model code raised ValueError", "internal": False, "seconds": seconds}],
    }
    (shard / "_shard.json").write_text(json.dumps(manifest))
    return shard
