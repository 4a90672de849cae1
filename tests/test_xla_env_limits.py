"""The xla-cpu environment's inputs held to the contract (issue 29): `setup --path` never takes over someone
else's folder, a probe of NEURONPROBE_XLA_PYTHON is bounded and its reply checked, a malformed completeness
marker or worker reply is named, never a crash (exit 3)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from neuronprobe.backends import xla_cpu, xla_env
from neuronprobe.backends.xla_env import MARKER, inspect_managed, inspect_python
from neuronprobe.cli import app
from neuronprobe.vocabulary import StepStatus

runner = CliRunner()


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else b"<dir>" for p in sorted(folder.rglob("*"))}


def _one_line(result, code: int = 2) -> str:
    assert result.exit_code == code, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in result.output, result.output
    return lines[0]


def _script(path: Path, body: str) -> str:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


# --- setup --path ------------------------------------------------------------------------------


def test_setup_refuses_a_folder_that_holds_someone_elses_venv(tmp_path):
    theirs = tmp_path / "project"
    (theirs / "venv" / "bin").mkdir(parents=True)
    (theirs / "venv" / "bin" / "python").write_text("their interpreter")
    (theirs / "venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    before = _tree(theirs)
    line = _one_line(runner.invoke(app, ["setup", "xla-cpu", "--path", str(theirs)]))
    assert line.startswith(f"error: setup --path {theirs}: the folder already holds files neuronprobe did not put there (venv)")
    assert _tree(theirs) == before  # nothing deleted, nothing added (not even a lock file), no pip run


@pytest.mark.parametrize("under", [False, True], ids=["the-file", "under-the-file"])
def test_setup_under_a_regular_file_is_exit_2(tmp_path, under):
    file = tmp_path / "notes.txt"
    file.write_text("mine")
    target = file / "env" if under else file
    line = _one_line(runner.invoke(app, ["setup", "xla-cpu", "--path", str(target)]))
    # the one output guard (files.check_outputs) answers before the set-up looks at the path
    expected = f"error: --path {target}: {file} is not a folder" if under else f"error: --path {target} exists and is a file; give a folder"
    assert line == expected
    assert file.read_text() == "mine"


# --- NEURONPROBE_XLA_PYTHON ----------------------------------------------------------------------


def test_an_unresponsive_interpreter_is_given_up_on_with_everything_it_started(tmp_path, monkeypatch):
    pidfile = tmp_path / "sleep.pid"
    # a wrapper whose child holds the probe's pipes: killing the wrapper alone would leave the probe waiting
    hang = _script(tmp_path / "python", f"sleep 300 &\necho $! > {pidfile}\nwait")
    monkeypatch.setattr(xla_env, "_unresponsive", {})
    found: list = []
    probe = threading.Thread(target=lambda: found.append(inspect_python(hang)), daemon=True)
    probe.start()
    probe.join(60)  # a guard against the hang this test is about, not a speed target (the probe gives up after 6 s)
    assert not probe.is_alive(), "the probe of an unresponsive interpreter did not return"
    (env,) = found
    assert env.state == "broken" and env.problem == f"NEURONPROBE_XLA_PYTHON: {hang} did not answer within {xla_env.METADATA_PROBE_TIMEOUT_S:g} s"
    stat = Path(f"/proc/{pidfile.read_text().strip()}/stat")
    assert not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"  # the sleep went too
    # doctor reports it (exit 0) and answers at once: the same interpreter is not waited for twice
    monkeypatch.setenv("NEURONPROBE_XLA_PYTHON", hang)
    result = runner.invoke(app, ["doctor", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["xla_cpu"]["problem"] == env.problem


@pytest.mark.parametrize(
    ("reply", "field"),
    [("[1, 2]", None), ('{"versions": ["torch"], "placeholder": [], "missing": []}', "versions"), ('{"versions": {}, "placeholder": 3}', "placeholder")],
    ids=["a-list", "versions-a-list", "placeholder-a-number"],
)
def test_a_reply_of_the_wrong_shape_is_reported_by_doctor_and_exit_2_for_analyze(tmp_path, monkeypatch, reply, field):
    python = _script(tmp_path / "python", f"echo '{reply}'")
    monkeypatch.setenv("NEURONPROBE_XLA_PYTHON", python)
    env = inspect_python(python)
    assert env.state == "broken"
    assert f"{python} printed a reply of the wrong shape" in (env.problem or "")
    if field:
        assert f"`{field}`" in (env.problem or "")
    doctor = runner.invoke(app, ["doctor", "--json"])
    assert doctor.exit_code == 0, doctor.output
    assert json.loads(doctor.output)["xla_cpu"]["problem"] == env.problem
    line = _one_line(runner.invoke(app, ["analyze", str(tmp_path / "m.py"), "--backend", "xla-cpu", "-o", str(tmp_path / "r")]))
    assert line == f"error: --backend xla-cpu: {env.problem}"
    assert not (tmp_path / "r").exists()


# --- the completeness marker ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("marker", "why"),
    [
        ({"versions": ["torch", "2.9.0"], "requirements": "x"}, "`versions` is not an object of package versions"),
        ({"versions": {"torch": 2.9}, "requirements": "x"}, "`versions` is not an object of package versions"),
        ({"versions": {"torch": "2.9.0"}, "requirements": ["x"]}, "`requirements` is not a string"),
        ({"versions": {"torch": "2.9.0"}, "requirements": "x", "setup_seconds": "long"}, "`setup_seconds` is not a number"),
    ],
)
def test_a_malformed_marker_is_an_incomplete_environment_in_one_line(tmp_path, monkeypatch, marker, why):
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "bin" / "python").write_text("")
    (tmp_path / MARKER).write_text(json.dumps(marker))
    env = inspect_managed(tmp_path)
    assert env.state == "partial"
    assert env.problem == f"the xla-cpu environment at {tmp_path} is incomplete ({tmp_path / MARKER}: {why}); run `neuronprobe setup xla-cpu` again"
    monkeypatch.setenv("NEURONPROBE_XLA_ENV", str(tmp_path))
    line = _one_line(runner.invoke(app, ["analyze", str(tmp_path / "m.py"), "--backend", "xla-cpu", "-o", str(tmp_path / "r")]))
    assert line == f"error: --backend xla-cpu: {env.problem}"


# --- the xla-cpu worker's replies ------------------------------------------------------------------


def test_lines_in_the_event_file_that_are_not_the_workers_events_are_ignored(tmp_path):
    events = tmp_path / "events.jsonl"
    lines = ["[1, 2]", '"text"', "{not json", '{"no": "event"}', '{"event": "start", "step": "observe"}', '{"event": 7}', ""]
    events.write_text("\n".join(lines))
    read, offset = xla_cpu._read_events(events, 0)
    assert read == [{"event": "start", "step": "observe"}]
    assert offset == len("\n".join(lines[:-1]).encode()) + 1


@pytest.mark.parametrize(
    ("step", "value", "bad"),
    [("observe", [1], "the value"), ("observe", {"graphs": "many"}, "graphs"), ("compiles", {"uncached": 1, "cached": 0}, "calls")],
)
def test_a_malformed_step_value_is_a_failed_step_not_a_crash(step, value, bad):
    outcome = xla_cpu._outcome(step, {"event": "done", "step": step, "status": "ok", "seconds": "soon", "line": "x", "value": value})
    assert (outcome.status, outcome.error) == (StepStatus.FAILED, f"the xla-cpu worker's reply for {step} is malformed ({bad})")
    assert outcome.seconds == 0.0 and outcome.line is None


# --- an observation cut short is not a clean run ------------------------------------------------------


def test_a_cut_observation_is_not_reported_as_a_clean_run():
    from report_fixtures import clean_report
    from rich.console import Console

    from neuronprobe.report.console import render_summary
    from neuronprobe.report.html import banner
    from neuronprobe.report.model import BackendStep, Report
    from neuronprobe.vocabulary import StepStatus, TopVerdict

    report = clean_report()
    assert report.verdict is TopVerdict.RUNS
    for status in (StepStatus.TIMEOUT, StepStatus.DIED):
        report.backend.steps = {"observe": BackendStep(status, detail="stopped after --op-timeout 1 s")}
        assert report.verdict is TopVerdict.RUNS_UNOBSERVED
        console = Console(width=200, record=True)
        console.print(render_summary(report))
        text = console.export_text()
        assert "runs on Neuron as it is" not in text and "but its observation was cut short" in text
        assert banner(report).level == "warn" and "not confirmed" in banner(report).title
        assert Report.from_json(report.to_json()).verdict is TopVerdict.RUNS_UNOBSERVED
    report.backend.steps = {"observe": BackendStep(StepStatus.OK, 1.0)}
    assert report.verdict is TopVerdict.RUNS


def test_op_timeout_says_the_observation_was_cut_and_the_top_line_does_not_claim_a_clean_run(tmp_path, xla_env):
    from helpers import MODELS

    result = runner.invoke(app, ["analyze", str(MODELS / "xla_hang.py"), "--backend", "xla-cpu", "--op-timeout", "3", "-o", str(tmp_path), "--no-html"])
    assert result.exit_code == 0, result.output
    head = result.output.splitlines()[0]
    assert head == "xla_hang on trn1: predicted to run on Neuron as it is, but its observation was cut short"
    assert "not analysed: xla-cpu backend: observe: stopped after --op-timeout 3 s; its ops are only predicted" in result.output
    data = json.loads((tmp_path / "xla_hang.json").read_text())
    assert data["verdict"] == "runs_unobserved" and data["backend"]["steps"]["observe"]["status"] == "timeout"
