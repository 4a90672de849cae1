"""Risky low-precision constructs at the user's line (issue 25, point 3), found on the captured graph.

Each model file marks the line a finding must name (``# EXPECT precision <op>``); the
thresholds come from ``torch.finfo``, so the same construct is a finding in one low type
and not in another (1e-12 is 0 in float16 but not in bfloat16; 511 is exact in float16
but not in bfloat16).
"""

from __future__ import annotations

import copy

import pytest
import torch
from helpers import MODELS, expectations
from typer.testing import CliRunner

from neuronprobe.capture.graph import capture
from neuronprobe.cli import app
from neuronprobe.loaders.resolve import load_model, load_model_file
from neuronprobe.parity.precision import Precision
from neuronprobe.parity.risky import (
    ACCUMULATION_RULE,
    CONSTANT_RULE,
    EPS_RULE,
    INTEGERS_RULE,
    MASK_RULE,
    LowPrecision,
    RiskyScan,
    add_risky,
    confirm,
    find_risky,
    limits,
    low_precision,
    scan_parity,
)
from neuronprobe.parity.run import run_parity_full
from neuronprobe.report.markdown import render_text
from neuronprobe.report.model import Finding, ModuleDrift, PrecisionInfo, Report, load_report
from neuronprobe.support import code_rule_ids
from neuronprobe.support.precision_rules import precision_rule_ids
from neuronprobe.vocabulary import AutoCast, Confirmation, LowType, ServedDtype, TopVerdict, Verdict


def _scan(name: str, precision: LowPrecision):
    """The findings for model file ``name`` under ``precision`` (served: the model and inputs cast to the low type)."""
    loaded = load_model_file(MODELS / f"{name}.py")
    module, args = loaded.module, loaded.args
    if precision.served:
        dtype = getattr(torch, precision.dtype)
        module = copy.deepcopy(module).to(dtype)
        args = tuple(a.to(dtype) if a.is_floating_point() else a for a in args)
    return find_risky(capture(module, args, {}), precision)


def _marked(name: str) -> list[tuple[int, str | None]]:
    return [(line, op) for line, _, op in expectations(MODELS / f"{name}.py")]


def _where(findings) -> list[tuple[str, str | None, int | None, str]]:
    return [(f.rule, f.file, f.line, f.op) for f in findings]


def test_eps_underflow_in_fp16_at_the_add_line():
    findings = _scan("precision_eps", LowPrecision("float16", served=True))
    ((line, op),) = _marked("precision_eps")
    assert _where(findings) == [(EPS_RULE, "tests/models/precision_eps.py", line, op)]
    (f,) = findings
    assert f.verdict == Verdict.PRECISION and f.module == "norm" and f.count == 1
    assert f.message.startswith("the epsilon 1e-12 is 0 in fp16 (the smallest fp16 subnormal is 5.96e-08)")
    assert "rsqrt on this line divides by zero" in f.message
    assert "at least 6.1e-05" in f.fix and "float32" in f.fix


def test_eps_is_no_finding_where_the_low_type_holds_it():
    assert _scan("precision_eps", LowPrecision("bfloat16", served=True)) == []


def test_mask_overflow_in_fp16_names_the_softmax_it_reaches():
    findings = _scan("precision_mask", LowPrecision("float16", served=True))
    ((line, op),) = _marked("precision_mask")
    assert _where(findings) == [(MASK_RULE, "tests/models/precision_mask.py", line, op)]
    (f,) = findings
    assert f.module == "attn"
    assert "-1e+09 is beyond the largest fp16 value 65504: it becomes -inf in fp16" in f.message
    assert "(softmax at line 14) compute -inf - -inf = nan" in f.message
    assert f.fix.startswith("use torch.finfo(x.dtype).min")
    assert _scan("precision_mask", LowPrecision("bfloat16", served=True)) == []


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_clean_model_has_no_findings(dtype):
    assert _scan("precision_clean", LowPrecision(dtype, served=True)) == []


def test_float32_finfo_min_is_minus_inf_when_the_compiler_casts_it():
    """finfo(x.dtype).min is safe in the dtype the model runs in; --auto-cast all rounds float32's min to -inf, even in bf16."""
    findings = _scan("precision_clean", LowPrecision("bfloat16", auto_cast_all=True))
    assert [(f.rule, f.line, f.op) for f in findings] == [(MASK_RULE, 15, "aten::masked_fill.Scalar")]
    assert "-3.40282e+38 is beyond the largest bf16 value 3.38953e+38: it becomes -inf in bf16" in findings[0].message


