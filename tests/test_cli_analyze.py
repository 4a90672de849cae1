"""`neuronprobe analyze` from the command line: outputs, gates, exit codes, bad input.

The first test runs the command as a new process; the rest run it in this process (helpers.cli_in_process:
the same exit code, stdout and stderr, without a torch import per run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from helpers import BROKEN, EXAMPLES, MODELS, ROOT, cli_in_process, marker_line

PY = sys.executable


def run(*args: str, cwd=None) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run([PY, "-m", "neuronprobe.cli", *args], capture_output=True, text=True, cwd=cwd or ROOT, env=env, timeout=300)


def test_analyze_writes_json_and_prints_findings(tmp_path):
    out = tmp_path / "out"
    proc = run("analyze", str(EXAMPLES / "tiny_gpt.py"), "-o", str(out), "--no-html")
    assert proc.returncode == 0, proc.stderr
    data = json.loads((out / "tiny_gpt.json").read_text())
    assert data["schema_version"] == 7  # issue 15: schema 3; issue 23: 4 (the precision verdict); issue 25: 5 (parity); issue 33/36/37: 6; issue 36.6: 7
    assert data["model"] == "tiny_gpt" and data["target"] == "trn1"
    assert data["backend"]["name"] == "static" and "torch" in data["backend"]["versions"]
    for key in ("ops_total", "support_percentage", "counts"):
        assert key in data["summary"]
    # the float64 normaliser is a precision note (issue 23), the scatter-add and torch.unique are problems
    assert {f["verdict"] for f in data["findings"]} == {"compile_error", "dynamic_shape", "precision"}
    for f in data["findings"]:
        assert set(f) >= {"op", "verdict", "file", "line", "module", "message", "fix", "rule"}
    assert {"op", "count", "verdict"} <= set(data["ops"][0])
    assert "tiny_gpt.py:54" in proc.stdout  # the torch.unique line, shown to the user
    assert "Traceback" not in proc.stderr


def test_json_flag_sets_the_path(tmp_path):
    target = tmp_path / "nested" / "r.json"
    proc = cli_in_process("analyze", str(MODELS / "mlp.py"), "--json", str(target), "--no-html")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(target.read_text())["findings"] == []
    assert not list(target.parent.glob(".*.tmp")), "no temporary files are left behind"


@pytest.mark.parametrize(
    ("gate", "code"),
    [("cpu_fallback", 0), ("dynamic_shape", 1), ("cpu_fallback,compile_error", 1)],
)
def test_fail_on_gates_on_verdicts(tmp_path, gate, code):
    proc = cli_in_process("analyze", str(EXAMPLES / "tiny_gpt.py"), "-o", str(tmp_path), "--no-html", "--fail-on", gate)
    assert proc.returncode == code, proc.stderr
    assert (tmp_path / "tiny_gpt.json").exists(), "the report is written even when the gate fails"


def test_fail_on_unknown_verdict_is_unusable_input(tmp_path):
    proc = cli_in_process("analyze", str(MODELS / "mlp.py"), "-o", str(tmp_path), "--fail-on", "slow")
    assert proc.returncode == 2
    assert "unknown verdict" in proc.stderr


@pytest.mark.parametrize(
    ("name", "needle"),
    [
        ("syntax_error.py", "syntax error"),
        ("no_get_model.py", "defines no get_model()"),
        ("forward_raises.py", "forward raised RuntimeError"),
        ("import_raises.py", "importing the model file raised KeyError"),
        ("get_model_raises.py", "get_model() raised ValueError"),
    ],
)
def test_broken_model_files_give_one_line_and_exit_2(tmp_path, name, needle):
    path = BROKEN / name
    proc = cli_in_process("analyze", str(path), "-o", str(tmp_path))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert needle in proc.stderr
    assert "Traceback" not in proc.stderr
    if name != "no_get_model.py":
        line = 4 if name == "syntax_error.py" else marker_line(path)
        assert f"{name}:{line}" in proc.stderr, proc.stderr
    assert not list(tmp_path.iterdir()), "nothing is written for unusable input"


def test_missing_file_and_bad_inputs(tmp_path):
    proc = cli_in_process("analyze", str(tmp_path / "nope.py"))
    assert proc.returncode == 2 and "no such model file" in proc.stderr
    proc = cli_in_process("analyze", str(BROKEN / "bad_inputs.py"), "-o", str(tmp_path))
    assert proc.returncode == 2 and "return a tuple of positional arguments or a dict" in proc.stderr


def test_debug_shows_the_traceback(tmp_path):
    proc = cli_in_process("analyze", str(BROKEN / "get_model_raises.py"), "--debug", "-o", str(tmp_path))
    assert proc.returncode != 0
    assert "Traceback" in proc.stderr


def test_bad_target_and_set_without_hf(tmp_path):
    proc = cli_in_process("analyze", str(MODELS / "mlp.py"), "--target", "trn9", "-o", str(tmp_path))
    assert proc.returncode == 2 and "unknown Neuron target" in proc.stderr
    proc = cli_in_process("analyze", str(MODELS / "mlp.py"), "--set", "x=1", "-o", str(tmp_path))
    assert proc.returncode == 2 and "hf: models only" in proc.stderr


def test_help_does_not_import_torch():
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from neuronprobe.cli import app\n"
        "r = CliRunner().invoke(app, ['--help'])\n"
        "assert r.exit_code == 0, r.output\n"
        "for cmd in ('analyze',):\n"
        "    assert CliRunner().invoke(app, [cmd, '--help']).exit_code == 0\n"
        "heavy = [m for m in ('torch', 'pandas', 'matplotlib', 'transformers') if m in sys.modules]\n"
        "print(heavy)\n"
    )
    proc = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
