"""The native-cpu backend (issue 36.5): TorchNeuron's eager dispatch played on the CPU, observed at the user's line."""

from __future__ import annotations

import inspect
import time

import pytest
import torch
from helpers import MODELS, marker_line, refused

import neuronprobe
from neuronprobe.backends import BACKEND_CHOICES
from neuronprobe.backends.native_cpu import findings_of
from neuronprobe.vocabulary import Origin, Verdict

SORT = MODELS / "native_sort.py"
HASH = MODELS / "native_hash_ids.py"
HANG = MODELS / "native_stand_in_hang.py"


@pytest.fixture(autouse=True)
def bundled_table(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))


def _observed(report):
    return [f for f in report.findings if f.origin == Origin.OBSERVED]


def test_a_fallback_inside_a_composite_op_is_observed_at_the_users_line():
    report = neuronprobe.analyze(str(SORT), target="trn2", backend="native-cpu")
    assert report.backend.name == "native-cpu" and "stand-in" in report.backend.detail
    [seen] = _observed(report)
    # torch.sort -> aten::sort (CompositeExplicitAutograd) -> aten::sort.stable, which reaches the key without a kernel
    assert (seen.rule, seen.verdict, seen.op, seen.line, seen.count) == ("native-no-kernel", Verdict.CPU_FALLBACK, "aten::sort.stable", marker_line(SORT), 1)
    assert seen.bytes_per_call == 64 * 4 + 64 * 4 + 64 * 8  # x in, values (float32) and indices (int64) out: 4x16 each
    assert report.verdict == "runs_with_fallbacks"
    assert report.prediction_diff is not None
    assert not report.prediction_diff.predicted_ok_observed_failing


def test_int64_values_that_wrap_are_seen_with_the_real_inputs():
    static = neuronprobe.analyze(str(HASH), target="trn2", backend="static")
    observed = neuronprobe.analyze(str(HASH), target="trn2", backend="native-cpu")
    assert static.findings == []  # no constant is beyond int32: the static answer cannot see it
    [seen] = _observed(observed)
    assert (seen.rule, seen.verdict, seen.line) == ("native-int64-range", Verdict.PRECISION, marker_line(HASH))
    assert "beyond int32's range (largest 123456370368)" in seen.message


def test_findings_group_calls_by_rule_and_line_and_keep_the_worst_verdict_per_op():
    call = {"op": "aten::cumprod", "verdict": "cpu_fallback", "rule": "native-no-kernel", "reason": "r", "fix": "f", "file": None, "line": 3, "bytes": 8}
    ok = {**call, "op": "aten::add.Tensor", "verdict": "lowered", "rule": "native-kernel", "bytes": 0}
    findings, verdicts = findings_of([call, {**call, "bytes": 16}, ok])
    [f] = findings
    # bytes per forward, every call of the line (as the static finding counts them), not per call
    assert (f.count, f.bytes_per_call, f.line) == (2, 24, 3)
    assert verdicts == {"aten::cumprod": "cpu_fallback", "aten::add.Tensor": "lowered"}


def test_a_forward_that_hangs_on_the_stand_in_is_killed_at_the_timeout(tmp_path):
    start = time.monotonic()
    line = refused(["analyze", str(HANG), "--target", "trn2", "--backend", "native-cpu", "--op-timeout", "3", "--timeout", "120", "-o", str(tmp_path)], HANG)
    assert time.monotonic() - start < 60
    assert "did not finish on the stand-in" in line and "(timeout)" in line and "--op-timeout 3 s" in line
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--target", "trn1", "--backend", "native-cpu"], "use it with --stack native"),
        (["--target", "trn2", "--backend", "native-cpu", "--native-mode", "compile"], "not torch.compile graphs"),
    ],
)
def test_native_cpu_outside_native_eager_is_refused(args, needle, tmp_path):
    line = refused(["analyze", str(SORT), "-o", str(tmp_path), *args], SORT)
    assert needle in line


def test_native_cpu_is_a_backend_choice():
    assert "native-cpu" in BACKEND_CHOICES


