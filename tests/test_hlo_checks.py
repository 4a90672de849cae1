"""HLO checks on HLO text as torch-xla 2.9 prints it (shapes, metadata and tags as measured on CPU)."""

from __future__ import annotations

import json
import re

from helpers import MODELS, ROOT, cli_in_process, expectations
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronprobe.analysis import AnalyzeOptions, analyze_spec
from neuronprobe.backends.hlo_checks import check_hlo, load_rules, parse_hlo, split_instruction, window_sizes
from neuronprobe.backends.xla_findings import hlo_findings
from neuronprobe.support.device_dtypes import device_dtypes

# Modelled on _get_xla_tensors_hlo output of torch-xla 2.9.0 with XLA_HLO_DEBUG=1 and neuronprobe's tags:
# index_add on int64 (scatter with an add computation), topk on int64 and sort on float32 (both an HLO
# sort whose op_type is aten__topk), x.double() (f64 tensors), a bilinear scale factor (an f64[] scalar
# constant converted at once), an unknown custom call and a bounded dynamic shape.
HLO = """HloModule IrToHlo.40, entry_computation_layout={(s64[3,4]{1,0}, s64[3]{0}, f32[3,4]{1,0})->(s64[2,4]{1,0})}

%AddComputation.9 (x.10: s64[], y.11: s64[]) -> s64[] {
  %x.10 = s64[] parameter(0)
  %y.11 = s64[] parameter(1)
  ROOT %add.12 = s64[] add(s64[] %x.10, s64[] %y.11)
}

%compare-greater-than.20 (p.0.lhs.21: s64[], p.0.rhs.22: s64[], p.1.lhs.23: s32[], p.1.rhs.24: s32[]) -> pred[] {
  %p.0.lhs.21 = s64[] parameter(0)
  %p.0.rhs.22 = s64[] parameter(1)
  ROOT %compare.25 = pred[] compare(s64[] %p.0.lhs.21, s64[] %p.0.rhs.22), direction=GT
}

ENTRY %IrToHlo.40 (p0.1: s64[3,4], p1.2: s64[3], p2.3: f32[3,4]) -> (s64[2,4]) {
  %p0.1 = s64[3,4]{1,0} parameter(0), metadata={op_type="xla__device_data" op_name="xla__device_data" source_file="/venv/lib/python3.11/site-packages/torch/_ops.py" source_line=841}
  %p1.2 = s64[3]{0} parameter(1)
  %p2.3 = f32[3,4]{1,0} parameter(2)
  %broadcast.8 = s64[2,4]{1,0} broadcast(s64[] %constant.7), dimensions={}
  %scatter.15 = s64[2,4]{1,0} scatter(s64[2,4]{1,0} %broadcast.8, s64[3]{0} %p1.2, s64[3,4]{1,0} %p0.1), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=%AddComputation.9, metadata={op_type="aten__index_add" op_name="np@/home/u/model.py:5@aten::index_add@aten__index_add" source_file="/venv/lib/python3.11/site-packages/torch/_ops.py" source_line=841}
  %iota.18 = s32[3,4]{1,0} iota(), iota_dimension=1
  %sort.26 = (s64[3,4]{1,0}, s32[3,4]{1,0}) sort(s64[3,4]{1,0} %p0.1, s32[3,4]{1,0} %iota.18), dimensions={1}, to_apply=%compare-greater-than.20, metadata={op_type="aten__topk" op_name="np@/home/u/model.py:6@aten::topk@aten__topk"}
  %sort.27 = (f32[3,4]{1,0}, s32[3,4]{1,0}) sort(f32[3,4]{1,0} %p2.3, s32[3,4]{1,0} %iota.18), dimensions={1}, to_apply=%compare-greater-than.20, metadata={op_type="aten__topk" op_name="np@/home/u/model.py:7@aten::sort@aten__topk"}
  %convert.28 = f64[3,4]{1,0} convert(f32[3,4]{1,0} %p2.3), metadata={op_type="xla__cast" op_name="np@/home/u/model.py:8@aten::_to_copy@xla__cast"}
  %broadcast.29 = f64[3,4]{1,0} broadcast(f64[] %constant.30), dimensions={}, metadata={op_type="aten__mul" op_name="aten__mul.1/aten__mul"}
  %constant.31 = f64[] constant(0.5), metadata={op_type="aten__upsample_bilinear2d" op_name="np@/home/u/model.py:10@aten::upsample_bilinear2d@aten__upsample_bilinear2d"}
  %convert.32 = f32[] convert(f64[] %constant.31), metadata={op_type="aten__upsample_bilinear2d" op_name="np@/home/u/model.py:10@aten::upsample_bilinear2d@aten__upsample_bilinear2d"}
  %custom-call.33 = f32[3,4]{1,0} custom-call(f32[3,4]{1,0} %p2.3), custom_call_target="MyRuntimeKernel", metadata={op_type="aten__my_op" op_name="np@/home/u/model.py:11@aten::my_op@aten__my_op"}
  %custom-call.34 = f32[3,4]{1,0} custom-call(f32[3,4]{1,0} %p2.3), custom_call_target="AwsNeuronSoftmax"
  %set-dimension-size.35 = f32[<=12]{0} set-dimension-size(f32[12]{0} %reshape.36, s32[] %c.37), dimensions={0}, metadata={op_type="aten__nonzero" op_name="np@/home/u/model.py:12@aten::nonzero@aten__nonzero"}
  ROOT %tuple.39 = (s64[2,4]{1,0}) tuple(s64[2,4]{1,0} %scatter.15)
}
"""


