"""Capture everything that runs (issue 33.1): higher-order regions are entered, their ops analysed at their own
lines; a capture that reads too little of its module is incomplete, never "runs as it is"; the prediction diff
counts every observed problem, also one the static capture never saw."""

from __future__ import annotations

import pytest
import torch
from helpers import MODELS, expectations

import neuronprobe
from neuronprobe._torch import regions
from neuronprobe.analysis import AnalyzeOptions, analyze_spec
from neuronprobe.backends.xla_diff import UNCAPTURED_DETAIL, count_uncaptured
from neuronprobe.capture.graph import OpGraph, ParameterCoverage, capture, implausible
from neuronprobe.defaults import MIN_PARAMETER_COVERAGE
from neuronprobe.report.model import Finding, PredictionDiff, Report
from neuronprobe.vocabulary import Origin, SourceLocation, TopVerdict, Verdict

REGION_MODELS = {
    # model file -> (capture method, the regions torch.export or dynamo wrapped code in)
    "no_grad_forward.py": ("export", {"wrap_with_set_grad_enabled"}),
    "capture_regions.py": ("export", {"wrap_with_set_grad_enabled", "wrap_with_autocast", "cond", "map_impl", "while_loop"}),
    "dynamo_regions.py": ("export+dynamo", {"cond"}),
}


@pytest.fixture(scope="module")
def reports() -> dict[str, Report]:
    return {name: analyze_spec(str(MODELS / name), AnalyzeOptions(backend="static")) for name in REGION_MODELS}


def test_the_no_grad_unique_check() -> None:
    # The project's pre-stop check, as written in the issue: a no_grad forward was "0 op calls, runs as it is".
    class M(torch.nn.Module):
        @torch.no_grad()
        def forward(self, ids):
            return ids.float() * torch.unique(ids).numel()

    r = neuronprobe.analyze(M(), (torch.randint(0, 9, (2, 8)),), backend="static")
    assert any(f.verdict != "lowered" and "unique" in str(f.op) for f in r.findings)
    assert r.verdict is TopVerdict.WILL_NOT_COMPILE and r.capture.nodes > 0


@pytest.mark.parametrize("name", sorted(REGION_MODELS))
def test_every_op_in_a_region_is_found_at_its_line(reports: dict[str, Report], name: str) -> None:
    report = reports[name]
    marks = expectations(MODELS / name)
    assert marks
    for line, verdict, op in marks:
        at_line = [f for f in report.findings if f.line == line and f.file == f"tests/models/{name}"]
        assert at_line, f"no finding at {name}:{line}; got {[(f.verdict, f.op, f.line) for f in report.findings]}"
        assert verdict in {f.verdict for f in at_line}
        if op:
            assert op in {f.op for f in at_line}
    # nothing else is reported: each finding is one of the marked lines
    assert {f.line for f in report.findings} == {line for line, _, _ in marks}


@pytest.mark.parametrize("name", sorted(REGION_MODELS))
def test_the_regions_entered_are_in_the_report(reports: dict[str, Report], name: str) -> None:
    method, kinds = REGION_MODELS[name]
    capture_info = reports[name].capture
    assert capture_info.method == method
    assert {r.split(" (")[0] for r in capture_info.regions} == kinds
    assert all(" at tests/models/" in r for r in capture_info.regions), capture_info.regions
    assert capture_info.incomplete is None


def test_both_branches_of_cond_are_analysed(reports: dict[str, Report]) -> None:
    ops = {row.op for row in reports["capture_regions.py"].ops}
    assert "aten::cos" in ops  # the false branch, which the example input does not take
    dynamo = reports["dynamo_regions.py"]
    assert {(f.op, f.line) for f in dynamo.findings if f.op.startswith("aten::")} == {("aten::cummin", 13), ("aten::copysign.Scalar", 16)}


def test_dataflow_crosses_the_region_boundary() -> None:
    from neuronprobe.loaders.resolve import load_model_file

    loaded = load_model_file(MODELS / "no_grad_forward.py")
    graph = capture(loaded.module, loaded.args, loaded.kwargs)
    by_op = {c.op: c for c in graph.calls}
    unique, argmax = by_op["aten::_unique2"], by_op["aten::argmax"]
    assert unique.sources == [argmax.index]  # unique reads argmax's output inside the no_grad body
    assert graph.parameters == ParameterCoverage(read=3 * 8 * 9 + 8 + 8 * 4 + 4, total=3 * 8 * 9 + 8 + 8 * 4 + 4)


def test_a_tied_weight_counts_once() -> None:
    # One tensor under three names (an encoder-decoder's shared embedding) is read through one name: the
    # capture read every parameter element there is, and the answer is complete.
    from neuronprobe.loaders.resolve import load_model_file

    loaded = load_model_file(MODELS / "tied_embeddings.py")
    graph = capture(loaded.module, loaded.args, loaded.kwargs)
    assert graph.parameters == ParameterCoverage(read=1000 * 16 + 16 * 16 + 16, total=1000 * 16 + 16 * 16 + 16)
    report = analyze_spec(str(MODELS / "tied_embeddings.py"), AnalyzeOptions(backend="static"))
    assert report.verdict is TopVerdict.RUNS and report.capture.incomplete is None


