"""Verdicts that depend on dtype, arguments and SDK release (issue 11): rule data, inventories, --sdk."""

from __future__ import annotations

import importlib.util
import json
import os

import pytest
from helpers import MODELS, ROOT, CliRun, cli_in_process, expectations

import neuronprobe
from neuronprobe.capture.graph import OpCall, TensorMeta
from neuronprobe.errors import InputError
from neuronprobe.rules import RuleKind, bundled_registry
from neuronprobe.support import classify, load_table
from neuronprobe.support.conditions import ConditionError, holds, parse_condition
from neuronprobe.support.rulefile import check_rule_arguments, load_rules_file

# (model file, --sdk): one per rule family; complex_mul is rejected in every release the XLA path runs on.
CASES = [
    ("int_matmul.py", None),  # dtype-conditional (NCC_EVRF035)
    ("adaptive_pool_uneven.py", None),  # argument-conditional (torch-xla's divisibility test)
    ("bool_mask_write.py", None),  # boolean-mask write
    ("complex_mul.py", None),  # dtype-conditional: complex64 (NCC_EVRF004), the default (newest) release included
    ("masked_scatter.py", None),  # a data-dependent dimension inside a static-shaped op (set-dimension-size, NCC_EMOD025)
]
INVENTORIES = ROOT / "scripts" / "inventories"


@pytest.fixture(scope="module")
def reports():
    return {(name, sdk): neuronprobe.analyze(str(MODELS / name), backend="static", sdk=sdk) for name, sdk in CASES}


@pytest.mark.parametrize("name,sdk", CASES)
def test_each_marked_line_has_its_conditional_finding(reports, name, sdk):
    report = reports[(name, sdk)]
    marks = expectations(MODELS / name)
    assert marks
    for line, verdict, op in marks:
        at_line = [f for f in report.findings if f.line == line and f.file.endswith(name)]
        assert {(f.verdict, f.op) for f in at_line} >= {(verdict, op)}, [(f.verdict, f.op, f.line) for f in report.findings]
        assert all(f.fix for f in at_line)
    # Nothing else is flagged: the even pool, the float ops around the marked ones.
    assert {f.line for f in report.findings} == {line for line, _, _ in marks}


def test_the_condition_is_in_the_reason(reports):
    finding = reports[("adaptive_pool_uneven.py", None)].findings[0]
    assert "output_size does not divide the trailing sizes of self" in finding.message


def test_complex64_is_rejected_in_every_release_the_xla_path_runs_on(reports):
    # neuronx-cc 2.32 compiles complex64 for 30 HLO ops, but SDK 2.32 and later ship no XLA-based torch-neuronx:
    # the README's old "compiles from 2.32" was refuted by the observed run (hlo-complex, NCC_EVRF004; issue 33.9).
    newest = reports[("complex_mul.py", None)]
    assert {f.ncc_code for f in newest.findings} == {"NCC_EVRF004"} and "Neuron SDK 2.32.0" in newest.support_table.version
    older = neuronprobe.analyze(str(MODELS / "complex_mul.py"), backend="static", sdk="2.31.0")
    assert [(f.rule, f.line) for f in older.findings] == [(f.rule, f.line) for f in newest.findings]
    rule = next(r for r in load_table().rules if r.id == "complex64-listed-ops")
    assert rule.sdk_fixed is None and rule.sdk_from is None and "not included in Neuron 2.32.0 and later" in rule.provenance
    assert load_table().newest_sdk == "2.32.0"  # the default is the newest release the table knows


def _call(name: str, overload: str = "default", **kw) -> OpCall:
    return OpCall(index=0, namespace="aten", name=name, overload=overload, **kw)


def test_argument_predicates_and_schema_defaults():
    dilated = _call("max_pool2d_with_indices", constants={"dilation": [1, 2]})
    plain = _call("max_pool2d_with_indices", constants={"dilation": [1, 1]})
    defaulted = _call("max_pool2d_with_indices")  # dilation left out: the schema default 1 applies
    assert classify(dilated).rule == "max-pool-dilation"
    assert classify(plain).verdict == classify(defaulted).verdict == "lowered"
    assert classify(_call("addmm", constants={"beta": 0.5})).rule == "addmm-scaled"
    assert classify(_call("addmm", constants={"beta": 1.0, "alpha": 1})).verdict == "lowered"
    reduce_mean = _call("scatter_reduce", "two", constants={"reduce": "mean"})
    assert classify(reduce_mean).rule == "scatter-reduce-mean-or-exclude-self"
    int_mm = _call("mm", outputs=[TensorMeta([2, 2], "int64")])
    assert (classify(int_mm).verdict, classify(int_mm).ncc_code) == ("compile_error", "NCC_EVRF035")
    assert classify(_call("mm", outputs=[TensorMeta([2, 2], "float32")])).verdict == "lowered"