def _hits(target: str = "trn1") -> dict[tuple[str, int | None], str | None]:
    return {(h.rule.id, h.line): h.rule.ncc_code for h in check_hlo(HLO, target)}


def test_each_rejected_pattern_is_found_at_its_tagged_line_with_its_code():
    assert _hits() == {
        ("hlo-scatter-integer-compute", 5): "NCC_EVRF060",
        ("hlo-topk-integer", 6): "NCC_EVRF013",
        ("hlo-sort", 7): None,  # the sort of line 7 has op_type aten__topk too: the tag tells them apart
        ("hlo-f64", 8): None,  # a precision note: the Neuron device computes f64 in f32
        ("hlo-f64", None): None,  # the untagged broadcast of a Python scalar
        ("hlo-custom-call-unknown", 11): "NCC_EHCA005",  # AwsNeuronSoftmax is a known target
        ("hlo-dynamic-shape", 12): "NCC_EMOD025",
    }


def test_targets_change_the_rules():
    trn2 = _hits("trn2")
    assert trn2[("hlo-sort-trn2", 7)] == "NCC_EVRF029" and ("hlo-sort", 7) not in trn2


def test_the_parser_reads_types_computations_and_metadata():
    module = parse_hlo(HLO)
    scatter = next(i for i in module.instructions if i.opcode == "scatter")
    assert scatter.operand_types == ["s64[2,4]", "s64[3]", "s64[3,4]"]
    assert module.computation_kind("AddComputation.9") == "add"
    assert scatter.user_place() == ("/home/u/model.py", 5) and scatter.aten_op() == "aten::index_add"
    param = next(i for i in module.instructions if i.name == "p0.1")
    assert param.user_place() == (None, None), "torch's own frame (in site-packages) is nobody's line"


def test_findings_merge_per_line_and_place_untagged_instructions_by_their_op():
    findings, graphs, ops = hlo_findings([{"hlo": HLO}], "trn1", {"aten::mul.Tensor": [["/home/u/model.py", 8]]})
    f64 = [f for f in findings if f.rule == "hlo-f64"]
    assert [(f.file, f.line) for f in f64] == [("/home/u/model.py", 8)], "the scalar broadcast joins its line"
    assert "2 instruction(s)" in f64[0].message
    # a precision note rejects nothing: only the ops whose instructions stop the compile are rejected
    assert graphs == 1 and {"aten::index_add", "aten::sort", "aten::topk"} <= ops
    assert not {"aten::_to_copy", "aten::mul"} & ops


