"""Device errors explained (issue 33.7): a tensor the device refuses is a finding at the line that
registers it, known torch-xla 2.9 defects are named with their source, every fix is the op's own, no
dispatcher dump reaches a message, and no surface (parity included) exits 3 on such a model.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import MODELS, expectations
from typer.testing import CliRunner

from neuronprobe.analysis import AnalyzeOptions, analyze_spec
from neuronprobe.backends.xla_findings import fallback_findings, move_findings, observed_fix
from neuronprobe.cli import app
from neuronprobe.rules import lookup
from neuronprobe.support.error_patterns import ErrorPatternsError, load_error_patterns, parse_error_patterns, quieted

SPARSE = MODELS / "device_sparse_buffer.py"
AMAX = MODELS / "xla_amax_no_dim.py"
AMAX_FAILS = MODELS / "xla_amax_no_dim_fails.py"
runner = CliRunner()
# What torch's dispatcher appends to "Could not run <op> with arguments from the <key> backend."
DISPATCHER_TEXT = ("This could be because the operator", "is only available for these backends", "fburl.com")


def _marker(path: Path, op: str) -> int:
    """The line of the ``# EXPECT``/``# RAISES`` marker naming ``op`` (a marker holds its first word)."""
    return next(line for line, _verdict, marked in expectations(path) if marked == op.split()[0])


def _no_dump(text: str) -> None:
    assert not any(t in text for t in DISPATCHER_TEXT), text
    assert "INTERNAL ASSERT FAILED" not in text, text


def test_a_sparse_buffer_is_a_finding_at_its_register_buffer_line(xla_env: str) -> None:
    report = analyze_spec(str(SPARSE), AnalyzeOptions(backend="xla-cpu"))
    (moved,) = [f for f in report.findings if f.origin == "observed"]
    # predicted at the same line and merged into the observed finding: one finding per (line, problem), both origins (issue 33.5)
    assert [f for f in report.findings if f.rule == "device-move-sparse"] == [moved] and {"predicted", "observed"} == set(moved.origins)
    assert (moved.rule, moved.verdict, moved.op) == ("device-move-sparse", "compile_error", "<model.to(device)>")
    assert (moved.file, moved.line) == ("tests/models/device_sparse_buffer.py", _marker(SPARSE, "<model.to(device)>"))
    assert moved.message == ("the model cannot move to the XLA device: buffer 'adj' of SparseAdjacency is a sparse_coo tensor, which torch-xla cannot hold")
    assert moved.fix == lookup("device-move-sparse").fix and "to_dense()" in moved.fix
    assert "SparseXLA" in moved.detail  # the device's own words are kept for --debug and the JSON
    for finding in report.findings:
        _no_dump(finding.message)
        assert "device=x.device" not in finding.fix
    assert not [f for f in report.findings if f.rule == "observed-xla-error"]
    assert any("cannot move to the XLA device" in limit.why for limit in report.not_analysed)


def test_without_a_device_the_sparse_buffer_is_predicted_at_the_same_line() -> None:
    report = analyze_spec(str(SPARSE), AnalyzeOptions(backend="static"))
    (moved,) = [f for f in report.findings if f.rule == "device-move-sparse"]
    assert (moved.origin, moved.verdict, moved.op) == ("predicted", "compile_error", "<model.to(device)>")
    assert (moved.file, moved.line) == ("tests/models/device_sparse_buffer.py", _marker(SPARSE, "<model.to(device)>"))
    assert report.verdict == "will_not_compile"