def test_shape_bounds_and_undecided_values():
    wide = _call("topk", arg_tensors={"self": [TensorMeta([4, 70000], "float32")]})
    narrow = _call("topk", arg_tensors={"self": [TensorMeta([4, 8], "float32")]})
    symbolic = _call("topk", arg_tensors={"self": [TensorMeta([4, "s0"], "float32")]})
    bound = parse_condition({"tensor": "self", "dim": -1, "gt": 65536})
    assert holds(bound, wide) and not holds(bound, narrow)
    assert not holds(bound, symbolic), "a symbolic size is undecided: no rule fires on it"
    below = parse_condition({"tensor": "self", "dim": 0, "lt": 8})
    assert holds(below, narrow)


@pytest.mark.parametrize(
    "doc",
    [{"arg": "x"}, {"arg": "x", "eq": 1, "ne": 2}, {"tensor": "self", "dim": "0", "gt": 1}, {"any": []}, {"op": "mm"}],
)
def test_malformed_conditions_are_refused(doc):
    with pytest.raises(ConditionError):
        parse_condition(doc)


def test_bundled_rules_name_only_arguments_their_ops_have():
    check_rule_arguments(load_table().rules, "neuron_rules.json")


def _rule_file(tmp_path, rule: dict) -> os.PathLike:
    path = tmp_path / "rules.json"
    path.write_text(json.dumps({"rules": [rule]}))
    return path


BASE = {"id": "my-rule", "verdict": "cpu_fallback", "message": "m", "fix": "f", "ops": ["mm"], "provenance": "p"}


@pytest.mark.parametrize(
    "change,words",
    [
        ({"verdict": "slow"}, "verdict 'slow'"),
        ({"when": [{"arg": "alpha", "eq": 1}]}, "names 'alpha', which aten::mm does not have"),
        ({"when": [{"arg": "x", "between": [1, 2]}]}, "an arg condition takes exactly one of"),
        ({"sdk_fixed": "1.0"}, "sdk_fixed '1.0' is not a release"),
        ({"ncc_code": "EVRF035"}, "NCC_ABCD123"),
        ({"colour": "red"}, "unknown key(s) colour"),
    ],
)
def test_a_bad_rule_is_named(tmp_path, change, words):
    with pytest.raises(InputError) as err:
        load_rules_file(_rule_file(tmp_path, {**BASE, **change}), load_table().sdk_releases)
    assert "rule 'my-rule'" in str(err.value) and words in str(err.value)


def _cli(*args: str) -> CliRun:
    return cli_in_process(*args)  # what a `neuronprobe` process prints and exits with (tests/test_cli_analyze.py starts one)


def test_cli_bad_sdk_and_bad_rule_file_exit_2_with_one_line(tmp_path):
    model = str(MODELS / "int_matmul.py")
    proc = _cli("analyze", model, "--backend", "static", "--sdk", "9.9", "-o", str(tmp_path))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--sdk '9.9': unknown Neuron SDK release" in proc.stderr and "2.31.0, 2.32.0" in proc.stderr
    bad = _rule_file(tmp_path, {**BASE, "when": [{"arg": "alpha", "eq": 1}]})
    proc = _cli("analyze", model, "--backend", "static", "--rules", str(bad), "-o", str(tmp_path))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "rule 'my-rule'" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not list(tmp_path.glob("*.json*")) or all(p.name == "rules.json" for p in tmp_path.glob("*.json"))