def test_float64_is_a_precision_note_on_every_neuron_target_not_a_compile_error():
    # torch-xla 2.9 on a Neuron device computes f64 as f32 (dtype.cpp MaybeDowncastToXlaDeviceType):
    # the CPU's f64 HLO never reaches neuronx-cc, so it is a note at the user's line.
    for target in ("trn1", "inf2", "trn2"):
        findings, _, _ = hlo_findings([{"hlo": HLO}], target, {"aten::mul.Tensor": [["/home/u/model.py", 8]]})
        (f64,) = [f for f in findings if f.rule == "hlo-f64"]
        assert (f64.verdict, f64.line, f64.ncc_code) == ("precision", 8, None)
        assert "computes it in f32, so results will differ from float64" in f64.message
        assert "compile_error" not in {f.verdict for f in findings if f.line == 8}


def test_environment_variables_change_what_the_device_computes_in():
    bf16 = device_dtypes("trn1", {"XLA_USE_BF16": "1"}).hlo_mapping()
    findings, _, _ = hlo_findings([{"hlo": HLO}], "trn1", {"aten::mul.Tensor": [["/home/u/model.py", 8]]}, bf16)
    (f64,) = [f for f in findings if f.rule == "hlo-f64"]
    assert "computes it in bf16" in f64.message
    # without the Neuron mapping (the CPU's own types) there is nothing narrowed: no note at all
    none, _, _ = hlo_findings([{"hlo": HLO}], "trn1", {}, {})
    assert not [f for f in none if f.rule == "hlo-f64"]


def test_float64_the_model_never_asked_for_is_no_finding():
    # torch.isinf(h) under torch-xla is abs(h) == inf computed in f64 (the Python float becomes an f64[]
    # scalar and h is widened to compare with it), measured on torch-xla 2.9 CPU. The run records which
    # lines had float64 tensors of their own; f64 elsewhere is torch-xla's, and f32 on the device is exact.
    hlo = """ENTRY %IrToHlo.9 (p0.1: f32[2,8], p1.4: f64[]) -> (pred[2,8]) {
  %p0.1 = f32[2,8]{1,0} parameter(0)
  %abs.2 = f32[2,8]{1,0} abs(f32[2,8]{1,0} %p0.1), metadata={op_type="aten__abs" op_name="np@/home/u/clamp.py:6@aten::abs@aten__abs"}
  %convert.3 = f64[2,8]{1,0} convert(f32[2,8]{1,0} %abs.2), metadata={op_type="aten__eq" op_name="np@/home/u/clamp.py:6@aten::eq.Scalar@aten__eq"}
  %p1.4 = f64[] parameter(1)
  %broadcast.5 = f64[2,8]{1,0} broadcast(f64[] %p1.4), dimensions={}, metadata={op_type="aten__eq" op_name="aten__eq"}
  ROOT %compare.6 = pred[2,8]{1,0} compare(f64[2,8]{1,0} %convert.3, f64[2,8]{1,0} %broadcast.5), direction=EQ, metadata={op_type="aten__eq" op_name="np@/home/u/clamp.py:6@aten::eq.Scalar@aten__eq"}
}
"""
    findings, _, ops = hlo_findings([{"hlo": hlo}], "trn1", {"aten::eq.Scalar": [["/home/u/clamp.py", 6]]}, None, [])
    assert findings == [] and ops == set()
    asked, _, _ = hlo_findings([{"hlo": hlo}], "trn1", {"aten::eq.Scalar": [["/home/u/clamp.py", 6]]}, None, [["/home/u/clamp.py", 6]])
    assert [(f.rule, f.verdict, f.line) for f in asked] == [("hlo-f64", "precision", 6)]