def test_positions_past_the_exact_integers_of_bf16():
    ((line, op),) = _marked("precision_positions")
    findings = _scan("precision_positions", LowPrecision("bfloat16", served=True))
    assert _where(findings) == [(INTEGERS_RULE, "tests/models/precision_positions.py", line, op)]
    assert "integers up to 511 in bf16, which is exact only up to 256" in findings[0].message
    assert "257 is 256 there, and 511 is 512" in findings[0].message
    # float16 counts exactly to 2048; --auto-cast all casts the float32 positions of an fp32 model
    assert _scan("precision_positions", LowPrecision("float16", served=True)) == []
    assert _where(_scan("precision_positions", LowPrecision("bfloat16", auto_cast_all=True))) == _where(findings)


def test_accumulations_without_an_upcast_follow_mixed_precision_accumulation():
    marked = _marked("precision_softmax")
    served = _scan("precision_softmax", LowPrecision("bfloat16", served=True))
    assert [(f.rule, f.line, f.op) for f in served] == [(ACCUMULATION_RULE, line, op) for line, op in marked]
    assert "adds 4096 terms" in served[1].message and "about 256 equal terms" in served[1].message
    assert served[0].fix.startswith("softmax(x, dim, dtype=torch.float32)")
    # an fp32 model under --auto-cast all: only when mixed-precision accumulation is off
    assert _scan("precision_softmax", LowPrecision("bfloat16", auto_cast_all=True)) == []
    off = _scan("precision_softmax", LowPrecision("bfloat16", auto_cast_all=True, fp32_accumulation=False))
    assert [(f.line, f.op) for f in off] == marked
    assert "mixed-precision accumulation is off" in off[0].message


def test_limits_come_from_finfo():
    fp16, bf16, fp8 = limits("float16"), limits("bfloat16"), limits("float8_e4m3fn")
    assert (fp16.max, fp16.subnormal, fp16.exact) == (65504.0, 2.0**-24, 2048)
    assert (bf16.exact, fp8.max, fp8.subnormal) == (256, 448.0, 2.0**-9)
    assert fp16.rounded(1e-12) == 0.0 and fp16.rounded(-1e9) == float("-inf") and fp8.rounded(-1e9) == -448.0


def test_rule_ids_are_registered_for_fail_on():
    ids = precision_rule_ids()
    assert ids == {EPS_RULE, MASK_RULE, ACCUMULATION_RULE, INTEGERS_RULE, CONSTANT_RULE}
    assert ids <= code_rule_ids()


def test_constants_beyond_the_range_or_precision_of_the_low_type():
    (big, big_op), (near_one, near_one_op) = _marked("precision_constant")
    fp16 = _scan("precision_constant", LowPrecision("float16", served=True))
    assert [(f.rule, f.line, f.op) for f in fp16] == [(CONSTANT_RULE, big, big_op), (CONSTANT_RULE, near_one, near_one_op)]
    assert "the constant 100000 in mul (x * 100000) is inf in fp16: the product is inf in fp16 wherever |x| > 0.655" in fp16[0].message
    assert "the constant 1.0001 in mul (x * 1.0001) is 1 in fp16: the scaling does nothing in fp16" in fp16[1].message
    # bfloat16 has float32's range (1e5 is 99840 there) but less precision
    bf16 = _scan("precision_constant", LowPrecision("bfloat16", served=True))
    assert [(f.rule, f.line) for f in bf16] == [(CONSTANT_RULE, near_one)]


# --- confirmed by the emulation -------------------------------------------------------------------


def _row(module: str, nonfinite: int = 0, exceeds: bool = False) -> ModuleDrift:
    return ModuleDrift(module, "M", "m.py", 1, 0.0, 0.0, 0.0, nonfinite, exceeds or bool(nonfinite))


def _finding(module: str | None, rule: str = EPS_RULE) -> Finding:
    return Finding("aten::add.Tensor", Verdict.PRECISION, "m.py", 7, module, "eps", "fix", rule)


def test_confirm_judges_the_module_that_holds_the_line():
    rows = [_row("proj"), _row("norm", nonfinite=8), _row("head", nonfinite=8), _row("", nonfinite=8)]
    got = confirm([_finding("norm"), _finding("head"), _finding("proj"), _finding("gone"), _finding(None)], rows, "fp16")
    assert [f.confirmation for f in got] == [
        Confirmation.MATTERS,  # the first non-finite module
        Confirmation.UPSTREAM,  # non-finite, but norm already was
        Confirmation.NO_EFFECT,
        Confirmation.NOT_REACHED,
        Confirmation.MATTERS,  # the model itself: everything before it is inside it
    ]
    assert got[0].message == "eps [fp16 emulation: measured to matter on these inputs]"
    assert got[1].message.endswith("(first at norm)]")
    # a submodule's own error does not make its parent's line "upstream"; a second call of a module counts
    rows = [_row("block.inner", nonfinite=2), _row("block", nonfinite=2), _row("shared"), _row("shared (call 2)", exceeds=True)]
    assert [f.confirmation for f in confirm([_finding("block"), _finding("shared")], rows, "bf16")] == [Confirmation.MATTERS, Confirmation.UPSTREAM]
    # other rules' findings pass through untouched
    other = _finding("norm", rule="device-dtype")
    assert confirm([other], rows, "fp16") == [other]


