"""Issue 33.5: each finding sits at the line that runs the op, in the model package that runs it, with the
call chain up to the user's entry; one finding per (line, problem); the counts row is the findings'."""

from __future__ import annotations

import functools
import json
import os
import re
from pathlib import Path

import pytest
from helpers import MODELS, expectations

import neuronprobe
from neuronprobe.analysis import merge_origins
from neuronprobe.report.console import counts_line
from neuronprobe.report.frames import counts_df
from neuronprobe.report.html import render_html
from neuronprobe.report.markdown import counts_text, render_markdown, render_text
from neuronprobe.report.model import CallFrame, Finding, GraphBreak, OpSummary, Report
from neuronprobe.usercode import Owner, owner
from neuronprobe.vocabulary import Origin, Verdict

PACKAGE = MODELS / "np_model_pkg"


def _caller_line(path: Path) -> int:
    return next(i for i, text in enumerate(path.read_text().splitlines(), 1) if "# CALLER" in text)


@pytest.fixture
def model_package(monkeypatch):
    """The model files import np_model_pkg from their own folder (as `python model.py` would find it)."""
    monkeypatch.syspath_prepend(str(MODELS))
    monkeypatch.chdir(MODELS.parent.parent)


def test_a_mask_write_four_calls_deep_is_at_its_own_line_with_the_chain(model_package):
    report = neuronprobe.analyze(str(MODELS / "pkg_prompt_mask.py"), backend="static")
    ((line, verdict, op),) = expectations(PACKAGE / "prompt.py")
    (finding,) = report.findings
    assert (finding.verdict, finding.op, finding.file, finding.line) == (verdict, op, "tests/models/np_model_pkg/prompt.py", line)
    assert finding.source_line == "out[labels < 0] = 0.0  # EXPECT dynamic_shape aten::index_put_"
    # from the user's forward, through the package's forward and helper, to the caller of the line
    assert [(f.file, f.line, f.function) for f in finding.call_chain] == [
        ("tests/models/pkg_prompt_mask.py", _caller_line(MODELS / "pkg_prompt_mask.py"), "forward"),
        ("tests/models/np_model_pkg/prompt.py", 22, "forward"),
        ("tests/models/np_model_pkg/prompt.py", 13, "_embed_points"),
    ]
    assert finding.chain_text == (
        "tests/models/pkg_prompt_mask.py:14 (forward) > tests/models/np_model_pkg/prompt.py:22 (forward) > "
        "tests/models/np_model_pkg/prompt.py:13 (_embed_points)"
    )
    # rendered compactly everywhere, and kept in the JSON
    assert f"via {finding.chain_text}" in render_text(report)
    # Markdown escapes < and > as entities (issue 34.5): the chain's separator reads > once rendered
    assert "(via tests/models/pkg_prompt_mask.py:14 (forward) &gt; tests/models/np" in render_markdown(report)
    assert "&amp;gt;" not in render_markdown(report)
    html = render_html(report)
    assert 'class="np-chain">via <code class="np-loc">tests/models/pkg_prompt_mask.py:14</code> (<code>forward</code>)' in html
    again = Report.from_json(report.to_json())
    assert again.findings[0].call_chain == finding.call_chain


def test_a_complex_scan_in_a_package_is_at_the_step_line_not_the_wrapper(model_package):
    report = neuronprobe.analyze(str(MODELS / "pkg_complex_scan.py"), backend="static", sdk="2.31.0")
    ((line, verdict, op),) = expectations(PACKAGE / "scan.py")
    wrapper = _caller_line(MODELS / "pkg_complex_scan.py")
    (step,) = [f for f in report.findings if f.op == op]
    assert (step.verdict, step.file, step.line) == (verdict, "tests/models/np_model_pkg/scan.py", line)
    assert step.count == 10  # five steps, each a complex multiply (the decay times the state)
    assert [f.function for f in step.call_chain] == ["forward", "forward", "selective_scan"]
    assert not [f for f in report.findings if f.file == "tests/models/pkg_complex_scan.py"], "nothing at the wrapper line"
    assert all(f.call_chain[0] == CallFrame("tests/models/pkg_complex_scan.py", wrapper, "forward") for f in report.findings)


def test_whose_code_a_frame_is():
    assert owner(functools.__file__) is Owner.PYTHON  # Python's standard library is not model code
    assert owner("/opt/py/lib/python3.11/concurrent/futures/thread.py") is Owner.PYTHON  # another interpreter's
    assert owner("/venv/lib/python3.11/site-packages/segment_anything/modeling/prompt_encoder.py") is Owner.USER
    assert owner(str(PACKAGE / "prompt.py")) is Owner.USER
    assert owner("/venv/lib/python3.11/site-packages/torch/nn/functional.py") is Owner.STACK


def _finding(op, verdict, origin, line=10, rule="r", count=1, fix="") -> Finding:
    return Finding(op, Verdict(verdict), "m.py", line, None, f"{op} message", fix, rule, count=count, origin=Origin(origin))