# torch.cummax(x, 0) on torch-xla 2.9 CPU (tests/data/hlo_corpus.json, cummax|float32|0), tagged at a user line,
# next to the single-operand reduce-window of a max pool.
CUMMAX = """ENTRY %IrToHlo.20 (p0.1: f32[5,5,5]) -> (f32[5,5,5], s32[5,5,5]) {
  %p0.1 = f32[5,5,5]{2,1,0} parameter(0)
  %iota.4 = s32[5,5,5]{2,1,0} iota(), iota_dimension=0
  %constant.2 = f32[] constant(-inf)
  %constant.3 = s32[] constant(0)
  %reduce-window.17 = (f32[5,5,5]{2,1,0}, s32[5,5,5]{2,1,0}) reduce-window(f32[5,5,5]{2,1,0} %p0.1, s32[5,5,5]{2,1,0} %iota.4, f32[] %constant.2, s32[] %constant.3), window={size=5x1x1 pad=4_0x0_0x0_0}, to_apply=%MaxAndArgMaxComputation.5, metadata={op_type="aten__cummax" op_name="np@/home/u/scan.py:9@aten::cummax@aten__cummax"}
  %reduce-window.21 = f32[5,2,2]{2,1,0} reduce-window(f32[5,5,5]{2,1,0} %p0.1, f32[] %constant.2), window={size=1x2x2 stride=1x2x2}, to_apply=%MaxComputation.6, metadata={op_type="aten__max_pool2d" op_name="np@/home/u/scan.py:10@aten::max_pool2d@aten__max_pool2d"}
  %reduce-window.22 = f32[5,3,3]{2,1,0} reduce-window(f32[5,5,5]{2,1,0} %p0.1, f32[] %constant.2), window={size=1x2x2 rhs_dilate=1x2x2}, to_apply=%MaxComputation.6, metadata={op_type="aten__max_pool2d" op_name="np@/home/u/scan.py:11@aten::max_pool2d@aten__max_pool2d"}
  ROOT %tuple.19 = (f32[5,5,5]{2,1,0}, s32[5,5,5]{2,1,0}) tuple(f32[5,5,5]{2,1,0} %p0.1, s32[5,5,5]{2,1,0} %iota.4)
}
"""


def test_cummax_is_one_reduce_window_over_four_operands_which_neuronx_cc_rejects():
    (window,) = [i for i in parse_hlo(CUMMAX).instructions if i.name == "reduce-window.17"]
    assert window.operand_count == 4 and window_sizes(window.attributes) == {"size": [5, 1, 1]}
    hits = {(h.rule.id, h.line): h for h in check_hlo(CUMMAX, "trn1")}
    operands = hits[("hlo-reduce-window-operands", 9)]
    assert operands.rule.ncc_code == "NCC_EVRF019" and "over 4 operands" in operands.message
    assert operands.aten_op == "aten::cummax"
    # the max pool's reduce-window has one input and one init: fine; a dilated window is NCC_EVRF018
    assert set(hits) == {("hlo-reduce-window-operands", 9), ("hlo-reduce-window-window-dilation", 11)}
    assert hits[("hlo-reduce-window-window-dilation", 11)].rule.ncc_code == "NCC_EVRF018"


def test_the_other_rules_decidable_from_hlo_text():
    hlo = """ENTRY %e (p0.1: s8[4], p1.2: s16[4]) -> (s8[4]) {
  %p0.1 = s8[4]{0} parameter(0)
  %p1.2 = s16[4]{0} parameter(1)
  %shift-right-arithmetic.3 = s8[4]{0} shift-right-arithmetic(s8[4]{0} %p0.1, s8[4]{0} %p0.1), metadata={op_name="np@/m.py:3@aten::bitwise_right_shift.Tensor@"}
  %shift-right-arithmetic.4 = s16[4]{0} shift-right-arithmetic(s16[4]{0} %p1.2, s16[4]{0} %p1.2), metadata={op_name="np@/m.py:4@aten::bitwise_right_shift.Tensor@"}
  %power.5 = s64[4]{0} power(s64[4]{0} %a, s64[4]{0} %b), metadata={op_name="np@/m.py:5@aten::pow.Tensor_Tensor@"}
  %convolution.6 = f32[1,1,9,9]{3,2,1,0} convolution(f32[1,1,4,4]{3,2,1,0} %x, f32[1,1,3,3]{3,2,1,0} %w), window={size=3x3 pad=2_2x2_2 lhs_dilate=2x2 rhs_dilate=2x2}, dim_labels=bf01_oi01->bf01, metadata={op_name="np@/m.py:6@aten::convolution@"}
  %convolution.7 = f32[1,1,4,4]{3,2,1,0} convolution(f32[1,1,4,4]{3,2,1,0} %x, f32[1,1,3,3]{3,2,1,0} %w), window={size=3x3 stride=2x2 pad=1_1x1_1 lhs_dilate=2x2}, dim_labels=bf01_oi01->bf01, metadata={op_name="np@/m.py:7@aten::convolution@"}
  %rng-bit-generator.8 = (u64[2]{0}, u32[8]{0}) rng-bit-generator(u64[2]{0} %s), algorithm=rng_philox, metadata={op_name="np@/m.py:8@aten::rand@"}
  %rng-bit-generator.9 = (u64[2]{0}, u32[8]{0}) rng-bit-generator(u64[2]{0} %s), algorithm=rng_default, metadata={op_name="np@/m.py:9@aten::rand@"}
  %constant.10 = u64[] constant(4294967296), metadata={op_name="np@/m.py:10@aten::full@"}
  %constant.11 = u64[] constant(4294967295), metadata={op_name="np@/m.py:11@aten::full@"}
  %reduce-scatter.12 = s32[2]{0} reduce-scatter(s32[4]{0} %p), dimensions={0}, to_apply=%add, metadata={op_name="np@/m.py:12@aten::reduce_scatter_tensor@"}
  ROOT %tuple.13 = (s8[4]{0}) tuple(s8[4]{0} %shift-right-arithmetic.3)
}
"""
    hits = {(h.line, h.rule.ncc_code) for h in check_hlo(hlo, "trn1")}
    assert hits == {
        (3, "NCC_EVRF022"),  # int8 stays narrow on the device
        (5, "NCC_EVRF062"),
        (6, "NCC_EVRF010"),
        (7, "NCC_EVRF011"),
        (8, "NCC_EVRF006"),
        (10, "NCC_ESFH002"),
        (12, "NCC_EVRF063"),
    }, "int16 reaches neuronx-cc as s32 (line 4); rng_default (9) and a constant that fits in 32 bits (11) are fine"


