"""Reading what the Neuron SDK says: analyze's dict, compiler logs, call sites, the cache env, the diff.

The inputs are the documented formats (torch_neuronx.analyze docs and source,
neuronx-cc error catalogue, issues quoting real errors), not the fake's output.
"""

from __future__ import annotations

import os

import pytest

from neuronprobe.analysis import prediction_diff
from neuronprobe.backends.neuron import (
    _Builder,
    apply_analyze,
    call_site,
    isolated_cache_env,
    op_in_message,
    parse_analyze_report,
    parse_compiler_log,
    parse_support_percentage,
)
from neuronprobe.process.isolation import StepResult
from neuronprobe.report.model import Finding, OpSummary, Report
from neuronprobe.vocabulary import StepStatus

# The docs' example for a model whose only op fails (torch.fft.fft).
FFT_REPORT = {
    "torch_neuronx_version": "1.13.0.1.5.0",
    "neuronx_cc_version": "2.0.0.11796a0+24a26e112",
    "support_percentage": "0.00%",
    "supported_operators": {},
    "unsupported_operators": [
        {
            "kind": "aten::fft_fft",
            "failureAt": "neuronx-cc",
            "call": "test.py(6): fft\n/opt/venv/lib/python3.10/site-packages/torch_neuronx/xla_impl/analyze.py(35): forward\n"
            "/opt/venv/lib/python3.10/site-packages/torch/nn/modules/module.py(1182): _slow_forward\ntest.py(11): <module>\n",
            "opGraph": "graph(%x : Long(4, strides=[1], requires_grad=0, device=cpu)):\n  %neuron_7 = aten::fft_fft(%x)\n  return (%neuron_7)\n",
        }
    ],
}
MLP_REPORT = {
    "torch_neuronx_version": "1.13.0.1.5.0",
    "neuronx_cc_version": "2.0.0.11796a0+24a26e112",
    "support_percentage": "100.00%",
    "supported_operators": {"aten::linear": 3, "aten::relu": 2, "aten::log_softmax": 1},
    "unsupported_operators": [],
}


def test_support_percentage_is_read_from_its_string_form():
    assert parse_support_percentage("66.67%") == 66.67
    assert parse_support_percentage("100.00%") == 100.0
    assert parse_support_percentage("n/a") is None


def test_a_fully_supported_report_gives_lowered_verdicts_and_no_findings():
    builder = _Builder(model_file="mlp.py")
    apply_analyze(builder, MLP_REPORT)
    assert builder.op_verdicts == {"aten::linear": "lowered", "aten::relu": "lowered", "aten::log_softmax": "lowered"}
    assert builder.findings == []
    assert builder.support_percentage == 100.0


def test_an_unsupported_op_becomes_an_observed_finding_at_the_users_line():
    builder = _Builder(model_file="test.py")
    apply_analyze(builder, FFT_REPORT)
    (finding,) = builder.findings
    assert (finding.op, finding.verdict, finding.origin) == ("aten::fft_fft", "compile_error", "observed")
    assert (finding.file, finding.line) == ("test.py", 6)  # the innermost frame outside torch/torch_neuronx
    assert "failed at neuronx-cc" in finding.message
    assert builder.op_verdicts == {"aten::fft_fft": "compile_error"}


def test_lowering_to_hlo_failures_are_cpu_fallbacks():
    report = dict(FFT_REPORT, unsupported_operators=[dict(FFT_REPORT["unsupported_operators"][0], failureAt="Lowering to HLO")])
    builder = _Builder(model_file=None)
    apply_analyze(builder, report)
    assert builder.op_verdicts == {"aten::fft_fft": "cpu_fallback"}


def test_a_report_that_is_not_the_documented_dict_is_a_limitation_not_a_crash():
    builder = _Builder(model_file=None)
    apply_analyze(builder, ["not", "a", "dict"])
    assert builder.findings == [] and "not a dict" in builder.limitations[0].why
    with pytest.raises(ValueError):
        parse_analyze_report({"supported_operators": [], "unsupported_operators": {}})