def test_before_an_observation_the_weights_cross_once_and_a_refused_tensor_is_still_named() -> None:
    # The worker's move check (xla_tensors.move_problems) on the meta device, which refuses an mkldnn tensor as
    # the XLA device refuses a sparse one. keep: the module moves whole and stays there (the program finds it
    # moved: no second copy of the weights); without it (the parity step) the module stays on the CPU.
    import torch

    from neuronprobe.backends.xla_tensors import MOVE_LAYOUT, move_problems

    class Refused(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = torch.nn.Linear(4, 4)
            self.register_buffer("table", torch.eye(4).to_mkldnn())

    plain = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    assert move_problems(plain, "meta") == [] and not any(p.is_meta for p in plain.parameters())
    assert move_problems(plain, "meta", keep=True) == [] and all(p.is_meta for p in plain.parameters())
    for keep in (False, True):
        model = Refused()
        (problem,) = move_problems(model, "meta", keep=keep)
        assert (problem["name"], problem["kind"], problem["owner"], problem["reason"]) == ("table", "buffer", "Refused", MOVE_LAYOUT)
        assert all(p.is_meta for p in model.proj.parameters()) is keep  # moved before the refusal, and left there


def test_parity_on_a_sparse_buffer_exits_0_on_the_cpu_and_names_the_line_on_xla_cpu(xla_env: str, tmp_path: Path) -> None:
    result = runner.invoke(app, ["parity", str(SPARSE), "-o", str(tmp_path), "--no-html"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["parity", str(SPARSE), "--backend", "xla-cpu", "-o", str(tmp_path), "--no-html"])
    assert result.exit_code == 0, result.output
    runs = json.loads((tmp_path / "device_sparse_buffer.json").read_text())["parity"]["runs"]
    (xla,) = [r for r in runs if r["run"] == "xla-cpu"]
    line = _marker(SPARSE, "<model.to(device)>")
    assert xla["error"].startswith("the xla-cpu run could not start: the model cannot move to the XLA device: buffer 'adj'")
    assert f"device_sparse_buffer.py:{line}" in xla["error"]
    _no_dump(xla["error"])


def test_amax_without_dim_is_predicted_and_observed_as_the_known_torch_xla_defect(xla_env: str) -> None:
    line = _marker(AMAX, "aten::amax")
    static = analyze_spec(str(AMAX), AnalyzeOptions(backend="static"))
    (predicted,) = [f for f in static.findings if f.rule == "xla-defect-amax-no-dim"]
    assert (predicted.line, predicted.verdict) == (line, "compile_error")
    assert "known torch-xla 2.9 defect" in predicted.message
    assert "ops_lower_fn.cpp:97" in lookup("xla-defect-amax-no-dim").provenance

    observed = analyze_spec(str(AMAX), AnalyzeOptions(backend="xla-cpu"))
    hits = [f for f in observed.findings if f.rule == "xla-defect-amax-no-dim"]
    (hit,) = hits  # predicted and observed at one line: one finding with both origins (issue 33.5)
    assert (hit.origin, hit.line, hit.count) == ("observed", line, 1) and set(hit.origins) == {"predicted", "observed"}
    assert observed.prediction_diff is not None and observed.prediction_diff.predicted_ok_observed_failing == []


def test_a_device_failure_after_the_defect_gets_the_defects_fix_not_a_guess(xla_env: str) -> None:
    report = analyze_spec(str(AMAX_FAILS), AnalyzeOptions(backend="xla-cpu"))
    (failure,) = [f for f in report.findings if f.rule == "observed-xla-error"]
    assert failure.line == _marker(AMAX_FAILS, "<forward on the XLA device>")
    assert failure.fix == lookup("xla-defect-amax-no-dim").fix
    assert f"after aten::amax at tests/models/xla_amax_no_dim_fails.py:{_marker(AMAX_FAILS, 'aten::amax')}" in failure.message
    (defect,) = [f for f in report.findings if f.rule == "xla-defect-amax-no-dim" and f.origin == "observed"]
    assert defect.count == 1  # one call per run, though the observation ran the program twice
    _no_dump(failure.message)


@pytest.mark.parametrize(
    ("op", "table_rule"),
    [
        ("aten::nonzero", "dynamic-output-shape"),
        ("aten::_unique2", "dynamic-output-shape"),
        ("aten::_fft_r2c", "fft"),
        ("aten::_adaptive_avg_pool2d", "adaptive-pool-nondivisible"),
    ],
)
def test_each_observed_fallback_gets_its_own_ops_fix(op: str, table_rule: str) -> None:
    from neuronprobe.support import load_table

    rule = next(r for r in load_table().rules if r.id == table_rule)
    (finding,), _ = fallback_findings({"fallbacks": [{"op": op, "count": 1, "bytes": 64, "file": None, "line": None}]})
    assert finding.fix == rule.fix_for(op.split("::")[1]) == observed_fix(op)
    if table_rule != "adaptive-pool-nondivisible":
        assert "pool" not in finding.fix  # the pooling advice belongs to pooling only


def test_an_op_the_table_does_not_know_gets_the_general_fix_without_another_ops_advice() -> None:
    (finding,), _ = fallback_findings({"fallbacks": [{"op": "aten::lgamma", "count": 2, "bytes": 64, "file": None, "line": None}]})
    assert finding.fix == lookup("observed-fallback").fix and "pool" not in finding.fix


def test_each_kind_of_refused_tensor_has_its_own_rule_and_fix() -> None:
    problems = [
        {"name": "adj", "kind": "buffer", "owner": "M", "reason": "layout", "layout": "sparse_csr", "dtype": "float32", "file": None, "line": None},
        {"name": "w", "kind": "parameter", "owner": "M", "reason": "subclass", "tensor_type": "MyTensor", "file": None, "line": None},
        {"name": "q", "kind": "buffer", "owner": "M", "reason": "dtype", "dtype": "quint8", "file": None, "line": None},
        {"name": "z", "kind": "buffer", "owner": "M", "reason": "other", "dtype": "float32", "error": "RuntimeError: x", "file": None, "line": None},
    ]
    findings = move_findings(problems)
    assert [f.rule for f in findings] == ["device-move-sparse", "device-move-subclass", "device-move-dtype", "device-move-other"]
    assert len({f.fix for f in findings}) == 4
    assert "is a sparse_csr tensor" in findings[0].message and "is a MyTensor" in findings[1].message and "(quint8)" in findings[2].message


def test_dispatcher_dumps_and_internal_asserts_are_quieted_with_the_whole_text_kept() -> None:
    dump = (
        "NotImplementedError: Could not run 'aten::_sparse_coo_tensor_with_dims_and_tensors' with arguments from the 'SparseXLA' backend. "
        "This could be because the operator doesn't exist for this backend, or was omitted during the selective/custom build process. "
        "'aten::_sparse_coo_tensor_with_dims_and_tensors' is only available for these backends: [XLA, Meta, SparseCPU]."
    )
    q = quieted(dump)
    assert q.shown == "NotImplementedError: Could not run 'aten::_sparse_coo_tensor_with_dims_and_tensors' with arguments from the 'SparseXLA' backend."
    assert q.detail == dump
    internal = (
        'dispatch mode (RuntimeError: false INTERNAL ASSERT FAILED at "/pytorch/build/aten/src/ATen/RegisterFunctionalization_1.cpp":5953, '
        "please report a bug to PyTorch. mutating a non-functional tensor with a functional tensor is not allowed. Please wrap in functionalize() c), so"
    )
    assert (
        quieted(internal).shown
        == "dispatch mode (PyTorch failed one of its own internal checks: an assertion inside torch, not an error in the model's code), so"
    )
    assert quieted("a plain sentence").detail == ""


def test_a_quiet_pattern_with_an_unknown_action_is_a_bug_named_by_entry() -> None:
    import copy
    from importlib import resources

    doc = json.loads(resources.files("neuronprobe.support").joinpath("data", "error_patterns.json").read_text())
    broken = copy.deepcopy(doc)
    broken["quiet"][0]["action"] = "drop"
    with pytest.raises(ErrorPatternsError, match=r"quiet\[0\] \(dispatcher-explanation\): action 'drop' is not one of cut, replace"):
        parse_error_patterns(broken)
    assert [p.id for p in load_error_patterns().quiet] == ["dispatcher-explanation", "dispatcher-backend-list", "pytorch-internal-assert"]
