"""`neuronprobe diff` and diff_reports: what counts as new, moved and regressed, and when the gate applies."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from diff_fixtures import MODEL_FILE, finding, make_report
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from neuronprobe.cli import app
from neuronprobe.report.diff import diff_reports
from neuronprobe.report.model import Report, RunDiff
from neuronprobe.typed_json import build_typed
from neuronprobe.vocabulary import Verdict

runner = CliRunner()


def write(tmp_path: Path, name: str, report: Report) -> Path:
    path = tmp_path / name
    path.write_text(report.to_json(), encoding="utf-8")
    return path


def run_diff(tmp_path: Path, base: Report, new: Report, *args: str):
    return runner.invoke(app, ["diff", str(write(tmp_path, "base.json", base)), str(write(tmp_path, "new.json", new)), *args])


# --- the gate, end to end through the CLI -------------------------------------------------


def test_identical_findings_exit_0(tmp_path):
    findings = [finding(), finding("aten::nonzero", "dynamic_shape", 52)]
    result = run_diff(tmp_path, make_report(findings, support=90.0), make_report(findings, support=90.0), "--fail-on-regression")
    assert result.exit_code == 0, result.output
    assert "no regression" in result.output


def test_new_cpu_fallback_exit_1(tmp_path):
    base = make_report([finding("aten::nonzero", "dynamic_shape", 52)], support=95.0)
    new = make_report([finding("aten::nonzero", "dynamic_shape", 52), finding("aten::_unique2", "cpu_fallback", 60)], support=95.0)
    result = run_diff(tmp_path, base, new, "--fail-on-regression")
    assert result.exit_code == 1, result.output
    assert "new cpu_fallback: aten::_unique2 at models/tiny_gpt.py:60" in result.output


def test_regression_without_the_flag_exits_0(tmp_path):
    result = run_diff(tmp_path, make_report([]), make_report([finding()]))
    assert result.exit_code == 0, result.output
    assert "1 regression(s)" in result.output


def test_cross_backend_pair_is_reported_and_not_gated(tmp_path):
    base = make_report([], backend="static", support=100.0)
    new = make_report([finding()], backend="neuron", compiler="2.21.33363", support=97.0)
    out = tmp_path / "diff.json"
    result = run_diff(tmp_path, base, new, "--fail-on-regression", "--json", str(out))
    assert result.exit_code == 0, result.output
    assert "not comparable, not gated" in result.output
    assert "different backend (static vs neuron)" in result.output
    assert "aten::_unique2" in result.output  # the new finding is still shown
    data = json.loads(out.read_text())
    assert data["comparable"] is False
    assert data["regressions"] == []
    assert "new cpu_fallback: aten::_unique2 at models/tiny_gpt.py:40" in data["ungated_regressions"]
    assert [f["op"] for f in data["new_findings"]] == ["aten::_unique2"]
    assert data["version_changes"]["neuronx-cc"] == [None, "2.21.33363"]


@pytest.mark.parametrize(
    "content, expected",
    [
        ('{"model": "tiny", "target": "trn1", "schema_ver', "not valid JSON"),  # truncated mid-write
        ("\x00\x01garbage", "not valid JSON"),
        ("[1, 2, 3]", "not a JSON object"),
        ('{"model": "tiny", "target": "trn1", "schema_version": 99}', "unsupported report schema_version 99"),
        ('{"model": "tiny", "target": "trn1", "schema_version": 1, "summary": {"support_percentage": "high"}}', "expected a number"),
        ("", "not valid JSON"),
    ],
    ids=["truncated", "binary", "array", "future-schema", "wrong-type", "empty"],
)
def test_corrupt_or_truncated_json_is_a_clear_error_exit_2(tmp_path, content, expected):
    good = write(tmp_path, "good.json", make_report([]))
    bad = tmp_path / "bad.json"
    bad.write_text(content, encoding="utf-8")
    for args in ([str(good), str(bad)], [str(bad), str(good)]):
        result = runner.invoke(app, ["diff", *args, "--fail-on-regression"])
        assert result.exit_code == 2, result.output
        assert f"{bad}:" in result.output and expected in result.output
        assert "Traceback" not in result.output


def test_missing_report_file_exit_2(tmp_path):
    good = write(tmp_path, "good.json", make_report([]))
    result = runner.invoke(app, ["diff", str(good), str(tmp_path / "nope.json")])
    assert result.exit_code == 2
    assert "no such report file" in result.output


def test_json_output_is_the_rundiff_and_loads_back(tmp_path):
    out = tmp_path / "out" / "diff.json"
    result = run_diff(tmp_path, make_report([]), make_report([finding()]), "--json", str(out))
    assert result.exit_code == 0, result.output
    loaded = build_typed(RunDiff, json.loads(out.read_text()), "diff")
    assert loaded.comparable and loaded.has_regression
    assert loaded.new_findings[0].op == "aten::_unique2"
    assert loaded.metrics["cpu_fallbacks"] == [0.0, 1.0]


def test_html_output_is_the_new_report_with_its_baseline_section(tmp_path):
    out = tmp_path / "new.html"
    new = make_report([finding("aten::_unique2", "cpu_fallback", 60)], model="tiny_gpt")
    result = run_diff(tmp_path, make_report([]), new, "--html", str(out))
    assert result.exit_code == 0, result.output
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>")
    assert 'id="baseline-diff"' in page
    assert "Changes since baseline" in page and "aten::_unique2" in page


# --- the rules of diff_reports --------------------------------------------------------------


def test_shifted_line_with_the_same_source_is_moved_not_new():
    code = "vocab = torch.unique(ids)"
    base = make_report([finding(line=40, source_line=code)])
    new = make_report([finding(line=47, source_line="    " + code)])  # 7 lines inserted above; re-indented
    d = diff_reports(base, new)
    assert d.new_findings == [] and d.removed_findings == []
    assert [(m.line, m.base_line) for m in d.moved_findings] == [(47, 40)]
    assert not d.has_regression


def test_changed_source_text_at_another_line_is_new_and_removed():
    base = make_report([finding(line=40, source_line="vocab = torch.unique(ids)")])
    new = make_report([finding(line=47, source_line="vocab, counts = torch.unique(ids, return_counts=True)")])
    d = diff_reports(base, new)
    assert [f.line for f in d.new_findings] == [47] and [f.line for f in d.removed_findings] == [40]
    assert d.regressions == ["new cpu_fallback: aten::_unique2 at models/tiny_gpt.py:47"]


def test_without_source_text_shifted_findings_pair_by_nearest_line_and_extras_are_new():
    base = make_report([finding(line=10), finding(line=30)])
    new = make_report([finding(line=12), finding(line=33), finding(line=90)])
    d = diff_reports(base, new)
    assert sorted((m.base_line, m.line) for m in d.moved_findings) == [(10, 12), (30, 33)]
    assert [f.line for f in d.new_findings] == [90]
    assert d.has_regression


def test_verdict_change_at_the_same_place_is_removed_plus_new():
    base = make_report([finding("aten::sort", "cpu_fallback", 20)])
    new = make_report([finding("aten::sort", "compile_error", 20)])
    d = diff_reports(base, new)
    assert [f.verdict for f in d.removed_findings] == ["cpu_fallback"]
    assert [f.verdict for f in d.new_findings] == ["compile_error"]
    assert d.regressions == ["new compile_error: aten::sort at models/tiny_gpt.py:20"]


def test_removed_findings_and_better_numbers_are_not_regressions():
    base = make_report([finding()], support=90.0, device_graphs=3, static_graphs=9, padding=30.0)
    new = make_report([], support=99.0, device_graphs=1, static_graphs=4, padding=12.0)
    d = diff_reports(base, new)
    assert d.regressions == [] and len(d.removed_findings) == 1
    assert d.support_percentage_change == pytest.approx(9.0)
    assert d.graphs_change == -2
    assert d.padding_overhead_change == pytest.approx(-18.0)


def test_a_new_supported_finding_is_not_a_regression():
    d = diff_reports(make_report([]), make_report([finding("aten::layer_norm", "decomposed", 5)]))
    assert len(d.new_findings) == 1 and d.regressions == []


@pytest.mark.parametrize(
    "base_kwargs, new_kwargs, regression",
    [
        ({"support": 98.5}, {"support": 97.25}, "support dropped from 98.50% to 97.25%"),
        ({"device_graphs": 1}, {"device_graphs": 2}, "more device graphs: 1 -> 2"),
        ({"static_graphs": 4}, {"static_graphs": 5}, "more graphs under the static-shape policy: 4 -> 5"),
        ({"padding": 10.0}, {"padding": 14.5}, "more padding overhead: 10.00% -> 14.50% of real tokens"),
    ],
    ids=["support", "device-graphs", "static-graphs", "padding"],
)
def test_worse_numbers_are_regressions(base_kwargs, new_kwargs, regression):
    d = diff_reports(make_report([], **base_kwargs), make_report([], **new_kwargs))
    assert d.regressions == [regression]


def test_a_metric_missing_on_one_side_is_not_gated():
    d = diff_reports(make_report([], padding=10.0, static_graphs=2), make_report([]))
    assert d.regressions == []
    assert d.padding_overhead_change is None
    assert d.metrics["padding_overhead"] == [10.0, None]


@pytest.mark.parametrize(
    "base_kwargs, new_kwargs, reason",
    [
        ({"backend": "static"}, {"backend": "neuron"}, "different backend (static vs neuron)"),
        ({"backend": "neuron", "fake": True}, {"backend": "neuron"}, "different backend (neuron fake vs neuron)"),
        ({"target": "trn1"}, {"target": "inf2"}, "different target (trn1 vs inf2)"),
        ({"backend": "neuron", "compiler": "2.20"}, {"backend": "neuron", "compiler": "2.21"}, "different neuronx-cc (2.20 vs 2.21)"),
    ],
    ids=["backend", "fake-sdk", "target", "compiler"],
)
def test_runs_of_different_stacks_are_not_gated(base_kwargs, new_kwargs, reason):
    d = diff_reports(make_report([], support=99.0, **base_kwargs), make_report([finding()], support=90.0, **new_kwargs))
    assert not d.comparable and not d.has_regression
    assert d.not_comparable_reason == reason
    assert d.regressions == []
    assert "support dropped from 99.00% to 90.00%" in d.ungated_regressions


def test_same_stack_with_other_torch_and_commit_is_gated_and_shows_what_changed():
    base = make_report([], backend="neuron", compiler="2.21", commit="aaaaaaaaaaaa")
    new = make_report([finding()], backend="neuron", compiler="2.21", commit="bbbbbbbbbbbb")
    new.backend.versions["torch"] = "2.9.1"
    d = diff_reports(base, new)
    assert d.comparable and d.has_regression
    assert d.version_changes == {"torch": ["2.9.0", "2.9.1"]}
    assert d.metadata_changes["git_commit"] == ["aaaaaaaaaaaa", "bbbbbbbbbbbb"]


def test_diff_survives_a_json_round_trip_inside_the_report():
    new = make_report([finding()])
    new.baseline_diff = diff_reports(make_report([]), new)
    again = Report.from_json(new.to_json())
    assert again.baseline_diff == new.baseline_diff


# --- properties ---------------------------------------------------------------------------

_findings = st.lists(
    st.builds(
        finding,
        op=st.sampled_from(["aten::_unique2", "aten::nonzero", "aten::sort"]),
        verdict=st.sampled_from(list(Verdict)),
        line=st.one_of(st.none(), st.integers(1, 60)),
        file=st.sampled_from([MODEL_FILE, "other.py", None]),
        source_line=st.sampled_from([None, "x = f(y)", "z = g(x)"]),
    ),
    max_size=12,
)


@settings(max_examples=150, deadline=None)
@given(findings=_findings, seed=st.integers(0, 10**6))
def test_a_report_against_itself_in_any_order_has_no_changes(findings, seed):
    shuffled = list(findings)
    random.Random(seed).shuffle(shuffled)
    d = diff_reports(make_report(findings), make_report(shuffled))
    assert d.new_findings == [] and d.removed_findings == [] and d.regressions == []


@settings(max_examples=150, deadline=None)
@given(base=_findings, new=_findings)
def test_every_finding_is_matched_moved_new_or_removed_exactly_once(base, new):
    d = diff_reports(make_report(base), make_report(new))
    matched = len(new) - len(d.new_findings) - len(d.moved_findings)
    assert matched == len(base) - len(d.removed_findings) - len(d.moved_findings) >= 0
    problem_new = [f for f in d.new_findings if f.verdict.is_problem]  # a new precision note is no regression
    assert len([r for r in d.regressions if r.startswith("new ")]) == len(problem_new)
