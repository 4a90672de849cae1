"""A dynamo capture that stops partway says so in a field (issue 27): capture -> OpGraph.stopped -> the strategies and Report.capture.stopped."""

from __future__ import annotations

import torch

from neuronprobe.capture.graph import capture_dynamo
from neuronprobe.capture.strategies import stopped_early
from neuronprobe.report.model import CaptureInfo, Report


class Stops(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x.sin()
        if y.shape[0] == 2:
            raise ValueError("the model gave up here\nsecond line")
        return y


class RunsThrough(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sin().cos()


def test_a_capture_that_stops_names_why_in_a_field():
    graph = capture_dynamo(Stops(), (torch.ones(2),), {})
    assert graph.stopped == "ValueError: the model gave up here"  # the exception's first line
    assert f"dynamo capture stopped: {graph.stopped}" in graph.notes  # the words the report's reader sees


def test_a_capture_that_runs_through_has_no_stop():
    graph = capture_dynamo(RunsThrough(), (torch.ones(2),), {})
    assert graph.stopped is None and {"aten::sin", "aten::cos"} <= {c.op for c in graph.calls}


def test_the_strategies_read_the_stop_from_the_graph_and_it_travels_in_the_report():
    assert stopped_early(capture_dynamo(Stops(), (torch.ones(2),), {})) == "ValueError: the model gave up here"
    assert stopped_early(capture_dynamo(RunsThrough(), (torch.ones(2),), {})) is None
    report = Report(model="m", target="trn1", capture=CaptureInfo(method="dynamo", nodes=1, stopped="ValueError: x"))
    assert Report.from_json(report.to_json()).capture.stopped == "ValueError: x"
