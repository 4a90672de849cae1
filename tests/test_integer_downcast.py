"""neuronx-cc's integer downcasts (issue 36.7), on both stacks: flag- and release-conditional, each with its NCC code."""

from __future__ import annotations

import pytest
from helpers import MODELS, refused

import neuronprobe
from neuronprobe.errors import InputError
from neuronprobe.support.integer_downcast import load, parse_flags
from neuronprobe.vocabulary import Verdict

XLA_MODEL = MODELS / "int_matmul.py"
NATIVE_MODEL = MODELS / "native_int_matmul.py"
LINE = 7


@pytest.fixture(autouse=True)
def clean(monkeypatch, tmp_path):
    monkeypatch.delenv("NEURON_CC_FLAGS", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))


def _at_line(report, name):
    return [(f.verdict, f.rule, f.ncc_code) for f in report.findings if f.line == LINE and f.file.endswith(name)]


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (None, (Verdict.COMPILE_ERROR, "integer-dot", "NCC_EVRF035")),  # no flag: the bundled rule
        ("--implicit-integer-downcast=none", (Verdict.COMPILE_ERROR, "int-downcast-dot", "NCC_EVRF035")),
        ("--implicit-integer-downcast=all", (Verdict.PRECISION, "int-downcast-dot", None)),
        ("--implicit-integer-downcast dot,pow", (Verdict.PRECISION, "int-downcast-dot", None)),
        ("--implicit-integer-downcast=scatter", (Verdict.COMPILE_ERROR, "int-downcast-dot", "NCC_EVRF035")),
    ],
)
def test_the_xla_stack_follows_the_flag(flags, expected):
    report = neuronprobe.analyze(str(XLA_MODEL), backend="static", target="trn1", compiler_args=flags)
    assert _at_line(report, "int_matmul.py") == [expected]


def test_native_stack_refuses_by_default_and_the_environment_variable_allows(monkeypatch):
    native = neuronprobe.analyze(str(NATIVE_MODEL), backend="static", target="trn2")
    assert _at_line(native, "native_int_matmul.py") == [(Verdict.COMPILE_ERROR, "int-downcast-dot", "NCC_EVRF035")]
    assert "refused by default" in native.findings[0].message
    monkeypatch.setenv("NEURON_CC_FLAGS", "--implicit-integer-downcast=dot")
    allowed = neuronprobe.analyze(str(NATIVE_MODEL), backend="static", target="trn2")
    (f,) = allowed.findings
    assert (f.verdict, f.rule) == (Verdict.PRECISION, "int-downcast-dot") and "2**24" in f.message and "NEURON_CC_FLAGS" in f.message
    assert allowed.verdict.value == "runs"


def test_before_2_32_the_flags_do_not_exist_and_the_bundled_rule_stands():
    report = neuronprobe.analyze(str(XLA_MODEL), backend="static", target="trn1", sdk="2.29.0", compiler_args="--implicit-integer-downcast=all")
    assert _at_line(report, "int_matmul.py") == [(Verdict.COMPILE_ERROR, "integer-dot", "NCC_EVRF035")]


def test_native_int64_keeps_an_int64_pow_exact(tmp_path):
    model = tmp_path / "powm.py"
    model.write_text(
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        return x ** 3\n"
        "def get_model():\n    return M()\ndef get_example_inputs():\n    return (torch.arange(8),)\n"
    )
    refused_default = neuronprobe.analyze(str(model), backend="static", target="trn1", compiler_args="--implicit-integer-downcast=none")
    assert [(f.rule, f.ncc_code) for f in refused_default.findings] == [("int-downcast-pow", "NCC_EVRF062")]
    native64 = neuronprobe.analyze(str(model), backend="static", target="trn1", compiler_args="--native-int64=enabled")
    assert native64.findings == [] and any(o.rule == "int-downcast-pow" and o.verdict is Verdict.LOWERED for o in native64.ops)


def test_every_class_names_its_code_and_the_data_its_sources():
    doc, classes = load()
    assert {c.id: c.ncc_code for c in classes} == {
        "dot": "NCC_EVRF035",
        "scatter": "NCC_EVRF060",
        "all_reduce": "NCC_EVRF061",
        "pow": "NCC_EVRF062",
        "reduce_scatter": "NCC_EVRF063",
    }
    assert doc["sdk_from"] == "2.32.0" and "not confirmed" in doc["default"] and len(doc["provenance"]) >= 3


def test_bad_flag_values_are_refused_with_one_sentence(tmp_path):
    with pytest.raises(InputError, match="use default, enabled or disabled"):
        parse_flags("--native-int64=maybe", {})
    line = refused(["analyze", str(XLA_MODEL), "--compiler-args", "--implicit-integer-downcast=most", "-o", str(tmp_path)], XLA_MODEL)
    assert "--implicit-integer-downcast=most: use default, all, none" in line