def test_a_tuple_typed_instruction_without_a_tag_is_named_by_its_opcode():
    # torch.stft(..., return_complex=True) under torch-xla 2.9 CPU: the FFT falls back, its c64 output comes
    # back as device data (tagged at the user's line) and the graph ends in a ROOT tuple of c64 with no aten
    # op. Naming that tuple's finding from its example text ("(c64[6,51]) tuple(...)") raised IndexError
    # (exit 3); a tuple only packs values checked where they are made, so it is no finding of its own.
    hlo = """ENTRY %IrToHlo.5 (p0.1: c64[2,9,13]) -> (c64[2,9,13]) {
  %p0.1 = c64[2,9,13]{2,1,0} parameter(0), metadata={op_type="xla__device_data" op_name="np@/home/u/spec.py:8@aten::_fft_r2c@xla__device_data"}
  ROOT %tuple.2 = (c64[2,9,13]{2,1,0}) tuple(c64[2,9,13]{2,1,0} %p0.1)
}
"""
    findings, _, ops = hlo_findings([{"hlo": hlo}], "trn1", {})
    assert [(f.op, f.line, f.rule, f.ncc_code) for f in findings] == [("aten::_fft_r2c", 8, "hlo-complex", "NCC_EVRF004")]
    assert ops == {"aten::_fft_r2c"}
    # an instruction of tuple type that no aten op built is named by its parsed opcode
    untagged = """ENTRY %e (p0.1: f32[5]) -> (f32[5], s32[5]) {
  %reduce-window.3 = (f32[5]{0}, s32[5]{0}) reduce-window(f32[5]{0} %p0.1, s32[5]{0} %i, f32[] %c, s32[] %z), window={size=5 pad=4_0}, to_apply=%m
}
"""
    (finding,) = hlo_findings([{"hlo": untagged}], "trn1", {})[0]
    assert (finding.op, finding.location.known, finding.ncc_code) == ("<hlo reduce-window>", False, "NCC_EVRF019")


# --- the reader against every line shape (issue 23, point 4) ------------------------------------------

# HLO that torch-xla 2.9 built on the CPU for OpInfo samples, one module per sample that showed a new
# line shape, written by scripts/record_hlo_corpus.py (its header says how many samples and shapes).
CORPUS = json.loads((ROOT / "tests" / "data" / "hlo_corpus.json").read_text(encoding="utf-8"))
INSTRUCTION_LINE = re.compile(r"^\s*(?:ROOT\s+)?%[^\s=]+\s*=\s")
CORPUS_LINES = sorted({ln for text in CORPUS["modules"].values() for ln in text.splitlines() if ln.strip()})