def test_a_user_rule_file_adds_a_verdict(tmp_path):
    rule = {**BASE, "id": "no-int-mm", "ops": ["matmul"], "when": [{"tensor": "self", "dtype_in": ["int64"]}]}
    proc = _cli(
        "analyze",
        str(MODELS / "int_matmul.py"),
        "--backend",
        "static",
        "--rules",
        str(_rule_file(tmp_path, rule)),
        "--json",
        str(tmp_path / "r.json"),
        "--no-html",
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert {f["rule"] for f in report["findings"]} == {"no-int-mm"}  # before the bundled integer-dot
    assert {f["verdict"] for f in report["findings"]} == {"cpu_fallback"}


def _inventory_module():
    spec = importlib.util.spec_from_file_location("build_inventories", ROOT / "scripts" / "build_inventories.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_inventories_and_the_table_agree():
    inv = _inventory_module()
    table = load_table()
    notes = json.loads((INVENTORIES / "notes.json").read_text())
    known = {r.id for r in table.rules} | bundled_registry().ids([RuleKind.BUILTIN])
    xla = json.loads((INVENTORIES / "xla_fallbacks.json").read_text())
    ncc = json.loads((INVENTORIES / "ncc_error_codes.json").read_text())
    fields = ("file", "line", "function", "function_line", "fallback_op")
    sites = inv.cover_sites([{k: s[k] for k in fields} for s in xla["sites"]], table.rules, notes["xla_sites"])
    codes = inv.cover_codes([{k: c[k] for k in ("code", "page", "message")} for c in ncc["codes"]], table.rules, notes["ncc_codes"])
    # The committed inventories are what the current table and notes produce (regenerate them after a change).
    assert [(s["key"], s["status"], s.get("rules")) for s in sites] == [(s["key"], s["status"], s.get("rules")) for s in xla["sites"]]
    assert [(c["code"], c["status"], c.get("rules")) for c in codes] == [(c["code"], c["status"], c.get("rules")) for c in ncc["codes"]]
    for entry in [*sites, *codes]:
        assert entry["status"] in ("rule", "reason"), f"uncovered without a stated reason: {entry}"
        assert set(entry.get("rules", ())) <= known
    assert len(sites) == 57 and sum(s["status"] == "rule" for s in sites) == xla["summary"]["rule"]
    tied = [c for c in codes if c["kind"] in ("op", "dtype", "attribute")]
    assert tied and all(c["status"] == "rule" or c["reason"] for c in tied)
    # Every torch-xla rule cites a line of the source it was read from.
    for rule in table.rules:
        if "pytorch/xla v2.9.0" in rule.provenance:
            assert inv.cited_lines(rule.provenance), rule.id


def test_the_inventory_reader_finds_sites_their_function_and_op():
    inv = _inventory_module()
    text = (
        "at::Tensor XLANativeFunctions::widget(const at::Tensor& self,\n"
        "                                     int64_t k) {\n"
        "  // call_fallback_fn< in a comment is no site\n"
        "  if (k != 1) {\n"
        "    return at::native::call_fallback_fn<\n"
        "        &xla_fallback, ATEN_OP2(widget, Scalar)>::call(self, k);\n"
        "  }\n"
        "}\n"
    )
    [site] = inv.fallback_sites("torch_xla/csrc/a.cpp", text)
    assert (site["line"], site["function"], site["function_line"], site["fallback_op"]) == (5, "widget", 1, "widget.Scalar")
    assert inv.cited_lines("x a.cpp:4, :9-10 and b.cpp:3") == {"a.cpp": {4, 9, 10}, "b.cpp": {3}}


# --- the device's dtype mapping (issue 23) ------------------------------------------------------------


def test_float64_is_a_precision_note_at_its_line_and_the_model_still_compiles():
    report = neuronprobe.analyze(str(MODELS / "float64.py"), backend="static", target="trn1")
    ((line, verdict, op),) = expectations(MODELS / "float64.py")
    at_line = [f for f in report.findings if f.line == line]
    assert [(f.verdict, f.op, f.rule) for f in at_line] == [(verdict, op, "device-dtype")] == [("precision", "aten::to.dtype", "device-dtype")]
    assert at_line[0].message.startswith("float64 is computed in float32 on the device: results will differ from float64")
    assert "host" in at_line[0].fix and "float32" in at_line[0].fix
    assert not [f for f in report.findings if f.verdict == "compile_error"]
    assert report.verdict == "runs" and report.summary.support_percentage == 100.0
    assert "device dtypes (torch-xla): float64 -> float32, int16 -> int32, uint16 -> uint32" in report.support_table.provenance


def test_the_environment_narrows_further_and_names_the_variable(monkeypatch):
    monkeypatch.setenv("XLA_USE_BF16", "1")
    report = neuronprobe.analyze(str(MODELS / "float64.py"), backend="static", target="inf2")
    (note,) = [f for f in report.findings if f.line == 7]
    assert "float64 is computed in bfloat16 on the device" in note.message and "XLA_USE_BF16" in note.message
    assert any("XLA_USE_BF16 set in the environment" in p for p in report.support_table.provenance)


def test_rules_judge_the_dtype_the_device_computes_in():
    def shift(dtype: str) -> OpCall:
        return _call("bitwise_right_shift", "Tensor", arg_tensors={"self": [TensorMeta([4], dtype)]}, inputs=[TensorMeta([4], dtype)])

    # int16 reaches neuronx-cc as int32 (dtype.cpp MaybeDowncastToXlaDeviceType): EVRF022 cannot fire on it
    assert classify(shift("int16")).verdict == "lowered"
    assert (classify(shift("int8")).verdict, classify(shift("int8")).ncc_code) == ("compile_error", "NCC_EVRF022")
    # a widening is no precision note; a float64 call that also has a real problem keeps the problem
    assert classify(_call("abs", inputs=[TensorMeta([4], "int16")], outputs=[TensorMeta([4], "int16")])).verdict == "lowered"
    f64_mm = _call("mm", inputs=[TensorMeta([2, 2], "float64")], outputs=[TensorMeta([2, 2], "float64")])
    assert classify(f64_mm).verdict == "precision"
    f64_unique = _call("_unique2", inputs=[TensorMeta([4], "float64")], outputs=[TensorMeta([4], "float64")])
    assert classify(f64_unique).verdict == "dynamic_shape"


def test_resize_bilinear_is_fixed_from_the_release_whose_error_pages_list_resize_bilinear():
    call = _call("upsample_bilinear2d", inputs=[TensorMeta([1, 3, 8, 8], "float32")], outputs=[TensorMeta([1, 3, 16, 16], "float32")])
    old, new = classify(call, sdk="2.26.0"), classify(call, sdk="2.27.0")
    assert (old.verdict, old.rule, old.ncc_code) == ("compile_error", "resize-bilinear", "NCC_EHCA005")
    assert new.verdict == "lowered"
    rule = next(r for r in load_table().rules if r.id == "resize-bilinear")
    assert rule.sdk_fixed == "2.27.0" and "EVRF015" in rule.provenance and "#889" in rule.message


def test_a_clamp_from_finfo_max_is_clean_on_the_static_backend_too():
    # the same model file as the xla-cpu test in test_hlo_checks.py: Python floats are no float64 tensors
    report = neuronprobe.analyze(str(MODELS / "xla_finfo_clamp.py"), backend="static", target="trn1")
    assert report.findings == [] and report.verdict == "runs" and report.summary.ops_total > 0


def test_every_argument_dependent_lowering_path_is_covered_or_explained():
    # issue 33.9: each branch of torch-xla v2.9.0's aten lowerings that reads the call's arguments (an optional
    # argument, training, requires_grad, a scalar operand, the dtype, an environment flag) has a rule, the fallback
    # site of its function, or a stated reason; the committed inventory is what the table and the notes produce.
    inv = _inventory_module()
    table = load_table()
    notes = json.loads((INVENTORIES / "notes.json").read_text())
    xla = json.loads((INVENTORIES / "xla_fallbacks.json").read_text())
    paths = json.loads((INVENTORIES / "xla_argument_paths.json").read_text())
    fields = ("file", "line", "function", "function_line", "kinds", "key")
    sites = [{k: s[k] for k in ("file", "line", "function", "function_line", "fallback_op")} for s in xla["sites"]]
    again = inv.cover_paths([{k: b[k] for k in fields} for b in paths["branches"]], sites, table.rules, notes["xla_argument_paths"])
    assert [(b["key"], b["status"], b.get("rules"), b.get("site")) for b in again] == [
        (b["key"], b["status"], b.get("rules"), b.get("site")) for b in paths["branches"]
    ]
    assert paths["summary"] == inv.path_summary(again) and paths["summary"]["uncovered"] == 0
    site_keys = {inv.site_key(s) for s in sites}
    known = {r.id for r in table.rules}
    for b in again:
        assert b["status"] in ("rule", "fallback-site", "reason"), b
        assert b["status"] != "fallback-site" or b["site"] in site_keys
        assert set(b.get("rules", ())) <= known
        assert b["status"] != "reason" or len(b["reason"]) > 40  # a sentence, not a placeholder
    assert paths["source"].startswith("pytorch/xla v2.9.0") and len(again) >= 50
    # every note names a branch that exists: a stale note fails
    assert set(notes["xla_argument_paths"]) <= {b["key"] for b in again}


def test_the_branch_reader_finds_conditions_on_arguments_only():
    inv = _inventory_module()
    text = (
        "at::Tensor XLANativeFunctions::widget(const at::Tensor& self,\n"
        "                                     std::optional<double> p, bool training) {\n"
        "  if (p.has_value() && *p == 0) {\n"
        "    return self;\n"
        "  }\n"
        "  int64_t n = self.dim();\n"
        "  if (n > 2) {\n"
        "    n = 2;\n"
        "  }\n"
        '  return runtime::sys_util::GetEnvBool("X", false) ? self : self;\n'
        "}\n"
    )
    found = inv.argument_paths("torch_xla/csrc/a.cpp", text)
    assert [(b["line"], b["function"], b["kinds"], b["key"]) for b in found] == [
        (3, "widget", ["optional argument"], "a.cpp:widget:1"),
        (10, "widget", ["environment"], "a.cpp:widget:2"),
    ]
