"""torchvision and timm models by name (issue 12): random weights, the inputs each expects, close names on a typo."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers import ROOT

from neuronprobe.analysis import AnalyzeOptions, analyze_spec


@pytest.mark.parametrize("spec", ["tv:resnet18", "timm:resnet18"])
def test_vision_classifiers_analyse_from_their_names(spec):
    report = analyze_spec(spec, AnalyzeOptions(backend="static"))
    assert report.capture.strategy == "meta"
    assert any("conv" in r.op for r in report.ops), [r.op for r in report.ops]
    assert report.summary.support_percentage == 100.0


def test_an_unknown_vision_name_lists_the_closest_and_exits_2():
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    result = subprocess.run([sys.executable, "-m", "neuronprobe.cli", "analyze", "tv:resnt18"], capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "no such torchvision model" in lines[0] and "resnet18" in lines[0]
