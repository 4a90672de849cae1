"""torchvision and timm models by name (issue 12): random weights, the inputs each expects, close names on a typo."""

from __future__ import annotations

import os

import pytest
from helpers import MODELS, cli_in_process, expectations

from neuronprobe.analysis import AnalyzeOptions, analyze_spec


def _detection_file(name):
    import importlib.util

    return os.path.join(os.path.dirname(importlib.util.find_spec("torchvision").origin), "models", "detection", name)


RPN = _detection_file("rpn.py")
ROI_HEADS = _detection_file("roi_heads.py")


def _line_of(path, text):
    """The line of torchvision's own source that holds ``text`` (so the test follows torchvision's version)."""
    with open(path) as f:
        lines = [n for n, line in enumerate(f, start=1) if text in line]
    assert len(lines) == 1, (path, text, lines)
    return lines[0]


@pytest.mark.parametrize("spec", ["tv:resnet18", "timm:resnet18"])
def test_vision_classifiers_analyse_from_their_names(spec):
    report = analyze_spec(spec, AnalyzeOptions(backend="static"))
    assert report.capture.strategy == "meta"
    assert any("conv" in r.op for r in report.ops), [r.op for r in report.ops]
    assert report.summary.support_percentage == 100.0


def test_an_unknown_vision_name_lists_the_closest_and_exits_2():
    result = cli_in_process("analyze", "tv:resnt18")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "no such torchvision model" in lines[0] and "resnet18" in lines[0]


def _custom_op_findings(report, op):
    return [f for f in report.findings if f.op == op]


def test_torchvision_custom_ops_in_a_model_file_fall_back_at_their_lines():
    import neuronprobe

    path = MODELS / "detection_nms.py"
    report = neuronprobe.analyze(str(path), backend="static")
    for line, verdict, op in expectations(path):
        found = _custom_op_findings(report, op)
        assert [(f.verdict, f.rule, f.file, f.line) for f in found] == [(verdict, "custom-op", "tests/models/detection_nms.py", line)]
        assert "EXPECT" in (found[0].source_line or "")
    assert {r.verdict for r in report.ops if r.op.startswith("torchvision::")} == {"cpu_fallback"}


def test_a_torchvision_detection_model_reports_nms_and_roi_align_in_its_detection_code():
    """Faster R-CNN branches on how many boxes nms kept: the fake capture follows it with an assumed count and says so."""
    report = analyze_spec("tv:fasterrcnn_mobilenet_v3_large_320_fpn", AnalyzeOptions(backend="static"))
    assert report.capture.strategy == "fake" and report.capture.method == "export"
    ops = {r.op: r for r in report.ops}
    assert ops["torchvision::nms"].verdict == ops["torchvision::roi_align"].verdict == "cpu_fallback"
    places = {(f.op, os.path.basename(f.file or ""), f.line, f.rule) for f in report.findings if f.op.startswith("torchvision::")}
    # The deepest line of the detection modules that reaches the op (issue 33.5: the helper that calls batched_nms,
    # not the forward that calls the helper), never torchvision/ops/ (the library's shared helpers).
    assert places == {
        ("torchvision::nms", "rpn.py", _line_of(RPN, "keep = box_ops.batched_nms(boxes, scores, lvl,"), "custom-op"),
        ("torchvision::nms", "roi_heads.py", _line_of(ROI_HEADS, "keep = box_ops.batched_nms(boxes, scores, labels,"), "custom-op"),
        ("torchvision::roi_align", "roi_heads.py", _line_of(ROI_HEADS, "box_features = self.box_roi_pool("), "custom-op"),
    }
    branches = [f for f in report.findings if f.verdict == "control_flow"]
    assert branches and all("/torchvision/models/detection/" in (f.file or "") and "assumed" in f.message for f in branches)
    assert _line_of(RPN, "keep = box_ops.batched_nms(") in {f.line for f in branches if f.file.endswith("rpn.py")}


def test_ssd_models_build_at_their_own_fixed_size():
    """SSD's builders set the transform's size themselves; the loader must not pass min_size again."""
    from neuronprobe.loaders.vision import load_vision

    loaded = load_vision("tv:ssdlite320_mobilenet_v3_large")
    assert type(loaded.module).__name__ == "SSD" and loaded.on_meta
    assert loaded.module.transform.fixed_size == (320, 320)