def test_an_eager_only_path_the_capture_never_sees_is_observed():
    path = MODELS / "native_eager_only_path.py"
    static = neuronprobe.analyze(str(path), target="trn2", backend="static")
    observed = neuronprobe.analyze(str(path), target="trn2", backend="native-cpu")
    assert not [f for f in static.findings if "cumprod" in f.op]
    seen = [f for f in _observed(observed) if f.verdict is Verdict.CPU_FALLBACK]
    assert [(f.op, f.rule, f.line) for f in seen] == [("aten::cumprod", "native-no-kernel", marker_line(path))]
    assert observed.verdict == "runs_with_fallbacks" and static.verdict == "runs"


def test_a_kernel_torch_picks_for_cpu_tensors_is_a_limitation_not_a_fallback():
    report = neuronprobe.analyze(str(MODELS / "native_sdpa.py"), target="trn2", backend="native-cpu")
    assert [f for f in _observed(report) if f.verdict.is_problem] == []
    [limit] = [n for n in report.not_analysed if n.what == "native-cpu backend: CPU kernel choices"]
    assert "aten::_scaled_dot_product_flash_attention_for_cpu" in limit.why


def test_a_composite_implicit_op_the_mode_sees_is_decomposed_into_what_reaches_the_device():
    # tiny_gpt slices with narrow (CompositeImplicitAutograd, yet seen by dispatch modes): its parts run on the device
    report = neuronprobe.analyze(str(MODELS.parent.parent / "examples" / "tiny_gpt.py"), target="trn2", backend="native-cpu")
    observed = {(f.rule, f.op) for f in _observed(report) if f.verdict is Verdict.CPU_FALLBACK}
    # predicted at the same lines: merged into the observed findings, both origins kept (issue 33.5)
    predicted = {f.op for f in report.findings if Origin.PREDICTED in (f.origins or [f.origin]) and f.verdict is Verdict.CPU_FALLBACK}
    assert ("native-no-kernel", "aten::narrow") not in observed
    assert {"aten::_unique2", "aten::log1p"} <= {op for _, op in observed} and {"aten::_unique2", "aten::log1p"} <= predicted
    assert not report.prediction_diff.predicted_ok_observed_failing and not report.prediction_diff.predicted_failing_observed_ok


class _Cumulative(torch.nn.Module):
    def forward(self, x):
        return torch.cumprod(x, 0) + 1  # the observed line


def test_a_module_object_of_the_python_api_is_observed_at_its_own_line_not_the_workers():
    report = neuronprobe.analyze(_Cumulative(), (torch.randn(3, 4),), target="trn2", backend="native-cpu")
    [seen] = _observed(report)
    _, start = inspect.getsourcelines(_Cumulative.forward)
    assert (seen.op, seen.line) == ("aten::cumprod", start + 1)
    assert seen.file is not None and seen.file.endswith("test_native_cpu.py")


# --- issue 36.5: auto, torch.compile graphs, 'neuron' devices, training, the prediction diff ---------------------

COMPILED = MODELS / "native_compiled_submodule.py"
DEVICES = MODELS / "native_device_strings.py"
DIFFERS = MODELS / "native_eager_differs.py"
TRAIN = MODELS / "native_train_cumprod.py"


def _auto_limitation(report):
    return [n.why for n in report.not_analysed if n.what == "native-cpu backend (auto)"]


def test_auto_on_the_native_stack_observes_on_the_stand_in():
    report = neuronprobe.analyze(str(SORT), target="trn2", backend="auto")
    assert report.backend.name == "native-cpu" and _auto_limitation(report) == []
    [seen] = [f for f in report.findings if Origin.OBSERVED in f.origins]
    assert (seen.op, seen.line, seen.origins) == ("aten::sort.stable", marker_line(SORT), [Origin.PREDICTED, Origin.OBSERVED])


def test_auto_on_the_xla_stack_never_picks_the_stand_in():
    report = neuronprobe.analyze(str(SORT), target="trn1", backend="auto")
    assert report.backend.name != "native-cpu"


def test_auto_stays_static_with_the_reason_under_native_mode_compile():
    needle = "observes eager dispatch, and --native-mode compile"
    report = neuronprobe.analyze(str(SORT), target="trn2", backend="auto", native_mode="compile")
    assert report.backend.name == "static" and "auto: native-cpu not used" in report.backend.detail
    [why] = _auto_limitation(report)
    assert needle in why and "the findings are the static table's predictions" in why
    assert all(f.origins == [Origin.PREDICTED] for f in report.findings) and report.findings


