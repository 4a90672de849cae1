"""Risky constructs judged in the dtype their own line computes in (issue 33.10): a model's own ``.half()`` or
``.to(torch.float16)`` is found by a plain ``neuronprobe parity model.py``, with no precision flag, and measured
on the model's own run."""

from __future__ import annotations

import torch
from helpers import MODELS, expectations
from typer.testing import CliRunner

from neuronprobe.capture.graph import capture
from neuronprobe.cli import app
from neuronprobe.loaders.resolve import load_model_file
from neuronprobe.parity.precision import DEFAULT_PRECISIONS, Precision
from neuronprobe.parity.risky import EPS_RULE, LowPrecision, find_risky, own_low_dtypes, scan_parity
from neuronprobe.parity.run import run_parity_full
from neuronprobe.report.model import load_report
from neuronprobe.vocabulary import AutoCast, Confirmation, LowType, ServedDtype, Verdict

FP32_ONLY = Precision(AutoCast.NONE, LowType.BF16, ServedDtype.FP32, True)


def _marked(name: str) -> list[tuple[int, str | None]]:
    return [(line, op) for line, _, op in expectations(MODELS / f"{name}.py")]


def _parity(name: str, *precisions: Precision):
    torch.manual_seed(0)
    return run_parity_full(load_model_file(MODELS / f"{name}.py"), list(precisions or DEFAULT_PRECISIONS))


def _graph(name: str):
    loaded = load_model_file(MODELS / f"{name}.py")
    return capture(loaded.module, loaded.args, {})


def test_the_graph_as_it_is_names_the_low_types_the_model_computes_in():
    assert own_low_dtypes(_graph("precision_own_fp16")) == ["float16"]
    assert own_low_dtypes(_graph("precision_own_half")) == ["float16"]
    assert own_low_dtypes(_graph("precision_eps")) == []  # an fp32 model: only an emulated precision makes it low


def test_an_own_fp16_epsilon_is_found_under_the_default_precisions_and_measured():
    result = _parity("precision_own_fp16")  # the default precisions: none of them serves fp16
    assert all(str(r.precision.dtype) != "fp16" for r in result.section.runs)
    ((line, op),) = _marked("precision_own_fp16")
    (f,) = scan_parity(result).findings
    assert (f.rule, f.file, f.line, f.op, f.module) == (EPS_RULE, "tests/models/precision_own_fp16.py", line, op, "norm")
    assert f.confirmation is Confirmation.MATTERS
    assert "fp16" in f.message and f.message.endswith("[fp16 (the model's own dtype) run on the CPU: measured to matter on these inputs]")


def test_a_half_submodule_is_judged_in_fp16_even_when_only_fp32_is_run():
    # bfloat16 holds 1e-8 (the served-bf16 emulation finds nothing); the submodule's own float16 does not.
    bf16 = LowPrecision("bfloat16", served=True)
    assert find_risky(_graph("precision_own_half"), bf16) == []
    result = _parity("precision_own_half", FP32_ONLY)
    ((line, _op),) = _marked("precision_own_half")
    (f,) = scan_parity(result).findings
    assert (f.rule, f.line, f.module, f.confirmation) == (EPS_RULE, line, "norm", Confirmation.MATTERS)


def test_an_own_fp16_epsilon_fp16_holds_is_no_finding():
    assert scan_parity(_parity("precision_own_fp16_clean")).findings == []


def test_an_fp32_model_gets_no_own_dtype_findings():
    # precision_eps's 1e-12 is a finding only under an fp16 emulation: a plain fp32 run has none.
    assert scan_parity(_parity("precision_eps", FP32_ONLY)).findings == []


def test_plain_parity_command_reports_the_own_fp16_epsilon(tmp_path):
    out = tmp_path / "own.json"
    result = CliRunner().invoke(app, ["parity", str(MODELS / "precision_own_fp16.py"), "--json", str(out), "--no-html"])
    assert result.exit_code == 0, result.output
    ((line, op),) = _marked("precision_own_fp16")
    text = " ".join(result.output.split())
    assert "risky low-precision constructs: 1" in text and f"precision_own_fp16.py:{line} {EPS_RULE} {op}" in text
    (f,) = load_report(str(out)).findings
    assert (f.rule, f.line, f.confirmation, f.verdict) == (EPS_RULE, line, Confirmation.MATTERS, Verdict.PRECISION)