def test_one_finding_per_line_and_problem_with_both_origins_observed_verdict_wins():
    predicted = _finding("aten::nonzero", "dynamic_shape", "predicted", fix="use torch.where")
    observed = _finding("aten::nonzero", "cpu_fallback", "observed", fix="generic")
    elsewhere = _finding("aten::nonzero", "cpu_fallback", "observed", line=20)
    other_problem = _finding("aten::_to_copy", "compile_error", "predicted")  # float64 on the same line: another problem
    note = _finding("aten::softmax", "precision", "predicted")
    merged = merge_origins([predicted, observed, elsewhere, other_problem, note], [])
    assert merged == [observed, elsewhere, other_problem, note]
    assert observed.verdict is Verdict.CPU_FALLBACK and observed.origin is Origin.OBSERVED
    assert observed.origins == [Origin.PREDICTED, Origin.OBSERVED] and observed.origins_text == "predicted+observed"
    assert observed.fix == "use torch.where"  # the prediction's fix names the construct the user wrote
    assert "predicted: dynamic_shape for aten::nonzero" in observed.message
    assert elsewhere.origins == [Origin.OBSERVED] and other_problem.origins == [Origin.PREDICTED]
    # a lone prediction and a lone observation on one line are the same problem, whatever the op names
    a, b = _finding("aten::index.Tensor", "dynamic_shape", "predicted"), _finding("aten::nonzero", "cpu_fallback", "observed")
    assert merge_origins([a, b], []) == [b] and b.origins == [Origin.PREDICTED, Origin.OBSERVED]


def test_an_older_finding_reads_its_one_origin():
    data = json.loads(Report("m", "trn1", findings=[_finding("aten::nonzero", "cpu_fallback", "observed")]).to_json())
    del data["findings"][0]["origins"], data["findings"][0]["call_chain"]
    data["schema_version"] = 5
    (f,) = Report.from_dict(data).findings
    assert f.origins == [Origin.OBSERVED] and f.call_chain == []


def _counts_report() -> Report:
    """Findings with verdicts the op inventory does not hold (a graph break, an observed fallback)."""
    report = Report("m", "trn1")
    report.ops = [OpSummary("aten::add.Tensor", 7, Verdict.LOWERED), OpSummary("aten::nonzero", 2, Verdict.DYNAMIC_SHAPE)]
    report.findings = [
        _finding("<python branch>", "control_flow", "predicted", line=3),
        _finding("aten::nonzero", "dynamic_shape", "predicted", line=5, count=2),
        _finding("aten::unique", "cpu_fallback", "observed", line=6, count=3),
    ]
    report.graph_breaks = [GraphBreak("branch", "m.py", 3)]
    report.summary.counts = {v: 0 for v in Verdict}  # what an analysis before issue 33 stored
    return report


def test_the_counts_row_is_the_findings_and_every_renderer_agrees():
    report = _counts_report()
    counts = report.verdict_counts()
    assert counts == {
        Verdict.LOWERED: 7,
        Verdict.DECOMPOSED: 0,
        Verdict.PRECISION: 0,
        Verdict.CPU_FALLBACK: 3,
        Verdict.DYNAMIC_SHAPE: 2,
        Verdict.CONTROL_FLOW: 1,
        Verdict.COMPILE_ERROR: 0,
    }
    row = "lowered 7  decomposed 0  precision 0  cpu_fallback 3  dynamic_shape 2  control_flow 1  compile_error 0"
    assert counts_line(report) == row
    assert counts_text(report) in render_markdown(report) and counts_text(report) in render_text(report)
    assert re.findall(r"(\w+) (\d+)", counts_text(report)) == re.findall(r"(\w+) (\d+)", row)
    frame = counts_df(report)
    assert dict(zip(frame["verdict"].astype(str), frame["count"], strict=True)) == {str(v): n for v, n in counts.items()}
    html = render_html(report)
    for verdict, n in counts.items():
        if n:
            assert f'title="{verdict}: {n} op calls"' in html


def test_an_analysis_stores_the_counts_it_shows(model_package):
    report = neuronprobe.analyze(str(MODELS / "pkg_prompt_mask.py"), backend="static")
    assert report.summary.counts == report.verdict_counts()
    assert report.summary.counts[Verdict.DYNAMIC_SHAPE] == 1
    data = json.loads(report.to_json())
    assert data["summary"]["counts"]["dynamic_shape"] == 1


def test_the_console_counts_row_above_a_branch_on_tensor_values():
    from rich.console import Console

    from neuronprobe.report.console import render_summary

    report = neuronprobe.analyze(str(MODELS / "data_branch.py"), backend="static")
    branches = [f for f in report.findings if f.verdict is Verdict.CONTROL_FLOW]
    assert branches, [(f.verdict, f.line) for f in report.findings]
    with open(os.devnull, "w") as sink:
        console = Console(width=200, record=True, file=sink)
        console.print(render_summary(report))
    text = console.export_text()
    assert f"control_flow {sum(f.count for f in branches)}" in text  # never control_flow 0 above such a finding
    assert counts_line(report) in text


def test_the_frame_filter_is_put_back_after_the_capture():
    from torch.fx.proxy import TracerBase

    from neuronprobe._torch import stack_traces

    before = TracerBase.__dict__["_filter_traceback_frames"]
    with stack_traces.keep_frames(lambda frames: frames):
        assert TracerBase.__dict__["_filter_traceback_frames"] is not before
    assert TracerBase.__dict__["_filter_traceback_frames"] is before
    assert stack_traces.self_check().ok