def test_auto_stays_static_over_the_memory_budget_and_for_weightless_models():
    from types import SimpleNamespace

    from neuronprobe.backends.native_cpu import choose

    model = SimpleNamespace(on_meta=False, source="m.py")
    assert choose(model, [], max_memory=2**40, native_mode=None).observe
    over = choose(model, [], max_memory=2**20, native_mode=None)
    assert not over.observe and "over 85% of --max-memory 1MiB" in over.reason
    # --train: the weights' gradients and two optimizer states are new in the worker (3 x 1 GiB of float32 here)
    big = SimpleNamespace(on_meta=False, source="m.py", module=torch.nn.Linear(2**14, 2**14, bias=False, device="meta"))
    from neuronprobe.backends.xla_auto import HEADROOM, resident_bytes
    from neuronprobe.formatting import format_memory

    # 85% of the budget: room for this process (whatever the tests before it left in this worker) and 1 GiB more,
    # not for the 3 GiB that --train adds
    budget = int((resident_bytes() + 2**30) / HEADROOM)
    assert choose(big, [], max_memory=budget, native_mode=None).observe
    trained = choose(big, [], max_memory=budget, native_mode=None, train=True)
    assert not trained.observe and f"over 85% of --max-memory {format_memory(budget)}" in trained.reason
    meta = choose(SimpleNamespace(on_meta=True, source="hf:llama"), [], max_memory=2**40, native_mode=None)
    assert not meta.observe and "hf:llama has no weights here" in meta.reason


def test_auto_keeps_the_static_report_when_the_observation_fails(tmp_path):
    from neuronprobe.analysis import AnalyzeOptions, analyze_spec

    report = analyze_spec(str(HANG), AnalyzeOptions(backend="auto", target="trn2", op_timeout=3))
    assert report.backend.name == "static"
    [why] = _auto_limitation(report)
    assert "its observation failed" in why and "did not finish on the stand-in" in why and "the static analysis stands" in why


def test_a_fallback_inside_a_torch_compile_neuron_graph_is_observed_at_the_users_line():
    static = neuronprobe.analyze(str(COMPILED), target="trn2", backend="static")
    assert [(f.op, f.line) for f in static.findings] == [("aten::sort", marker_line(COMPILED))]
    report = neuronprobe.analyze(str(COMPILED), target="trn2", backend="native-cpu")
    [seen] = report.findings
    assert (seen.op, seen.verdict, seen.line, seen.origins) == (
        "aten::sort.stable",
        Verdict.CPU_FALLBACK,
        marker_line(COMPILED),
        [Origin.PREDICTED, Origin.OBSERVED],
    )
    assert seen.file.endswith("native_compiled_submodule.py")
    assert not report.prediction_diff.predicted_ok_observed_failing and not report.prediction_diff.predicted_failing_observed_ok


def test_neuron_device_strings_name_the_stand_in():
    from neuronprobe.backends.native_cpu import NativeCpuBackend
    from neuronprobe.loaders.resolve import load_model_file

    loaded = load_model_file(DEVICES)
    observation = NativeCpuBackend().observe(loaded, "trn2", timeout=120, op_timeout=120)
    [seen] = [f for f in observation.findings if f.verdict is Verdict.CPU_FALLBACK]
    assert (seen.op, seen.line) == ("aten::sort.stable", marker_line(DEVICES))
    # x.to("neuron") and arange(device="neuron") ran on the stand-in as device ops (a Neuron kernel each)
    assert (observation.op_verdicts["aten::_to_copy"], observation.op_verdicts["aten::arange"]) == ("lowered", "lowered")
    assert "'neuron' devices are the CPU" in observation.limitations[-1].why
    assert torch._C._get_privateuse1_backend_name() == "privateuseone"  # renamed in the worker only


def test_on_cpu_maps_only_neuron_devices():
    from neuronprobe._torch.neuron_device import on_cpu

    assert on_cpu("neuron") == "cpu" and on_cpu("neuron:1") == "cpu" and on_cpu("neuronx") == "neuronx"
    assert on_cpu(torch.device("cpu")) == torch.device("cpu") and on_cpu(3) == 3 and on_cpu(["neuron", 1]) == ["cpu", 1]


