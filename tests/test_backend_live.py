"""The live Neuron backend end to end against the fake SDK, through the Python API.

What fails is the fake's fixture (tests/fake_backend/fake_neuron_common.py),
written per test, so the fake can disagree with neuronprobe's support table.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import torch
from helpers import MODELS

import neuronprobe
from neuronprobe.analysis import AnalyzeOptions, analyze_spec
from neuronprobe.backends import resolve_backend
from neuronprobe.loaders.resolve import LoadedModel, load_model
from neuronprobe.report.model import Report

MLP = str(MODELS / "mlp.py")
NONZERO = str(MODELS / "nonzero.py")
# A hang must end at the step's limit, not run on: generous against a loaded CI machine.
HANG_LIMIT_S = 1.5
HANG_WALL_S = 25.0


@pytest.fixture
def fixture_file(tmp_path, monkeypatch):
    """``fixture_file({...})``: the fake SDK's verdicts for this test."""

    def write(data: dict) -> Path:
        path = tmp_path / "fake_fixture.json"
        path.write_text(json.dumps(data), encoding="utf-8")
        monkeypatch.setenv("FAKE_NEURON_FIXTURE", str(path))
        return path

    return write


def _live(spec: str, **options) -> Report:
    return analyze_spec(spec, AnalyzeOptions(backend="neuron", **options))


def _observed(report: Report) -> dict[str, object]:
    return {f.op: f for f in report.findings if f.origin == "observed"}


def test_an_op_predicted_fine_but_rejected_by_the_sdk_appears_in_prediction_diff(fake_sdk, fixture_file):
    fixture_file(
        {
            "analyze_unsupported": {"aten::gelu": "neuronx-cc"},
            "compile_errors": {"aten::gelu": {"code": "NCC_EVRF001", "message": "Operation gelu is not supported on trn1."}},
        }
    )
    report = _live(MLP)
    assert (report.backend.name, report.backend.kind, report.backend.fake) == ("neuron", "xla", True)
    assert report.backend.observed_support_percentage == 80.0  # 4 of 5 analysed ops
    (mismatch,) = report.prediction_diff.predicted_ok_observed_failing
    assert (mismatch.op, mismatch.predicted, mismatch.observed) == ("aten::gelu", "lowered", "compile_error")
    assert mismatch.file == os.path.relpath(MLP) and mismatch.line == 13
    assert "NCC_EVRF001" in mismatch.detail
    gelu = _observed(report)["aten::gelu"]
    assert (gelu.verdict, gelu.ncc_code, gelu.rule) == ("compile_error", "NCC_EVRF001", "observed-analyze")
    assert report.prediction_diff.predicted_failing_observed_ok == []
    # The observed findings and the diff survive the JSON round trip unchanged.
    again = Report.from_json(report.to_json())
    assert again.prediction_diff == report.prediction_diff
    assert [f.origin for f in again.findings] == [f.origin for f in report.findings]


def test_an_op_predicted_failing_but_accepted_by_the_sdk_appears_in_prediction_diff(fake_sdk, fixture_file):
    fixture_file({})  # the fake accepts everything
    report = _live(NONZERO)
    (mismatch,) = report.prediction_diff.predicted_failing_observed_ok
    assert (mismatch.op, mismatch.predicted, mismatch.observed) == ("aten::nonzero", "dynamic_shape", "lowered")
    assert (mismatch.file, mismatch.line) == (os.path.relpath(NONZERO), 7)
    assert report.backend.steps.keys() == {"analyze", "trace", "run"}
    assert all(s.status == "ok" for s in report.backend.steps.values())


def test_a_compiler_failure_becomes_an_observed_compile_error_with_its_ncc_code(fake_sdk, fixture_file):
    fixture_file(
        {
            "compile_errors": {"aten::linear": {"code": "NCC_EVRF009", "message": "Size of total input and output tensors exceeds HBM limit of Trn1"}},
            "compile_status": 1,
        }
    )
    report = _live(MLP)
    assert str(report.backend.steps["trace"]) == "failed: RuntimeError: neuronx-cc failed with 1"
    failure = _observed(report)["<neuronx-cc>"]  # the diagnostic names no op: a whole-graph failure
    assert (failure.verdict, failure.ncc_code, failure.rule) == ("compile_error", "NCC_EVRF009", "observed-trace")
    assert "exit status 1" in failure.message and "HBM limit" in failure.message
    assert failure.file == os.path.relpath(MLP)
    assert report.verdict == "will_not_compile"