def _parity(name: str, *precisions: Precision):
    torch.manual_seed(0)
    return run_parity_full(load_model_file(MODELS / f"{name}.py"), list(precisions))


def test_eps_1e12_in_fp16_is_found_and_measured_to_matter():
    fp16 = Precision(AutoCast.NONE, LowType.BF16, ServedDtype.FP16, True)
    result = _parity("precision_eps", fp16)
    norm = next(r for r in result.section.runs[0].modules if r.module == "norm")
    assert norm.nonfinite == 8  # the zero row of 8 features: rsqrt(0 + 0) * 0 is nan under fp16
    ((line, op),) = _marked("precision_eps")
    (f,) = scan_parity(result).findings
    assert (f.rule, f.file, f.line, f.op, f.module, f.confirmation) == (EPS_RULE, "tests/models/precision_eps.py", line, op, "norm", Confirmation.MATTERS)
    assert f.message.endswith("[fp16 (no-cast fp16 mpa-on) emulation: measured to matter on these inputs]")


def test_minus_1e9_mask_in_fp16_is_found_and_measured_to_matter():
    fp16 = Precision(AutoCast.NONE, LowType.BF16, ServedDtype.FP16, True)
    result = _parity("precision_mask", fp16)
    ((line, op),) = _marked("precision_mask")
    (f,) = scan_parity(result).findings
    assert (f.rule, f.line, f.op, f.module, f.confirmation) == (MASK_RULE, line, op, "attn", Confirmation.MATTERS)


def test_clean_model_has_no_findings_under_the_served_runs():
    runs = [Precision(AutoCast.NONE, LowType.BF16, d, m) for d in (ServedDtype.FP16, ServedDtype.BF16) for m in (True, False)]
    result = _parity("precision_clean", *runs)
    assert all(not r.error and not any(m.nonfinite for m in r.modules) for r in result.section.runs)
    assert scan_parity(result) == RiskyScan([], [])


def test_positions_past_256_unused_by_these_inputs_have_no_measured_effect():
    result = _parity("precision_positions", Precision(AutoCast.NONE, LowType.BF16, ServedDtype.BF16, True))
    (f,) = scan_parity(result).findings
    assert (f.rule, f.confirmation) == (INTEGERS_RULE, Confirmation.NO_EFFECT)


def test_add_risky_puts_the_findings_in_the_report_and_they_round_trip():
    result = _parity("precision_eps", Precision(AutoCast.NONE, LowType.BF16, ServedDtype.FP16, True))
    report = Report(model="precision_eps", target="trn1")
    add_risky(report, result)
    assert [(f.rule, f.confirmation) for f in report.findings] == [(EPS_RULE, Confirmation.MATTERS)]
    assert report.summary.findings_total == 1 and report.verdict == "runs"  # a note: the verdict does not change
    again = Report.from_json(report.to_json())
    assert again.findings == report.findings and again.findings[0].confirmation is Confirmation.MATTERS


def test_only_storage_low_types_are_scanned():
    def info(cast: str, low: str, dtype: str, mpa: bool = True) -> PrecisionInfo:
        return PrecisionInfo(AutoCast(cast), LowType(low), ServedDtype(dtype), mpa, "label")

    assert low_precision(info("matmult", "bf16", "fp32")) is None  # only matmul inputs: none of the constructs
    assert low_precision(info("all", "tf32", "fp32")) is None  # no storage type
    assert low_precision(info("all", "fp8_e4m3", "fp32", False)) == LowPrecision("float8_e4m3fn", auto_cast_all=True, fp32_accumulation=False)
    assert low_precision(info("none", "bf16", "bf16")) == LowPrecision("bfloat16", served=True)
    assert low_precision(info("all", "fp16", "fp16")) == LowPrecision("float16", served=True, auto_cast_all=True)


# --- the command line -------------------------------------------------------------------------------


