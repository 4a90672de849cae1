"""A graph break is never silent (issue 23): each is a finding at its line with its cause and verdict,
ops dynamo ran between graphs say so, and the top line never reads "runs on Neuron as it is" next to a
break, a host read or a second device graph. MoE routing through nonzero is a dynamic_shape finding at its
transformers line (switch_transformers, nllb-moe), now that the fake strategy survives ``module.to()``."""

from __future__ import annotations

import inspect
import os
from pathlib import Path

from helpers import MODELS, expectations

from neuronprobe.analysis import PYTHON_BREAK_RULE, AnalyzeOptions, analyze_spec
from neuronprobe.report.model import CaptureInfo, Report, Summary, TrainInfo
from neuronprobe.vocabulary import CaptureStrategy, TopVerdict, Verdict

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _analyse(spec: str, overrides: list[str] | None = None) -> Report:
    return analyze_spec(spec, AnalyzeOptions(backend="static", overrides=overrides or []))


def _marker(name: str) -> tuple[str, int]:
    (line, _, _), *_ = expectations(MODELS / name)
    return f"tests/models/{name}", line


def test_a_break_on_python_dynamo_cannot_follow_is_a_finding_at_its_line():
    report = _analyse(str(MODELS / "graph_break_python.py"))
    file, line = _marker("graph_break_python.py")
    assert [(b.file, b.line) for b in report.graph_breaks] == [(file, line)]
    hits = [f for f in report.findings if f.rule == PYTHON_BREAK_RULE]
    assert [(f.verdict, f.file, f.line) for f in hits] == [(Verdict.CPU_FALLBACK, file, line)]
    assert "TypeError" in hits[0].message and "Python the graph capture cannot follow" in hits[0].message
    assert report.summary.graph_breaks == 2 and report.verdict is not TopVerdict.RUNS


def test_routing_dynamo_ran_between_graphs_is_a_dynamic_shape_finding_that_says_so():
    report = _analyse(str(MODELS / "routing_break.py"))
    file, line = _marker("routing_break.py")
    routing = [f for f in report.findings if f.op == "aten::nonzero"]
    assert [(f.verdict, f.file, f.line, f.rule) for f in routing] == [(Verdict.DYNAMIC_SHAPE, file, line, "dynamic-output-shape")]
    assert "in no captured graph" in routing[0].message and "an op whose output size depends on tensor data" in routing[0].message
    assert "aten::nonzero" not in {r.op for r in report.ops}  # it really ran outside the captured graphs
    assert report.verdict is TopVerdict.WILL_NOT_COMPILE


def test_the_fake_strategy_survives_a_module_converting_itself_in_forward():
    report = _analyse(str(MODELS / "fake_module_to.py"))
    file, line = _marker("fake_module_to.py")
    assert report.capture.strategy is CaptureStrategy.FAKE, [r.reason for r in report.capture.strategy_reasons]
    assert [(f.op, f.verdict, f.file, f.line) for f in report.findings] == [("aten::nonzero", Verdict.DYNAMIC_SHAPE, file, line)]


def test_the_top_line_never_says_it_runs_as_it_is_next_to_a_break_a_host_read_or_a_second_graph():
    def top(summary: Summary, train: TrainInfo | None = None) -> TopVerdict:
        return Report(model="m", target="trn1", summary=summary, capture=CaptureInfo(method="dynamo", nodes=3), train=train).verdict

    assert top(Summary()) is TopVerdict.RUNS
    assert top(Summary(graph_breaks=1)) is TopVerdict.RUNS_SPLIT
    assert top(Summary(device_graphs=2)) is TopVerdict.RUNS_SPLIT
    assert top(Summary(), TrainInfo(host_syncs_per_step=1)) is TopVerdict.RUNS_SPLIT
    split = Report(model="m", target="trn1", summary=Summary(graph_breaks=3), capture=CaptureInfo(method="dynamo", nodes=3))
    assert split.splits_per_call() == ["3 graph break(s)"]
    assert split.to_dict()["verdict_words"] != TopVerdict.RUNS.words


def _routing_line(module: object) -> tuple[str, int]:
    """The modeling file and the line of ``expert_hit = ....nonzero()`` in the installed transformers."""
    path = inspect.getsourcefile(module)  # type: ignore[arg-type]
    assert path is not None
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return path, next(i for i, text in enumerate(lines, 1) if "expert_hit" in text and ".nonzero()" in text)


def _assert_routing_found(report: Report, module: object) -> None:
    path, line = _routing_line(module)
    routing = [f for f in report.findings if f.op == "aten::nonzero" and f.line == line]
    assert routing, [(f.op, f.file, f.line) for f in report.findings]
    assert routing[0].verdict is Verdict.DYNAMIC_SHAPE and os.path.samefile(routing[0].file, path)
    assert report.verdict is TopVerdict.WILL_NOT_COMPILE


def test_switch_transformers_routing_is_a_dynamic_shape_finding_at_its_transformers_line():
    from transformers.models.switch_transformers import modeling_switch_transformers

    overrides = ["num_layers=2", "num_decoder_layers=2", "num_sparse_encoder_layers=1", "num_sparse_decoder_layers=1"]
    report = _analyse("hf:switch_transformers", overrides)
    _assert_routing_found(report, modeling_switch_transformers)
    assert "Cannot swap" not in " ".join(r.reason for r in report.capture.strategy_reasons)


def test_nllb_moe_routing_is_a_dynamic_shape_finding_at_its_transformers_line():
    from transformers.models.nllb_moe import modeling_nllb_moe

    overrides = ["encoder_layers=1", "decoder_layers=1", "encoder_sparse_step=1", "decoder_sparse_step=1", "num_experts=4"]
    report = _analyse("hf:nllb-moe", overrides)
    _assert_routing_found(report, modeling_nllb_moe)