def test_every_instruction_line_of_the_opinfo_corpus_is_read_and_checked():
    assert CORPUS["torch_xla"].startswith("2.9") and CORPUS["samples_tried"] > 5000 and len(CORPUS["modules"]) > 500
    read = 0
    for key, text in CORPUS["modules"].items():
        lines = [ln for ln in text.splitlines() if INSTRUCTION_LINE.match(ln)]
        module = parse_hlo(text)
        # every instruction line is an instruction (the old pattern dropped tuple types with /*index=5*/ in them)
        assert [i.name for i in module.instructions] == [split_instruction(ln)[0] for ln in lines], key
        read += len(lines)
        for target in ("trn1", "trn2", "inf2"):
            hlo_findings([{"hlo": text}], target, {})
    assert read > 1000


_JUNK = st.text(alphabet='()[]{}%=,"\\/*<>: .-_abcfsu0123456789x\t', max_size=16)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(CORPUS_LINES), st.integers(min_value=0, max_value=600), _JUNK, st.sampled_from(["cut", "insert", "replace"]))
def test_no_mangled_corpus_line_crashes_the_reader(line, at, junk, how):
    at = min(at, len(line))
    mangled = {"cut": line[:at], "insert": line[:at] + junk + line[at:], "replace": line[:at] + junk + line[at + len(junk) :]}[how]
    text = f"ENTRY %e.1 () -> () {{\n{mangled}\n{line}\n}}\n"
    module = parse_hlo(text)
    for target in ("trn1", "trn2"):
        hlo_findings([{"hlo": text}], target, {"aten::add.Tensor": [["/m.py", 3]]})
    if INSTRUCTION_LINE.match(line):  # whatever came before, the intact line is still read
        assert module.instructions and module.instructions[-1].name == split_instruction(line)[0]


_ARRAY = st.builds(
    lambda dtype, dims, layout: f"{dtype}[{','.join(map(str, dims))}]" + ("{" + ",".join(map(str, range(len(dims)))) + "}" if layout else ""),
    st.sampled_from(["f32", "f64", "bf16", "s64", "s16", "u8", "c64", "pred", "f8e4m3fn", "token"]),
    st.lists(st.integers(min_value=0, max_value=64), max_size=4),
    st.booleans(),
)
_TYPES = st.recursive(_ARRAY, lambda inner: st.lists(inner, max_size=3).map(lambda ts: "(" + ", ".join(ts) + ")"), max_leaves=6)
# printable text: str.splitlines() also breaks at \x1c-\x1e and \x85, which no HLO printer writes
_QUOTED = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126, exclude_characters='"\\'), max_size=24)


@settings(max_examples=300, deadline=None)
@given(
    st.from_regex(r"[a-z][\w.\-]{0,12}", fullmatch=True),
    _TYPES,
    st.sampled_from(["add", "reduce-window", "custom-call", "tuple", "get-tuple-element", "while", "sort", "fft"]),
    st.lists(_TYPES, max_size=5),
    _QUOTED,
    st.booleans(),
)
def test_generated_instructions_are_read_field_by_field(name, result_type, opcode, operand_types, op_name, root):
    operands = ", ".join(f"{t} %v.{i}" for i, t in enumerate(operand_types))
    line = f'  {"ROOT " if root else ""}%{name} = {result_type} {opcode}({operands}), window={{size=3x3 rhs_dilate=1x2}}, metadata={{op_type="aten__x" op_name="{op_name}"}}'
    assert split_instruction(line)[:3] == (name, result_type, opcode)
    (inst,) = parse_hlo(line).instructions
    assert inst.operand_count == len(operand_types) and inst.op_name == op_name
    assert window_sizes(inst.attributes) == {"size": [3, 3], "rhs_dilate": [1, 2]}
    hlo_findings([{"hlo": line}], "trn1", {})


