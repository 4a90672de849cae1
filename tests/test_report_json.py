"""The JSON report round-trips into the same objects, and bad JSON is refused clearly."""

from __future__ import annotations

import json

import pytest
from helpers import EXAMPLES, MODELS

import neuronprobe
from neuronprobe.errors import ReportFormatError
from neuronprobe.report.model import Report, load_report


@pytest.fixture(scope="module")
def report():
    return neuronprobe.analyze(str(EXAMPLES / "tiny_gpt.py"), backend="static")


def test_round_trip_is_lossless(report, tmp_path):
    path = tmp_path / "r.json"
    path.write_text(report.to_json())
    again = load_report(str(path))
    assert again == report
    assert again.to_json() == report.to_json()


def test_round_trip_with_a_graph_break_report(tmp_path):
    report = neuronprobe.analyze(str(MODELS / "data_branch.py"), backend="static")
    assert Report.from_json(report.to_json()) == report


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "not valid JSON"),
        ('{"schema_version": 1, "model": "m"', "not valid JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"schema_version": 99, "model": "m", "target": "trn1"}', "unsupported report schema_version"),
        ('{"schema_version": 1, "target": "trn1"}', "missing field 'model'"),
        ('{"schema_version": 1, "model": "m", "target": "trn1", "findings": [{"op": 3}]}', "report.findings[0]"),
    ],
)
def test_corrupt_reports_raise_one_clear_error(tmp_path, text, needle):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ReportFormatError) as err:
        load_report(str(path))
    assert needle in str(err.value)
    assert str(path) in str(err.value)


def test_truncated_real_report_is_refused(report, tmp_path):
    text = report.to_json()
    path = tmp_path / "cut.json"
    path.write_text(text[: len(text) // 2])
    with pytest.raises(ReportFormatError):
        load_report(str(path))


def test_json_carries_no_environment_secrets(report, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "SENTINEL-7d1f")
    again = neuronprobe.analyze(str(MODELS / "mlp.py"), backend="static")
    assert "SENTINEL-7d1f" not in again.to_json()
    assert json.loads(again.to_json())["metadata"]["host"]


def test_repr_is_one_line_for_the_repl(report):
    text = repr(report)
    assert "\n" not in text and len(text) < 200
    assert text.startswith("<neuronprobe Report 'tiny_gpt' on trn1: will_not_compile, 4 finding(s)")