def test_call_site_skips_library_frames_and_keeps_paths_relative(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = tmp_path / "models" / "net.py"
    call = (
        f"/usr/lib/python3/site-packages/torch/nn/functional.py(2987): layer_norm\n{model}(14): forward\n"
        "/usr/lib/python3/site-packages/torch/nn/modules/module.py(1768): _slow_forward\n"
    )
    assert call_site(call) == (os.path.join("models", "net.py"), 14)
    assert call_site("") == (None, None)


def test_compiler_log_gives_ncc_codes_and_the_exit_status():
    log = (
        "2024-01-01 12:00:00.000000:  123  INFO ||NEURON_CC_WRAPPER||: Call compiler with cmd: neuronx-cc compile ...\n"
        "[NCC_EVRF029] Operation sort is not supported on trn2. Use supported equivalent operation like TopK\n"
        "[XTP003] Number of instructions (10046893) is over the threshold (5000000).\n"
        "[NCC_EVRF029] Operation sort is not supported on trn2. Use supported equivalent operation like TopK\n"
    )
    parsed = parse_compiler_log(log, "RuntimeError: neuronx-cc failed with 1")
    assert [code for code, _ in parsed.diagnostics] == ["NCC_EVRF029", "XTP003"]
    assert parsed.status == 1
    training = parse_compiler_log(
        "",
        "RuntimeError: Bad StatusOr access: INTERNAL: RunNeuronCCImpl: error condition error != 0: "
        "<class 'subprocess.CalledProcessError'>: Command '...' returned non-zero exit status 70.",
    )
    assert training.status == 70 and training.diagnostics == []


def test_a_diagnostic_is_tied_to_the_op_it_names():
    vocabulary = ["aten::sort", "aten::topk", "aten::linear"]
    assert op_in_message("Operation sort is not supported on trn2. Use supported equivalent operation like TopK", vocabulary) == "aten::sort"
    assert op_in_message("Unsupported in aten::fft_rfft lowering", vocabulary) == "aten::fft_rfft"
    assert op_in_message("Size of total input and output tensors exceeds HBM limit", vocabulary) is None


def test_compile_failure_without_an_op_is_one_whole_graph_finding():
    builder = _Builder(model_file="model.py")
    failure = StepResult(
        StepStatus.FAILED,
        error="RuntimeError: neuronx-cc failed with 1",
        log="[NCC_EVRF009] Size of total input and output tensors exceeds HBM limit of Trn1\n",
    )
    builder.compile_failure("trace", failure, "torch_neuronx.trace")
    (finding,) = builder.findings
    assert (finding.op, finding.verdict, finding.ncc_code, finding.file) == ("<neuronx-cc>", "compile_error", "NCC_EVRF009", "model.py")
    assert "exit status 1" in finding.message and "HBM limit" in finding.message


def test_the_temporary_cache_replaces_a_users_cache_dir_flag(tmp_path):
    env = isolated_cache_env(tmp_path, {"NEURON_CC_FLAGS": "--model-type=transformer --cache_dir=/home/me/cache -O1"})
    assert env["NEURON_COMPILE_CACHE_URL"] == str(tmp_path)
    assert env["NEURON_CC_FLAGS"] == f"--model-type=transformer -O1 --cache_dir={tmp_path}"
    assert isolated_cache_env(tmp_path, {}) == {"NEURON_COMPILE_CACHE_URL": str(tmp_path), "TORCH_NEURONX_NEFF_CACHE_DIR": str(tmp_path / "native-neff")}


def _report(ops: list[tuple[str, str]], findings: list[Finding] = ()) -> Report:
    return Report(model="m", target="trn1", ops=[OpSummary(op=op, count=1, verdict=v) for op, v in ops], findings=list(findings))


def test_prediction_diff_matches_sdk_names_to_captured_overloads():
    report = _report(
        [("aten::softmax.int", "decomposed"), ("aten::gelu", "lowered"), ("aten::nonzero", "dynamic_shape")],
        [Finding("aten::nonzero", "dynamic_shape", "m.py", 7, None, "", "", "dynamic-output-shape")],
    )
    diff = prediction_diff(report, {"aten::softmax": "compile_error", "aten::gelu": "lowered", "aten::nonzero": "lowered"})
    assert [(m.op, m.predicted, m.observed) for m in diff.predicted_ok_observed_failing] == [("aten::softmax", "decomposed", "compile_error")]
    assert [(m.op, m.predicted, m.observed, m.file, m.line) for m in diff.predicted_failing_observed_ok] == [
        ("aten::nonzero", "dynamic_shape", "lowered", "m.py", 7)
    ]