def test_a_capture_that_misses_the_body_is_incomplete(monkeypatch: pytest.MonkeyPatch) -> None:
    # The capture as it was before issue 33: regions not entered. The plausibility test must catch it.
    monkeypatch.setattr(regions, "bodies_and_operands", lambda node: ([], []))
    report = analyze_spec(str(MODELS / "no_grad_forward.py"), AnalyzeOptions(backend="static"))
    assert report.findings == [] and report.capture.nodes == 0
    assert report.verdict is TopVerdict.INCOMPLETE
    assert report.verdict.words == "the answer is incomplete: the capture missed code the model runs"
    assert report.capture.incomplete is not None and "read 0.0% of the module's parameter elements (0 of 260" in report.capture.incomplete
    (limit,) = [lim for lim in report.not_analysed if lim.what == "capture completeness"]
    assert limit.why == report.capture.incomplete


def test_the_plausibility_threshold() -> None:
    assert MIN_PARAMETER_COVERAGE == 0.5
    at = ParameterCoverage(read=50, total=100)
    below = ParameterCoverage(read=49, total=100)
    assert implausible(OpGraph(calls=[], method="export", parameters=at)) is None
    assert "read 49.0%" in (implausible(OpGraph(calls=[], method="export", parameters=below)) or "")
    # no parameters (a pure function) or unknown coverage: no claim either way
    assert implausible(OpGraph(calls=[], method="export", parameters=ParameterCoverage(0, 0))) is None
    assert implausible(OpGraph(calls=[], method="dynamo", parameters=None)) is None


def test_the_console_and_html_say_incomplete(monkeypatch: pytest.MonkeyPatch) -> None:
    from rich.console import Console

    from neuronprobe.report.console import render_summary
    from neuronprobe.report.html import banner

    monkeypatch.setattr(regions, "bodies_and_operands", lambda node: ([], []))
    report = analyze_spec(str(MODELS / "no_grad_forward.py"), AnalyzeOptions(backend="static"))
    console = Console(width=300, record=True)
    console.print(render_summary(report))
    text = console.export_text()
    assert "the answer is incomplete" in text and "runs on Neuron as it is" not in text
    assert banner(report).title.startswith("Incomplete answer")


def _observed(op: str, line: int) -> Finding:
    return Finding.at("observed-fallback", SourceLocation("m.py", line), op, "torch-xla ran it on the host", origin=Origin.OBSERVED)


def test_an_observed_fallback_the_capture_never_saw_is_a_disagreement() -> None:
    report = Report(model="m", target="trn1", findings=[_observed("aten::_unique2", 5), _observed("aten::nonzero", 6)])
    report.prediction_diff = PredictionDiff()
    count_uncaptured(report, [])  # the static capture was empty
    mismatches = report.prediction_diff.predicted_ok_observed_failing
    assert [(m.op, m.predicted, m.observed, m.line) for m in mismatches] == [
        ("aten::_unique2", Verdict.LOWERED, Verdict.CPU_FALLBACK, 5),
        ("aten::nonzero", Verdict.LOWERED, Verdict.CPU_FALLBACK, 6),
    ]
    assert all(m.detail.startswith(UNCAPTURED_DETAIL) for m in mismatches)


def test_an_observed_fallback_at_a_captured_line_is_left_to_the_line_diff() -> None:
    from neuronprobe.analysis import ClassifiedCall
    from neuronprobe.capture.graph import OpCall

    # x[mask]: captured as index.Tensor, observed as nonzero at the same line (the line-matched diff's to judge)
    call = OpCall(index=0, namespace="aten", name="index", overload="Tensor", file="m.py", line=5)
    report = Report(model="m", target="trn1", findings=[_observed("aten::nonzero", 5), _observed("aten::nonzero_static", 9)])
    report.prediction_diff = PredictionDiff()
    count_uncaptured(report, [ClassifiedCall(call, None)])  # type: ignore[arg-type]
    assert [(m.op, m.line) for m in report.prediction_diff.predicted_ok_observed_failing] == [("aten::nonzero_static", 9)]


def test_an_observed_fallback_of_a_captured_op_is_left_to_the_other_diffs() -> None:
    from neuronprobe.analysis import ClassifiedCall
    from neuronprobe.capture.graph import OpCall

    # torch-xla counts max_pool2d_with_indices where the capture recorded max_pool2d: the same family
    call = OpCall(index=0, namespace="aten", name="max_pool2d", overload="default")
    report = Report(model="m", target="trn1", findings=[_observed("aten::max_pool2d_with_indices", 5)])
    report.prediction_diff = PredictionDiff()
    count_uncaptured(report, [ClassifiedCall(call, None)])  # type: ignore[arg-type]
    assert report.prediction_diff.predicted_ok_observed_failing == []


def test_xla_cpu_counts_the_fallbacks_of_a_capture_that_missed_them(xla_env: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The case, for real: the static capture is empty (regions not entered, as before the fix) while
    # torch-xla 2.9 runs the no_grad body and falls back on unique: the diff must say so.
    monkeypatch.setattr(regions, "bodies_and_operands", lambda node: ([], []))
    report = analyze_spec(str(MODELS / "no_grad_forward.py"), AnalyzeOptions(backend="xla-cpu"))
    ((line, _, _),) = expectations(MODELS / "no_grad_forward.py")
    observed = [f for f in report.findings if f.origin == "observed"]
    assert [(f.op, f.verdict, f.line) for f in observed] == [("aten::_unique2", Verdict.CPU_FALLBACK, line)]
    diff = report.prediction_diff
    assert diff is not None
    assert [(m.op, m.observed) for m in diff.predicted_ok_observed_failing] == [("aten::_unique2", Verdict.CPU_FALLBACK)]
    assert report.verdict is TopVerdict.RUNS_WITH_FALLBACKS and report.capture.incomplete is not None
