"""Exit 3 means a bug in neuronprobe, so a CI job can tell it from bad input or a broken model (exit 2).

The bug is planted by monkeypatching a library function: once in the CLI's own
process, once inside the analysis worker (forked, so it inherits the patch).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from diff_fixtures import make_report
from helpers import MODELS
from test_nightly import config_path, night, serve  # noqa: F401  (config_path is a fixture)
from typer.testing import CliRunner
from warm_torch import warm_export  # noqa: F401  (an autouse fixture)

import neuronprobe.analysis
import neuronprobe.report.diff
from neuronprobe.cli import app
from neuronprobe.errors import BUG_REPORT_URL, EXIT_INTERNAL
from neuronprobe.support import RuleNotFound

runner = CliRunner()
BUG = f"this is a bug in neuronprobe, please report it at {BUG_REPORT_URL}"


def _reports(tmp_path: Path) -> tuple[str, str]:
    base, new = tmp_path / "base.json", tmp_path / "new.json"
    base.write_text(make_report([]).to_json())
    new.write_text(make_report([]).to_json())
    return str(base), str(new)


def _broken_diff(*args: object, **kwargs: object) -> None:
    raise RuntimeError("the diff broke\nsecond line of the message")


def _one_line(output: str) -> str:
    lines = output.strip().splitlines()
    assert len(lines) == 1, output
    assert "Traceback" not in output
    return lines[0]


def test_a_bug_in_the_cli_process_exits_3_with_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(neuronprobe.report.diff, "diff_reports", _broken_diff)
    result = runner.invoke(app, ["diff", *_reports(tmp_path)])
    assert result.exit_code == EXIT_INTERNAL
    line = _one_line(result.output)
    assert line == f"error: internal error: RuntimeError: the diff broke; {BUG} (run again with --debug for the traceback)"


def test_with_debug_the_bug_shows_its_traceback_and_still_exits_3(tmp_path, monkeypatch):
    monkeypatch.setattr(neuronprobe.report.diff, "diff_reports", _broken_diff)
    result = runner.invoke(app, ["diff", *_reports(tmp_path), "--debug"])
    assert result.exit_code == EXIT_INTERNAL
    assert "Traceback (most recent call last)" in result.output
    assert "_broken_diff" in result.output  # the frame that raised
    assert result.output.strip().splitlines()[-1] == f"error: internal error: RuntimeError: the diff broke; {BUG}"


def _buggy_analysis(*args: object, **kwargs: object) -> None:
    """A TypeError raised inside neuronprobe's own code (limits.py), as a real bug would be."""
    from neuronprobe.limits import check_shape

    check_shape(None, "here", "input")  # type: ignore[arg-type]


def _missing_rule(*args: object, **kwargs: object) -> None:
    raise RuleNotFound("rule 'dynamic-output-shape' is missing from support table 2026.11.1")


@pytest.mark.parametrize(
    ("bug", "said"),
    [
        (_buggy_analysis, "TypeError: 'NoneType' object is not iterable"),
        (_missing_rule, "RuleNotFound: rule 'dynamic-output-shape' is missing from support table 2026.11.1"),
    ],
)
def test_a_bug_inside_the_worker_exits_3_with_one_line(tmp_path, monkeypatch, bug, said):
    monkeypatch.setattr(neuronprobe.analysis, "analyze_spec", bug)
    result = runner.invoke(app, ["analyze", str(MODELS / "mlp.py"), "-o", str(tmp_path / "r")])
    assert result.exit_code == EXIT_INTERNAL, result.output
    assert _one_line(result.output) == f"error: internal error: {said}; {BUG} (run again with --debug for the traceback)"
    assert not (tmp_path / "r").exists()


def test_a_bug_inside_the_worker_with_debug_shows_the_workers_traceback(tmp_path, monkeypatch):
    monkeypatch.setattr(neuronprobe.analysis, "analyze_spec", _buggy_analysis)
    result = runner.invoke(app, ["analyze", str(MODELS / "mlp.py"), "-o", str(tmp_path / "r"), "--debug"])
    assert result.exit_code == EXIT_INTERNAL
    assert "in the analysis worker:" in result.output and "check_shape" in result.output


def test_bad_input_still_exits_2_and_is_not_called_a_bug(tmp_path):
    result = runner.invoke(app, ["diff", str(tmp_path / "missing.json"), str(tmp_path / "also-missing.json")])
    assert result.exit_code == 2
    assert "bug" not in result.output


def test_a_night_where_one_model_hit_a_bug_exits_3_and_the_others_still_run(config_path, tmp_path, monkeypatch):  # noqa: F811
    reports = tmp_path / "reports"
    serve(monkeypatch, {"alpha": RuleNotFound("rule 'x' is missing from support table 2026.11.1"), "beta": make_report([], model="beta")})
    result = night(config_path, reports, "2025-06-01")
    assert result.exit_code == EXIT_INTERNAL
    assert "error: alpha: internal error: RuleNotFound: rule 'x' is missing from support table 2026.11.1" in result.output
    assert f"error: {BUG}" in result.output
    assert (reports / "2025-06-01" / "beta.json").exists()