def test_a_compiler_hang_hits_the_op_timeout_and_becomes_a_limitation(fake_sdk, fixture_file, tmp_path):
    pid_file = tmp_path / "hung.pid"
    fixture_file({"hang": ["trace"], "hang_pid_file": str(pid_file)})
    started = time.monotonic()
    report = _live(MLP, op_timeout=HANG_LIMIT_S, timeout=60)
    assert time.monotonic() - started < HANG_WALL_S
    assert str(report.backend.steps["trace"]) == "timeout after 1.5s"
    assert report.backend.steps["analyze"].status == "ok" and report.backend.steps["run"].status == "ok"
    (limitation,) = [lim for lim in report.not_analysed if lim.what == "neuron backend: trace"]
    assert "did not finish within 1.5 s" in limitation.why
    _assert_gone(int(pid_file.read_text()))


def test_the_whole_run_timeout_stops_the_remaining_steps(fake_sdk, fixture_file):
    fixture_file({"hang": ["analyze"]})
    report = _live(MLP, op_timeout=600, timeout=HANG_LIMIT_S)
    assert report.backend.steps["analyze"].status == "timeout"
    assert report.backend.steps["trace"].status == "skipped" and report.backend.steps["run"].status == "skipped"
    whats = {lim.what for lim in report.not_analysed}
    assert {"neuron backend: analyze", "neuron backend: trace", "neuron backend: run"} <= whats


def _assert_gone(pid: int) -> None:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    pytest.fail(f"the hung compiler process {pid} is still running")


def test_the_users_compile_cache_is_left_untouched(fake_sdk, fixture_file, tmp_path, monkeypatch):
    fixture_file({})
    user_cache, flag_cache = tmp_path / "user-cache", tmp_path / "flag-cache"
    monkeypatch.setenv("NEURON_COMPILE_CACHE_URL", str(user_cache))
    monkeypatch.setenv("NEURON_CC_FLAGS", f"--cache_dir={flag_cache}")
    live = resolve_backend("neuron").live
    loaded = load_model(MLP)
    observation = live.observe(loaded, "trn1", timeout=60, op_timeout=60)
    assert observation.extra["steps"]["run"].status == "ok"  # the run compiled a lazy graph...
    assert "Analyzing Operator Support..." in observation.compile_log  # the SDK's "Neuron" logger is captured
    assert not user_cache.exists() and not flag_cache.exists()  # ...into a temporary cache
    # Asked to, it compiles through the user's cache (--cache_dir wins over the URL, as in the SDK).
    monkeypatch.setenv("NEURONPROBE_NEURON_CACHE", "user")
    live = resolve_backend("neuron").live
    live.count_compiles(loaded, [loaded.args], timeout=60)
    assert len(list(flag_cache.glob("neuronxcc-*/MODULE_*/model.done"))) == 1
    assert not user_cache.exists()


def test_torch_xla_without_executed_fallback_ops_is_read_from_aten_counters(fake_sdk, fixture_file):
    fixture_file({"fallback_ops": ["aten::gelu"], "executed_fallback_ops": False})
    report = _live(MLP)
    gelu = _observed(report)["aten::gelu"]
    assert (gelu.verdict, gelu.rule) == ("cpu_fallback", "observed-fallback")
    assert "torch-xla aten:: counters" in gelu.message
    assert (gelu.file, gelu.line) == (os.path.relpath(MLP), 13)  # placed at the captured op's line
    (mismatch,) = report.prediction_diff.predicted_ok_observed_failing
    assert (mismatch.op, mismatch.observed) == ("aten::gelu", "cpu_fallback")


