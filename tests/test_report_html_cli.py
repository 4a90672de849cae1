"""`neuronprobe report RUN.json -o OUT.html`: the JSON alone re-renders the HTML, anywhere."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from report_fixtures import rich_report
from typer.testing import CliRunner

from neuronprobe.cli import app
from neuronprobe.report.html import render_html

runner = CliRunner()


@pytest.fixture()
def run_json(tmp_path: Path) -> Path:
    path = tmp_path / "run.json"
    path.write_text(rich_report().to_json(), encoding="utf-8")
    return path


def test_report_writes_the_same_html_as_analyze_would(run_json: Path, tmp_path: Path) -> None:
    out = tmp_path / "out" / "tiny.html"
    result = runner.invoke(app, ["report", str(run_json), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_text(encoding="utf-8") == render_html(rich_report())
    assert str(out) in result.output
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".")], "no temporary file left behind"


def test_output_defaults_to_the_json_name_with_html(run_json: Path) -> None:
    result = runner.invoke(app, ["report", str(run_json)])
    assert result.exit_code == 0, result.output
    assert run_json.with_suffix(".html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_refuses_to_overwrite_the_json(run_json: Path) -> None:
    before = run_json.read_text(encoding="utf-8")
    result = runner.invoke(app, ["report", str(run_json), "-o", str(run_json)])
    assert result.exit_code == 2
    assert f"--output {run_json} is an input of this command" in result.output
    assert run_json.read_text(encoding="utf-8") == before


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"schema_version": 1, "model": "x"', "not valid JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"schema_version": 99, "model": "x", "target": "trn1"}', "unsupported report schema_version 99"),
        ('{"schema_version": 1, "target": "trn1"}', "missing field 'model'"),
        ('{"schema_version": 1, "model": "x", "target": "trn1", "findings": {}}', "report.findings: expected a list"),
    ],
)
def test_unusable_json_exits_2_with_one_line_and_writes_nothing(tmp_path: Path, content: str, message: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content, encoding="utf-8")
    out = tmp_path / "out.html"
    result = runner.invoke(app, ["report", str(bad), "-o", str(out)])
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output
    assert not out.exists()


def test_missing_json_exits_2(tmp_path: Path) -> None:
    result = runner.invoke(app, ["report", str(tmp_path / "nope.json")])
    assert result.exit_code == 2
    assert "no such report file" in result.output


def test_truncated_json_from_a_killed_run_exits_2(run_json: Path, tmp_path: Path) -> None:
    text = run_json.read_text(encoding="utf-8")
    run_json.write_text(text[: len(text) // 2], encoding="utf-8")
    result = runner.invoke(app, ["report", str(run_json), "-o", str(tmp_path / "x.html")])
    assert result.exit_code == 2 and "not valid JSON" in result.output


def test_cli_report_carries_no_environment_variables(run_json: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "SENTINEL123")
    out = tmp_path / "out.html"
    assert runner.invoke(app, ["report", str(run_json), "-o", str(out)]).exit_code == 0
    assert "SENTINEL123" not in out.read_text(encoding="utf-8")


def test_report_from_an_older_json_without_optional_sections(tmp_path: Path) -> None:
    minimal = {"schema_version": 1, "model": "old", "target": "trn1"}
    path = tmp_path / "old.json"
    path.write_text(json.dumps(minimal), encoding="utf-8")
    result = runner.invoke(app, ["report", str(path)])
    assert result.exit_code == 0, result.output
    assert "Runs on trn1 as it is" in path.with_suffix(".html").read_text(encoding="utf-8")