def test_parity_command_prints_and_writes_the_confirmed_finding(tmp_path):
    out = tmp_path / "eps.json"
    result = CliRunner().invoke(app, ["parity", str(MODELS / "precision_eps.py"), "--dtype", "fp16", "--json", str(out)])
    assert result.exit_code == 0, result.output
    ((line, op),) = _marked("precision_eps")
    text = " ".join(result.output.split())
    assert "risky low-precision constructs: 1" in text
    assert f"precision_eps.py:{line} {EPS_RULE} {op}" in text and "measured to matter on these inputs" in text
    (f,) = load_report(str(out)).findings
    assert (f.rule, f.line, f.confirmation, f.verdict) == (EPS_RULE, line, Confirmation.MATTERS, Verdict.PRECISION)
    assert EPS_RULE in out.with_suffix(".html").read_text(encoding="utf-8")


def test_analyze_parity_lists_them_with_the_findings_and_fail_on_gates_on_their_rule(tmp_path):
    out = tmp_path / "softmax.json"
    args = ["analyze", str(MODELS / "precision_softmax.py"), "--backend", "static", "--max-compiles", "0", "--parity", "--no-html", "--json", str(out)]
    result = CliRunner().invoke(app, [*args, "--fail-on", ACCUMULATION_RULE])
    assert result.exit_code == 1, result.output  # the gate on the rule id; the verdict itself stays "runs"
    assert "parity: reached, no measurable effect on these inputs" in result.output
    report = load_report(str(out))
    assert report.verdict is TopVerdict.RUNS
    # found under the served-bf16 run (mixed-precision accumulation on computes them in fp32: no effect)
    assert [(f.rule, f.line, f.confirmation) for f in report.findings] == [
        (ACCUMULATION_RULE, line, Confirmation.NO_EFFECT) for line, _ in _marked("precision_softmax")
    ]


def test_a_line_shared_by_blocks_is_one_finding_judged_where_it_matters():
    result = _parity("precision_blocks", Precision(AutoCast.NONE, LowType.BF16, ServedDtype.FP16, True))
    ((line, op),) = _marked("precision_blocks")
    (f,) = scan_parity(result).findings
    assert (f.rule, f.line, f.op, f.count) == (EPS_RULE, line, op, 2)
    assert (f.module, f.confirmation) == ("norms.1", Confirmation.MATTERS)  # norms.0 ran clean: no effect there
    rows = {r.module: r.nonfinite for r in result.section.runs[0].modules}
    assert rows["norms.0"] == 0 and rows["norms.1"] == 16


def test_tensor_constants_are_read_from_the_source_line():
    (fill, fill_op), (eps, eps_op) = _marked("precision_tensor_constant")
    findings = _scan("precision_tensor_constant", LowPrecision("float16", served=True))
    assert [(f.rule, f.line, f.op) for f in findings] == [(MASK_RULE, fill, fill_op), (EPS_RULE, eps, eps_op)]
    assert findings[0].message.startswith("the masked_fill value (a tensor constant: its value read from the source line) -1e+09")
    assert _scan("precision_tensor_constant", LowPrecision("bfloat16", served=True)) == []


def test_literals_keep_a_sign_but_not_a_subtraction():
    from neuronprobe.parity.risky import _literals

    assert _literals("x.masked_fill(m, torch.tensor(-1e9))  # -3") == [-1e9]
    assert _literals("y = a - 1e-12 + b[0] -2 + f(-1_000.5)") == [1e-12, 0.0, 2.0, -1000.5]
    assert _literals("return (a +") == []  # a continuation line: nothing read, no error


def test_the_findings_frame_and_the_notebook_text_have_the_confirmation():
    result = _parity("precision_eps", Precision(AutoCast.NONE, LowType.BF16, ServedDtype.FP16, True))
    report = add_risky(Report(model="precision_eps", target="trn1"), result)
    assert report.findings_df()[["rule", "confirmation"]].values.tolist() == [[EPS_RULE, "matters"]]
    assert "      parity: measured to matter on these inputs\n" in render_text(report)


def test_an_hf_model_is_judged_under_the_drift_rows_names():
    """hf:bert's layer_norm_eps=1e-12 in fp16: found in transformers' file, named as the drift table names modules."""
    tiny = ["num_hidden_layers=2", "hidden_size=32", "num_attention_heads=2", "intermediate_size=64", "vocab_size=256"]
    torch.manual_seed(0)
    result = run_parity_full(load_model("hf:bert", tiny), [Precision(AutoCast.NONE, LowType.BF16, ServedDtype.FP16, False)])
    rows = {r.module for r in result.section.runs[0].modules}
    found = scan_parity(result).findings
    assert {f.rule for f in found} == {EPS_RULE} and sum(f.count for f in found) == 6  # embeddings, 2 x 2 layers, the head
    assert all(f.file is not None and f.file.endswith("transformers/models/bert/modeling_bert.py") for f in found)
    assert all(f.module in rows and f.confirmation is Confirmation.NO_EFFECT for f in found)  # random inputs: no constant row