def _inventory_rows() -> dict[str, tuple[str, set[str]]]:
    """code -> (decidable, rule ids) from backends/data/hlo_inventory.md (ranges like 'EVRF036 to EVRF050' expanded)."""
    text = (ROOT / "neuronprobe" / "backends" / "data" / "hlo_inventory.md").read_text(encoding="utf-8")
    rows: dict[str, tuple[str, set[str]]] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[0].startswith("NCC_"):
            continue
        rules = {r.strip() for r in cells[2].split(",") if r.strip()}
        for part in cells[0].split(","):
            ends = [e.strip() for e in part.split(" to ")]
            if len(ends) == 1:
                rows[ends[0]] = (cells[1], rules)
                continue
            prefix = ends[0][:-3]
            for n in range(int(ends[0][-3:]), int(ends[1][-3:]) + 1):
                rows[f"{prefix}{n:03d}"] = (cells[1], rules)
    return rows


def test_the_inventory_names_every_catalogue_code_and_every_checked_code_has_its_rule():
    rows = _inventory_rows()
    catalogue = json.loads((ROOT / "scripts" / "inventories" / "ncc_error_codes.json").read_text(encoding="utf-8"))
    assert {c["code"] for c in catalogue["codes"]} <= set(rows), "a code of the catalogue is missing from the inventory"
    rules = {r.id: r for r in load_rules().rules}
    for code, (decidable, ids) in rows.items():
        assert decidable in ("yes", "no", "partly"), code
        assert ids <= set(rules), f"{code} names a rule hlo_rules.json does not have: {ids - set(rules)}"
        assert decidable == "yes" or not ids, code
    for rule in rules.values():
        if rule.ncc_code:
            assert rule.id in rows[rule.ncc_code][1], f"{rule.id} checks {rule.ncc_code}; the inventory must say so"


# --- the same through the real xla-cpu backend (torch-xla 2.9 on the CPU; the xla_env fixture fails, never skips) ---


def _xla(name: str):
    return analyze_spec(str(MODELS / name), AnalyzeOptions(backend="xla-cpu", target="trn1"))


def test_float64_under_xla_cpu_is_a_precision_note_where_static_says_so_too(xla_env):
    report = _xla("float64.py")
    ((line, verdict, _op),) = expectations(MODELS / "float64.py")
    observed = [f for f in report.findings if f.origin == "observed"]
    assert {(f.verdict, f.rule, f.line) for f in observed} == {("precision", "hlo-f64", line), ("precision", "hlo-f64", line + 1)}
    assert all("results will differ from float64" in f.message and f.ncc_code is None for f in observed)
    assert verdict == "precision" and not [f for f in report.findings if f.verdict.is_problem]
    assert report.verdict == "runs"
    assert report.prediction_diff.predicted_ok_observed_failing == report.prediction_diff.predicted_failing_observed_ok == []


def test_a_clamp_from_finfo_max_is_clean_under_xla_cpu(xla_env):
    # torch-xla widens h to f64 for torch.isinf (measured), which was a compile_error for aten::isinf at the
    # marked line; the model asks for no float64 and the device compares in f32 exactly: nothing to report
    report = _xla("xla_finfo_clamp.py")
    assert report.backend.name == "xla-cpu" and report.summary.ops_total > 0
    assert report.findings == [] and report.verdict == "runs"


def test_cummax_is_rejected_at_its_line_from_the_hlo(xla_env):
    report = _xla("xla_cummax.py")
    ((line, verdict, op),) = expectations(MODELS / "xla_cummax.py")
    (finding,) = [f for f in report.findings if f.origin == "observed"]
    assert (finding.op, finding.verdict, finding.line, finding.ncc_code) == (op, verdict, line, "NCC_EVRF019")
    assert "over 4 operands" in finding.message and finding.rule == "hlo-reduce-window-operands"


def test_stft_with_complex_output_is_reported_not_a_crash(xla_env, tmp_path, monkeypatch):
    out = tmp_path / "r.json"
    monkeypatch.setenv("COLUMNS", "200")
    proc = cli_in_process("analyze", str(MODELS / "xla_stft.py"), "--backend", "xla-cpu", "-o", str(tmp_path), "--json", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]  # it was exit 3: IndexError in hlo_findings
    report = json.loads(out.read_text(encoding="utf-8"))
    ((line, verdict, op),) = expectations(MODELS / "xla_stft.py")
    observed = {(f["op"], f["verdict"], f["line"], f["ncc_code"]) for f in report["findings"] if f["origin"] == "observed"}
    assert observed == {(op, verdict, line, None), (op, "compile_error", line, "NCC_EVRF004")}
