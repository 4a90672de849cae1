"""The torch/neuronx-cc error texts that pick verdicts are rule data, checked on load; rule lookups name the table."""

from __future__ import annotations

import copy
import json
from importlib import resources

import pytest

from neuronprobe.errors import EXIT_INTERNAL, InternalError
from neuronprobe.support import RuleNotFound, find_rule, load_table, rule_by_id
from neuronprobe.support.error_patterns import ErrorPatternsError, load_error_patterns, parse_error_patterns
from neuronprobe.training import fused_fix


def _bundled() -> dict:
    return json.loads(resources.files("neuronprobe.support").joinpath("data", "error_patterns.json").read_text("utf-8"))


def test_the_bundled_patterns_load_and_each_says_where_its_text_comes_from():
    patterns = load_error_patterns()
    entries = [*patterns.export_failures, *patterns.graph_breaks, *patterns.failure_at]
    assert entries
    for entry in entries:
        assert entry.checked_on and entry.provenance, entry.id


def test_graph_break_patterns_name_rules_the_code_can_build():
    from neuronprobe.analysis import BRANCH_RULE, PYTHON_BREAK_RULE

    table_ids = {r.id for r in load_table().rules}
    for pattern in load_error_patterns().graph_breaks:
        assert pattern.rule in table_ids | {BRANCH_RULE, PYTHON_BREAK_RULE}, pattern.id


def test_every_graph_break_is_classed_and_the_last_pattern_takes_the_rest():
    patterns = load_error_patterns()
    classed = {
        "Dynamic shape operator: Operator `aten.nonzero.default`'s output shape depends on input Tensor data.": ("data_dependent_size", "nonzero"),
        "Unsupported Tensor.item() call with capture_scalar_outputs=False: Dynamo does not support tracing `Tensor.item()`": (
            "host_read",
            "<host read of a tensor value>",
        ),
        "Data-dependent branching: generic_jump TensorVariable()": ("value_branch", "<python branch on tensor value>"),
        "Attempted to wrap sparse Tensor with VariableTracker": ("sparse", "<sparse tensor>"),
        "Missing tp_iternext: Dynamo does not support next() on dict_keyiterator.": ("unsupported_python", "<python the graph capture cannot follow>"),
    }
    for reason, (cause, op) in classed.items():
        matched = patterns.graph_break(reason)
        assert matched is not None and (matched[0].cause, matched[1]) == (cause, op), reason


def test_the_patterns_pick_what_the_code_used_to_hard_code():
    patterns = load_error_patterns()
    assert patterns.failure_at_verdict("Lowering to HLO") == "cpu_fallback"
    assert patterns.failure_at_verdict("neuronx-cc") == "compile_error"
    assert patterns.failure_at_verdict("somewhere new") == "compile_error"
    custom = patterns.export_failure("There was no fake impl registered for mylib::scale", "RuntimeError")
    assert custom is not None and (custom[0].kind, custom[1]) == ("unsupported_op", "mylib::scale")
    sparse = patterns.export_failure("aten.to_sparse.default: sparse tensors are not supported", "RuntimeError")
    assert sparse is not None and sparse[1] == "aten::to_sparse"
    assert patterns.export_failure("some other failure", "RuntimeError") is None
    broke = patterns.graph_break("Dynamic shape operator: aten.nonzero.default's output shape depends on data")
    assert broke is not None and (broke[0].rule, broke[1]) == ("dynamic-output-shape", "nonzero")
    no_op = patterns.graph_break("Dynamic shape operator without an op")  # still a finding, never silent
    assert no_op is not None and no_op[0].id == "unsupported-python-break"


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (lambda d: d["export_failures"][1].update(regex="no (fake"), "export_failures[1] (no-fake-impl): regex 'no (fake' does not compile"),
        (lambda d: d["export_failures"][0].update(kind="slow"), "export_failures[0] (data-dependent-guard): kind 'slow' is not one of"),
        (
            lambda d: d["export_failures"][1].update(regex="registered for"),
            "export_failures[1] (no-fake-impl): regex 'registered for' needs the named group(s) op",
        ),
        (lambda d: d["graph_breaks"][0].pop("checked_on"), 'graph_breaks[0] (dynamic-shape-operator): "checked_on" must be a non-empty object'),
        (lambda d: d["graph_breaks"][1].update(colour="red"), "graph_breaks[1] (sparse-break): unknown key(s) colour"),
        (
            lambda d: d["neuronx_cc"]["failure_at"][1].update(verdict="lowered"),
            "neuronx_cc.failure_at[1] (analyze-lowering-to-hlo): verdict 'lowered' is not one of",
        ),
        (lambda d: d["graph_breaks"].append(dict(d["graph_breaks"][0])), "graph_breaks[5] (dynamic-shape-operator): the id is used twice"),
        (lambda d: d["neuronx_cc"]["diagnostic"].update(regex=r"\[(NCC_\w+)\]"), "neuronx_cc.diagnostic: regex"),
    ],
)
def test_a_malformed_pattern_file_is_rejected_on_load_naming_the_entry(edit, named):
    doc = copy.deepcopy(_bundled())
    edit(doc)
    with pytest.raises(ErrorPatternsError) as info:
        parse_error_patterns(doc)
    assert str(info.value).startswith("support/data/error_patterns.json: ")
    assert named in str(info.value)
    assert isinstance(info.value, InternalError) and info.value.exit_code == EXIT_INTERNAL  # bundled data: a neuronprobe bug


def test_a_missing_rule_id_names_the_rule_and_the_table_version():
    table = load_table()
    assert rule_by_id(table, "dynamic-output-shape").verdict == "dynamic_shape"
    with pytest.raises(RuleNotFound) as info:
        rule_by_id(table, "no-such-rule")
    assert str(info.value) == (
        f"rule 'no-such-rule' is missing from support table {table.version} (support/data/neuron_rules.json), but neuronprobe's code relies on it"
    )
    assert info.value.exit_code == EXIT_INTERNAL
    with pytest.raises(RuleNotFound, match=r"'x' is missing from my table 1\.0"):
        find_rule([], "x", "my table 1.0")


def test_the_training_rule_lookup_names_its_table_too(monkeypatch):
    import neuronprobe.training.classify as classify

    assert fused_fix()
    monkeypatch.setattr(classify, "training_rules", lambda: ((), ()))
    with pytest.raises(RuleNotFound, match=r"'fused-optimizer' is missing from training rules \d{4}\.\d+\.\d+ \(support/data/training_rules.json\)"):
        fused_fix()