def test_keyword_inputs_through_the_python_api(fake_sdk, fixture_file):
    fixture_file({"analyze_unsupported": {"aten::nonzero": "Lowering to HLO"}, "fallback_ops": ["aten::nonzero"]})

    class Masked(torch.nn.Module):
        def forward(self, x, *, scale: float = 1.0):
            return torch.nonzero(x > 0).float().sum() * scale

    report = neuronprobe.analyze(Masked(), {"x": torch.randn(3, 5), "scale": 2.0}, backend="neuron")
    nonzero = _observed(report)["aten::nonzero"]
    assert nonzero.verdict == "cpu_fallback" and nonzero.file == os.path.relpath(__file__)
    assert report.prediction_diff.predicted_ok_observed_failing == []  # both sides say it fails


def test_the_native_torchneuron_backend_reads_fallback_and_executed_ops(fake_native_sdk, fixture_file):
    fixture_file({"fallback_ops": ["aten::nonzero"]})
    report = _live(NONZERO)
    assert (report.backend.kind, report.backend.fake, list(report.backend.steps)) == ("native", True, ["run"])
    nonzero = _observed(report)["aten::nonzero"]
    assert (nonzero.verdict, nonzero.line) == ("cpu_fallback", 7)
    assert "get_fallback_ops()" in nonzero.message
    assert report.prediction_diff.predicted_failing_observed_ok == []
    assert report.prediction_diff.predicted_ok_observed_failing == []


# --- counting real compiles (for the recompile analysis) -----------------------------------------


def test_count_compiles_counts_one_compile_per_distinct_shape(fake_sdk, fixture_file):
    fixture_file({})
    live = resolve_backend("neuron").live
    loaded = load_model(MLP)
    calls = [(torch.randn(2, 16),), (torch.randn(2, 16),), (torch.randn(8, 16),), {"x": torch.randn(8, 16)}]
    observed = live.count_compiles(loaded, calls, timeout=60)
    assert (observed.compiles, observed.shapes_run, observed.source) == (2, 4, "torch_xla")
    assert len(observed.graph_hashes) == 2 and all("+" in h for h in observed.graph_hashes)
    assert "UncachedCompile=2, CachedCompile=2" in observed.note and "test fake" in observed.note


def test_count_compiles_reports_what_it_counted_before_a_timeout(fake_sdk, fixture_file):
    fixture_file({"hang": ["run"]})
    live = resolve_backend("neuron").live
    observed = live.count_compiles(load_model(MLP), [(torch.randn(2, 16),)] * 3, timeout=HANG_LIMIT_S)
    assert (observed.compiles, observed.shapes_run) == (0, 0)
    assert observed.note.startswith("the run stopped after 1.5 s; counted over the first 0 of 3 call(s)")


def test_count_compiles_with_the_native_backend_reads_dynamo_metrics(fake_native_sdk, fixture_file):
    # the recorded NEFF compile times (microseconds, as NeuronCompilationMetrics holds them), one per graph
    fixture_file({"dynamo_compile_us": [1_500_000, 2_250_000]})
    live = resolve_backend("neuron").live
    calls = [(torch.randn(2, 16),), (torch.randn(2, 16),), (torch.randn(4, 16),)]
    observed = live.count_compiles(load_model(MLP), calls, timeout=120)
    assert (observed.compiles, observed.shapes_run, observed.source) == (2, 3, "native-metrics")
    assert observed.graph_hashes == ["GraphModule_0_inference_0", "GraphModule_0_inference_1"]
    assert [g.compile_seconds for g in observed.graphs] == [1.5, 2.25] and all(g.nodes > 0 for g in observed.graphs)
    assert observed.seconds == round(sum(g.seconds for g in observed.graphs), 3) and observed.seconds >= 3.75


def test_count_compiles_materialises_a_model_and_inputs_on_the_meta_device(fake_sdk, fixture_file):
    fixture_file({})
    with torch.device("meta"):
        module = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU())
    loaded = LoadedModel(name="meta", source="<python>", module=module, on_meta=True)
    calls = [(torch.empty(2, 16, device="meta"),), (torch.empty(4, 16, device="meta"),)]
    observed = resolve_backend("neuron").live.count_compiles(loaded, calls, timeout=60)
    assert (observed.compiles, observed.shapes_run) == (2, 2), observed.note
