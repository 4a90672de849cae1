"""HLO checks on HLO text as torch-xla 2.9 prints it (shapes, metadata and tags as measured on CPU)."""

from __future__ import annotations

from neuronprobe.backends.hlo_checks import check_hlo, parse_hlo
from neuronprobe.backends.xla_findings import hlo_findings

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
        ("hlo-f64", 8): None,
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
    assert graphs == 1 and {"aten::_to_copy", "aten::mul", "aten::index_add", "aten::sort"} <= ops
