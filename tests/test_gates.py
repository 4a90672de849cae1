"""Gates are library functions: a notebook or a CI script gets typed failures, no CLI involved."""

from __future__ import annotations

import dataclasses

import pytest
from diff_fixtures import finding, make_report

import neuronprobe
from neuronprobe.errors import InputError
from neuronprobe.gates import GATE_FAIL_ON, GATE_RECOMPILES, GATE_REGRESSION, GateFailure, Gates, check_gates, evaluate_gates, known_rule_ids
from neuronprobe.report.diff import diff_reports
from neuronprobe.support import load_table


def _report(**kwargs):
    findings = [finding("aten::_unique2", "cpu_fallback", 40), finding("aten::nonzero", "dynamic_shape", 7)]
    return make_report(findings, **kwargs)


def test_the_gates_are_exported_from_the_package():
    assert neuronprobe.evaluate_gates is evaluate_gates
    assert neuronprobe.Gates is Gates and neuronprobe.GateFailure is GateFailure


def test_no_gates_set_nothing_fails():
    assert evaluate_gates(_report(), Gates()) == []


def test_fail_on_verdicts_returns_one_typed_failure_with_the_findings():
    [failure] = evaluate_gates(_report(), Gates(fail_on=("dynamic_shape", "compile_error")))
    assert failure.gate == GATE_FAIL_ON
    assert failure.threshold == ("dynamic_shape", "compile_error")
    assert failure.count == 1
    assert failure.failed == ("dynamic_shape: aten::nonzero at models/tiny_gpt.py:7 (test-rule)",)
    assert failure.message == "1 finding(s) with verdict in {dynamic_shape, compile_error}"
    with pytest.raises(dataclasses.FrozenInstanceError):
        failure.count = 0  # type: ignore[misc]


def test_fail_on_a_verdict_no_finding_has_passes():
    assert evaluate_gates(_report(), Gates(fail_on=("compile_error",))) == []


def test_fail_on_a_rule_id_matches_the_findings_of_that_rule():
    [failure] = evaluate_gates(_report(), Gates(fail_on=("test-rule",)))
    assert (failure.count, failure.message) == (2, "2 finding(s) with verdict or rule in {test-rule}")


@pytest.mark.parametrize(("limit", "failed"), [(3, False), (2, True), (0, True)])
def test_fail_on_recompiles_compares_the_static_policy_with_the_limit(limit, failed):
    failures = evaluate_gates(_report(static_graphs=3), Gates(fail_on_recompiles=limit))
    assert bool(failures) is failed
    if failed:
        [failure] = failures
        assert (failure.gate, failure.threshold, failure.count) == (GATE_RECOMPILES, limit, 3)
        assert failure.message == f"the static policy needs 3 graphs (limit {limit})"


def test_fail_on_recompiles_without_traffic_cannot_pass_silently():
    with pytest.raises(InputError, match="--fail-on-recompiles needs traffic"):
        evaluate_gates(_report(), Gates(fail_on_recompiles=5))


def test_the_regression_gate_reads_the_diff_given_or_the_reports_baseline_diff():
    base = make_report([], support=100.0)
    new = _report(support=90.0)
    diff = diff_reports(base, new)
    [failure] = evaluate_gates(new, Gates(fail_on_regression=True), diff=diff)
    assert failure.gate == GATE_REGRESSION and failure.threshold is None
    assert failure.failed == tuple(diff.regressions) and failure.count == len(diff.regressions) == 3
    assert failure.message == "3 regression(s)"
    assert evaluate_gates(new, Gates(fail_on_regression=True)) == []  # no baseline: nothing to regress against
    new.baseline_diff = diff
    assert evaluate_gates(new, Gates(fail_on_regression=True)) == [failure]


def test_all_gates_at_once_in_a_fixed_order():
    new = _report(static_graphs=9)
    new.baseline_diff = diff_reports(make_report([]), new)
    gates = Gates(fail_on=("cpu_fallback",), fail_on_recompiles=1, fail_on_regression=True)
    assert [f.gate for f in evaluate_gates(new, gates)] == [GATE_FAIL_ON, GATE_RECOMPILES, GATE_REGRESSION]


def test_check_gates_accepts_verdicts_and_rule_ids_and_rejects_the_rest():
    ids = known_rule_ids(load_table())
    assert {"dynamic-output-shape", "custom-op", "fused-optimizer"} <= ids
    gates = Gates(fail_on=("cpu_fallback", "dynamic-output-shape"))
    assert check_gates(gates, lambda: ids) is gates
    with pytest.raises(InputError, match="--fail-on: unknown verdict 'slow'"):
        check_gates(Gates(fail_on=("slow",)), lambda: ids)
    with pytest.raises(InputError, match="--fail-on-recompiles -1: use a number of graphs >= 0"):
        check_gates(Gates(fail_on_recompiles=-1), lambda: ids)


def test_check_gates_loads_no_rule_table_for_plain_verdicts():
    def no_table() -> frozenset[str]:
        raise AssertionError("the rule table was loaded for a verdict gate")

    check_gates(Gates(fail_on=("cpu_fallback", "compile_error")), no_table)
