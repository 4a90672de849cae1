"""The live backend through the command line: `analyze --backend/--require-backend` and `doctor`.

Subprocess runs put the fake SDK on PYTHONPATH, as a CI job would; the rest use
CliRunner in this process with the fake on sys.path (forked SDK workers inherit it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import FAKE_HIDE, FAKE_PLACEHOLDER, FAKE_ROOT
from helpers import MODELS, ROOT
from typer.testing import CliRunner

from neuronprobe.cli import app

MLP = str(MODELS / "mlp.py")
DISAGREE = {
    "analyze_unsupported": {"aten::gelu": "neuronx-cc"},
    "compile_errors": {"aten::gelu": {"code": "NCC_EVRF001", "message": "Operation gelu is not supported on trn1."}},
}


def _cli(args: list[str], pythonpath: list[Path], **env: str) -> subprocess.CompletedProcess:
    environment = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("NEURONPROBE_", "FAKE_NEURON_")) or k == "NEURONPROBE_XLA_ENV"  # conftest: no xla-cpu env
    }
    environment["PYTHONPATH"] = os.pathsep.join(str(p) for p in pythonpath)
    environment["COLUMNS"] = "200"  # rich wraps tables at the terminal width
    environment.update(env)
    return subprocess.run(
        [sys.executable, "-m", "neuronprobe.cli", *args],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _fixture(tmp_path: Path, data: dict) -> str:
    path = tmp_path / "fixture.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def test_require_backend_neuron_with_the_pypi_placeholder_exits_2_before_any_work(tmp_path):
    out = tmp_path / "reports"
    done = _cli(
        ["analyze", MLP, "--require-backend", "neuron", "-o", str(out)], [FAKE_HIDE, FAKE_PLACEHOLDER], FAKE_NEURON_HIDE="torch_xla,neuronxcc,libneuronxla"
    )
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: --require-backend neuron: torch-neuronx is the PyPI placeholder")
    assert "pip.repos.neuron.amazonaws.com" in line
    assert "Traceback" not in done.stderr and not out.exists()


def test_backend_neuron_with_a_partial_stack_exits_2_and_names_the_missing_package(tmp_path):
    done = _cli(
        ["analyze", MLP, "--backend", "neuron", "-o", str(tmp_path)], [FAKE_HIDE, FAKE_ROOT], FAKE_NEURON_HIDE="torch_xla", NEURONPROBE_ALLOW_FAKE_SDK="1"
    )
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: --backend neuron: the XLA-era torch-neuronx is installed but torch-xla is missing")
    assert list(tmp_path.iterdir()) == []


def test_analyze_with_the_fake_reports_the_disagreement_and_gates_on_it(tmp_path):
    report_path = tmp_path / "mlp.json"
    done = _cli(
        ["analyze", MLP, "--json", str(report_path), "--no-html", "--fail-on", "compile_error"],
        [FAKE_ROOT],
        NEURONPROBE_ALLOW_FAKE_SDK="1",
        FAKE_NEURON_FIXTURE=_fixture(tmp_path, DISAGREE),
    )
    assert done.returncode == 1, done.stderr  # the observed compile error trips --fail-on
    assert "backend neuron" in done.stdout and "FAKE" in done.stdout
    report = json.loads(report_path.read_text())
    assert report["backend"]["name"] == "neuron" and report["backend"]["fake"] is True
    assert report["backend"]["versions"]["neuronx-cc"] == "2.26.0.0+fake"
    (mismatch,) = report["prediction_diff"]["predicted_ok_observed_failing"]
    assert (mismatch["op"], mismatch["predicted"], mismatch["observed"]) == ("aten::gelu", "lowered", "compile_error")
    observed = [f for f in report["findings"] if f["origin"] == "observed"]
    assert [(f["op"], f["verdict"], f["ncc_code"]) for f in observed] == [("aten::gelu", "compile_error", "NCC_EVRF001")]


def test_auto_without_permission_never_drives_the_fake(fake_sdk, tmp_path, monkeypatch):
    monkeypatch.delenv("NEURONPROBE_ALLOW_FAKE_SDK")
    report_path = tmp_path / "mlp.json"
    result = CliRunner().invoke(app, ["analyze", MLP, "--json", str(report_path), "--no-html"])
    assert result.exit_code == 0, result.output
    report = json.loads(report_path.read_text())
    assert report["backend"]["name"] == "static" and report["backend"]["fake"] is False
    assert "test fake Neuron SDK was found but not used" in report["backend"]["detail"]
    assert report["prediction_diff"] is None


def test_a_compiler_hang_via_the_cli_is_a_limitation_not_a_failure(fake_sdk, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_NEURON_FIXTURE", _fixture(tmp_path, {"hang": ["trace"]}))
    report_path = tmp_path / "mlp.json"
    result = CliRunner().invoke(app, ["analyze", MLP, "--backend", "neuron", "--op-timeout", "1", "--json", str(report_path), "--no-html"])
    assert result.exit_code == 0, result.output
    report = json.loads(report_path.read_text())
    # issue 15: a step is a typed object (was the prose "timeout after 1s")
    assert report["backend"]["steps"]["trace"] == {"status": "timeout", "seconds": 1.0, "detail": ""}
    assert any(lim["what"] == "neuron backend: trace" and "did not finish within 1 s" in lim["why"] for lim in report["not_analysed"])


def test_require_backend_neuron_refuses_the_allowed_fake(fake_sdk, tmp_path):
    result = CliRunner().invoke(app, ["analyze", MLP, "--require-backend", "neuron", "-o", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "--require-backend neuron: the Neuron SDK found is the test fake" in result.output
    assert not (tmp_path / "out").exists()


def test_doctor_prints_the_environment_and_fails_closed_on_the_fake(tmp_path):
    done = _cli(["doctor"], [FAKE_ROOT])
    assert done.returncode == 0, done.stderr
    for text in ("XLA-era torch-neuronx", "THE TEST FAKE", "2.9.0.2.15.0+fake", "2.26.0.0+fake", "2.9.0+fake", "static"):
        assert text in done.stdout
    required = _cli(["doctor", "--require-backend", "neuron"], [FAKE_ROOT])
    assert required.returncode == 2
    assert required.stderr.strip().splitlines()[-1].startswith("error: --require-backend neuron: the Neuron SDK found is the test fake")


def test_doctor_json_names_the_placeholder(tmp_path):
    done = _cli(["doctor", "--json"], [FAKE_HIDE, FAKE_PLACEHOLDER], FAKE_NEURON_HIDE="torch_xla,neuronxcc,libneuronxla")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert (data["stack"], data["usable"], data["real"]) == ("placeholder", False, False)
    assert data["versions"]["torch-neuronx"] == "1.0"
    assert data["auto_backend"]["name"] == "static"
