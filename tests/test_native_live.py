"""The live backend on a TorchNeuron host (issue 36.6), against the fake native stack: executed ops, fallbacks,
the graphs the model's own torch.compile(backend="neuron") compiled with their times, and the prediction diff."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest
from helpers import MODELS, marker_line

from neuronprobe.analysis import AnalyzeOptions, analyze_spec
from neuronprobe.backends.neuron_steps import dynamo_metrics_rows
from neuronprobe.report.model import CompiledGraph, Report
from neuronprobe.vocabulary import Origin, Verdict

COMPILED = MODELS / "native_compiled_submodule.py"


@pytest.fixture
def fixture(tmp_path, monkeypatch):
    def write(data: dict) -> None:
        path = tmp_path / "fake_fixture.json"
        path.write_text(json.dumps(data))
        monkeypatch.setenv("FAKE_NEURON_FIXTURE", str(path))

    return write


def test_the_run_reads_the_graphs_the_models_own_compile_made_and_diffs_the_fallbacks(fake_native_sdk, fixture):
    import torch_neuronx  # on a TorchNeuron host torch autoloads it (a torch.backends entry point), so "neuron" is its backend

    assert torch_neuronx.__neuronprobe_fake__
    fixture({"fallback_ops": ["aten::sort"], "dynamo_compile_us": [4_200_000]})
    report = analyze_spec(str(COMPILED), AnalyzeOptions(backend="neuron", target="trn2"))
    assert (report.backend.name, report.backend.kind, report.backend.fake) == ("neuron", "native", True)
    [graph] = report.backend.compiled_graphs
    assert graph.compile_seconds == 4.2 and graph.nodes > 0 and graph.name.endswith("_inference_0")
    run = report.backend.steps["run"]
    assert "1 on the CPU" in run.detail and "1 torch.compile graph(s) compiled in 4.2 s" in run.detail
    # the device fell back on sort, as the table predicted: no disagreement, one finding with both origins
    [seen] = [f for f in report.findings if f.verdict is Verdict.CPU_FALLBACK]
    assert (seen.line, seen.origins) == (marker_line(COMPILED), [Origin.PREDICTED, Origin.OBSERVED])
    assert not report.prediction_diff.predicted_ok_observed_failing and not report.prediction_diff.predicted_failing_observed_ok
    again = Report.from_json(report.to_json())
    assert again.backend.compiled_graphs == [graph]


def test_a_kernel_the_device_lacks_is_a_disagreement_with_the_native_table(fake_native_sdk, fixture):
    import torch_neuronx  # noqa: F401  (autoloaded on a TorchNeuron host)

    fixture({"fallback_ops": ["aten::sort", "aten::cumsum"]})  # cumsum has a Neuron kernel in the April source
    report = analyze_spec(str(COMPILED), AnalyzeOptions(backend="neuron", target="trn2"))
    assert [(m.op, m.predicted, m.observed) for m in report.prediction_diff.predicted_ok_observed_failing] == [
        ("aten::cumsum", Verdict.LOWERED, Verdict.CPU_FALLBACK)
    ]
    assert report.backend.compiled_graphs and report.backend.compiled_graphs[0].compile_seconds == 0.0  # no recorded time: 0, not made up


def test_metrics_rows_read_the_sources_fields_by_name():
    from dataclasses import dataclass

    @dataclass
    class NeuronCompilationMetrics:  # the shape of torch_neuronx/neuron_dynamo_backend/metrics.py@5577a2d8
        graph_id: str
        graph_name: str = ""
        model_name: str = ""
        has_collectives: bool = False
        graph_node_count: int = 0
        timestamp: str = ""
        torch_neuronx_fx_passes_us: int = 0
        torch_neuronx_lower_us: int = 0
        torch_neuronx_compile_us: int = 0
        added_in_a_later_release: int = 7

    rows = dynamo_metrics_rows([NeuronCompilationMetrics("k", "m_0_inference_0", "m", True, 12, "3", 250_000, 1_000_000, 30_000_000)])
    assert [CompiledGraph(**r) for r in rows] == [CompiledGraph("m_0_inference_0", 12, True, 0.25, 1.0, 30.0)]
    assert CompiledGraph(**rows[0]).seconds == 31.25
    assert dynamo_metrics_rows([NeuronCompilationMetrics("only-the-key")])[0]["name"] == "only-the-key"
    assert asdict(CompiledGraph()) == {"name": "", "nodes": 0, "has_collectives": False, "fx_passes_seconds": 0.0, "lower_seconds": 0.0, "compile_seconds": 0.0}