def test_static_and_observed_disagree_both_ways_at_their_lines():
    report = neuronprobe.analyze(str(DIFFERS), target="trn2", backend="native-cpu")
    line_a, line_b = (m[0] for m in __import__("helpers").expectations(DIFFERS))
    diff = report.prediction_diff
    assert [(m.op, m.predicted, m.observed, m.line) for m in diff.predicted_ok_observed_failing] == [
        ("aten::cumprod", Verdict.LOWERED, Verdict.CPU_FALLBACK, line_a)
    ]
    assert "the table predicted aten::cumsum on this line to be fine" in diff.predicted_ok_observed_failing[0].detail
    assert [(m.op, m.predicted, m.observed, m.line) for m in diff.predicted_failing_observed_ok] == [
        ("aten::cumprod", Verdict.CPU_FALLBACK, Verdict.LOWERED, line_b)
    ]
    assert "the native-cpu stand-in ran every op of this line on the device" in diff.predicted_failing_observed_ok[0].detail


def test_the_training_step_runs_on_the_stand_in_and_backward_fallbacks_keep_their_phase():
    from neuronprobe.backends import TRAINING_STEP_LIMITATION
    from neuronprobe.vocabulary import Phase

    static = neuronprobe.analyze(str(TRAIN), target="trn2", backend="static", train=True)
    report = neuronprobe.analyze(str(TRAIN), target="trn2", backend="native-cpu", train=True)
    assert not [n for n in report.not_analysed if n.what == TRAINING_STEP_LIMITATION]
    rows = sorted((f.op, f.line, str(f.phase), tuple(f.origins)) for f in report.findings)
    both = (Origin.PREDICTED, Origin.OBSERVED)
    assert rows == [("aten::cumprod", marker_line(TRAIN), str(Phase.BACKWARD), both), ("aten::cumprod", marker_line(TRAIN), str(Phase.FORWARD), both)]
    # summarize() counts a finding that both origins found once: the observed step moves the bytes the static one predicts
    assert report.summary.fallback_bytes_per_call == static.summary.fallback_bytes_per_call == 2 * 512


def test_bytes_of_an_observed_only_line_are_per_forward():
    report = neuronprobe.analyze(str(MODELS / "native_eager_only_path.py"), target="trn2", backend="native-cpu")
    [seen] = [f for f in report.findings if f.verdict is Verdict.CPU_FALLBACK]
    assert seen.origins == [Origin.OBSERVED] and report.summary.fallback_bytes_per_call == seen.bytes_per_call == 2 * 8 * 4 * 2


def test_the_neuron_compile_name_is_lent_for_the_analysis_only(monkeypatch):
    import torch._dynamo
    from torch._dynamo.backends import registry

    # as a user without TorchNeuron has torch: an earlier test's fake TorchNeuron registered the name in this process
    monkeypatch.setattr(registry, "_COMPILER_FNS", {k: v for k, v in registry._COMPILER_FNS.items() if k != "neuron"})
    monkeypatch.setattr(registry, "_BACKENDS", {k: v for k, v in registry._BACKENDS.items() if k != "neuron"})
    neuronprobe.analyze(str(COMPILED), target="trn2", backend="static")
    assert "neuron" not in torch._dynamo.list_backends(exclude_tags=())  # the user's process is left as it was
    with pytest.raises(Exception, match="neuron"):
        torch.compile(torch.nn.Linear(2, 2), backend="neuron")


@pytest.mark.parametrize("name", ["_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_efficient_attention"])
def test_a_kernel_a_cpu_capture_picks_is_not_a_predicted_fallback_either(name):
    """What the stand-in names as a limitation, the static answer does not call a fallback (the zoo tier's hf: captures
    record torch's CPU flash kernel in 10 types; it was predicted as a native CPU fallback)."""
    from neuronprobe.capture.graph import OpCall
    from neuronprobe.support.native.classify import classify_native
    from neuronprobe.support.native.table import native_table

    verdict = classify_native(OpCall(index=0, namespace="aten", name=name, overload="default"), native_table(None))
    assert (verdict.verdict, verdict.rule) == (Verdict.DECOMPOSED, "native-device-artifact")
    assert "scaled_dot_product_attention" in verdict.reason
