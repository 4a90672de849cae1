"""torch.compile(backend="neuron") on the native stack (issue 36.4): --native-mode compile, its recompiles, breaks and failing graphs."""

from __future__ import annotations

import json

import pytest
from helpers import MODELS, marker_line, refused
from typer.testing import CliRunner

import neuronprobe
from neuronprobe.cli import app
from neuronprobe.errors import InputError
from neuronprobe.rules import bundled_registry
from neuronprobe.support.native.compile import EAGER_GRAPH_RULE, FALLBACK_ENV, NO_LOWERING_RULE, fallback_execution_disabled
from neuronprobe.vocabulary import Verdict

SORT = MODELS / "native_sort.py"
BREAK = MODELS / "native_compile_break.py"
BATCHES = MODELS / "native_compile_batches.py"


@pytest.fixture(autouse=True)
def bundled_table_and_default_env(tmp_path, monkeypatch):
    """The bundled native table answers, and the fallback-execution switch is at its default."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(FALLBACK_ENV, raising=False)


def _analyze(path, mode):
    return neuronprobe.analyze(str(path), backend="static", target="trn2", native_mode=mode)


def test_an_op_without_a_lowering_fails_its_graph_compile_under_the_default(monkeypatch):
    eager = _analyze(SORT, "eager")
    compiled = _analyze(SORT, "compile")
    line = marker_line(SORT)
    assert [(f.rule, f.verdict, f.line) for f in eager.findings] == [("native-composite-part", Verdict.CPU_FALLBACK, line)]
    assert eager.verdict == "runs_with_fallbacks"
    [finding] = compiled.findings
    assert (finding.rule, finding.verdict, finding.line, finding.op) == (NO_LOWERING_RULE, Verdict.COMPILE_ERROR, line, "aten::sort")
    assert "fails to compile" in finding.message and "the call raises" in finding.message
    assert f"{FALLBACK_ENV}=0" in finding.fix
    assert compiled.verdict == "will_not_compile"
    assert (eager.support_table.mode, compiled.support_table.mode) == ("eager", "compile")


def test_fallback_execution_off_runs_the_failing_graph_eagerly(monkeypatch):
    monkeypatch.setenv(FALLBACK_ENV, "0")
    report = _analyze(SORT, "compile")
    [finding] = report.findings
    assert (finding.rule, finding.verdict, finding.line) == (EAGER_GRAPH_RULE, Verdict.CPU_FALLBACK, marker_line(SORT))
    assert finding.bytes_per_call > 0  # the op itself still crosses to the host
    assert report.verdict == "runs_with_fallbacks"


@pytest.mark.parametrize(("value", "disabled"), [(None, True), ("1", True), ("true", True), ("0", False), ("False", False)])
def test_the_fallback_execution_switch_reads_as_documented(value, disabled):
    assert fallback_execution_disabled({} if value is None else {FALLBACK_ENV: value}) is disabled


def test_a_bad_fallback_execution_value_is_refused_before_the_model_runs(monkeypatch, tmp_path):
    monkeypatch.setenv(FALLBACK_ENV, "maybe")
    with pytest.raises(InputError, match=FALLBACK_ENV):
        fallback_execution_disabled({FALLBACK_ENV: "maybe"})
    line = refused(["analyze", str(SORT), "--target", "trn2", "--native-mode", "compile", "-o", str(tmp_path)], SORT)
    assert FALLBACK_ENV in line
    assert not list(tmp_path.iterdir())


def test_a_graph_break_says_that_fullgraph_raises_there_only_when_compiled():
    eager = _analyze(BREAK, "eager")
    compiled = _analyze(BREAK, "compile")
    line = marker_line(BREAK)
    assert [(f.rule, f.line) for f in compiled.findings] == [("graph-break-python", line)] == [(f.rule, f.line) for f in eager.findings]
    assert "fullgraph=True" in compiled.findings[0].message and "this break raises" in compiled.findings[0].message
    assert "fullgraph=True" not in eager.findings[0].message
    assert compiled.summary.graph_breaks == 1


def test_every_signature_is_a_graph_when_compiled_no_dynamic_batch():
    eager = _analyze(BATCHES, "eager").recompiles
    compiled = _analyze(BATCHES, "compile").recompiles
    # (1,8) (2,8) (4,8) (1,16) (2,16): five signatures; freeing the batch would leave two lengths.
    assert compiled.distinct_signatures == 5
    assert (eager.predicted["static"].graphs, eager.predicted["dynamic_batch"].graphs) == (5, 2)
    assert (compiled.predicted["static"].graphs, compiled.predicted["dynamic_batch"].graphs) == (5, 5)
    assert "rejects dynamic=True" in compiled.predicted["dynamic_batch"].note
    batch = next(c for c in compiled.causes if c.dim == 0)
    assert "pad the batch up" in batch.fix and "dynamic_batch" not in batch.fix
    assert "bucketed" in compiled.predicted  # bucket advice stays, as on the XLA stack


def test_the_cli_takes_native_mode_and_keeps_it_in_the_report(tmp_path):
    result = CliRunner().invoke(
        app, ["analyze", str(SORT), "--target", "trn2", "--backend", "static", "--native-mode", "compile", "-o", str(tmp_path), "--no-html"]
    )
    assert result.exit_code == 0, result.output  # a verdict, not a gate
    assert "stack native (compile)" in result.output and "(TorchNeuron torch.compile)" in result.output
    saved = json.loads((tmp_path / "native_sort.json").read_text())
    assert saved["support_table"]["mode"] == "compile"
    assert [f["rule"] for f in saved["findings"]] == [NO_LOWERING_RULE]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--target", "trn1", "--native-mode", "compile"], "use it with --stack native"),
        (["--target", "trn2", "--native-mode", "jit"], "--native-mode 'jit': use eager or compile"),
    ],
)
def test_bad_native_modes_exit_2(args, needle, tmp_path):
    line = refused(["analyze", str(SORT), "-o", str(tmp_path), *args], SORT)
    assert needle in line


def test_the_compile_rules_are_registered_with_provenance():
    rules = bundled_registry()
    for rule_id, verdict in ((NO_LOWERING_RULE, Verdict.COMPILE_ERROR), (EAGER_GRAPH_RULE, Verdict.CPU_FALLBACK)):
        rule = rules.get(rule_id)
        assert rule.verdict == verdict
        assert "torch/reference/env-vars" in rule.provenance


def test_a_float64_cast_stays_on_the_device_when_compiled_an_int64_cast_does_not():
    path = MODELS / "native_double_cast.py"
    line = marker_line(path)
    eager = _analyze(path, "eager")
    compiled = _analyze(path, "compile")
    assert {(f.rule, f.line) for f in eager.findings if f.verdict is Verdict.CPU_FALLBACK} == {("native-64bit-cast", line), ("native-64bit-cast", line + 1)}
    assert [(f.rule, f.verdict, f.line) for f in compiled.findings] == [
        ("native-float64", Verdict.PRECISION, line),
        ("native-float64", Verdict.PRECISION, line + 1),
    ]
    assert "dtype-conversion pass" in compiled.findings[0].message
    assert compiled.verdict == "runs" and eager.verdict == "runs_with_fallbacks"
    loop = _analyze(MODELS / "native_cast_loop.py", "compile")  # int64 casts keep their eager verdict
    assert {f.rule for f in loop.findings} == {"native-64bit-cast"}
