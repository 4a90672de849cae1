"""--fail-on takes every id the report can print, and gates on each.

The ids are collected from where findings get them, not from the registry under test:
the rule data files (support table, training, HLO, error patterns, audit) and the code
itself (every ``rule=`` literal, every ``*_RULE`` constant, every ``"observed-..."`` id),
read with ``ast``. A new id in the code that the registry lacks fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from diff_fixtures import finding, make_report
from helpers import MODELS
from typer.testing import CliRunner

import neuronprobe
from neuronprobe.audit.model import AuditFinding, AuditSection
from neuronprobe.audit.rules import load_rules as load_audit_rules
from neuronprobe.backends.hlo_checks import load_rules as load_hlo_rules
from neuronprobe.cli import app
from neuronprobe.gates import Gates, check_gates, evaluate_gates, known_rule_ids
from neuronprobe.support import load_table
from neuronprobe.support.error_patterns import load_error_patterns
from neuronprobe.support.precision_rules import precision_rule_ids
from neuronprobe.training import training_rules

PACKAGE = Path(neuronprobe.__file__).parent


def _strings(node: ast.AST) -> set[str]:
    """The string literals an expression can evaluate to: a constant, or either branch of ``a if c else b``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.IfExp):
        return _strings(node.body) | _strings(node.orelse)
    return set()


def _ids_in_code() -> set[str]:
    found: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (isinstance(node, ast.keyword) and node.arg == "rule") or (
                isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id.endswith("_RULE") for t in node.targets)
            ):
                found |= _strings(node.value)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "at" and node.args:
                found |= _strings(node.args[0])  # Finding.at(rule, site, op, message, ...)
            elif (
                isinstance(node, ast.Assign)
                and isinstance(node.targets[0], ast.Tuple)
                and isinstance(node.targets[0].elts[0], ast.Name)
                and node.targets[0].elts[0].id == "rule"
                and isinstance(node.value, ast.Tuple)
            ):
                found |= _strings(node.value.elts[0])  # rule, fix = "custom-op", ...
            elif (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and node.value.startswith("observed-")
                and node.value != "observed-"
                and " " not in node.value
            ):
                found.add(node.value)
            elif isinstance(node, ast.JoinedStr) and node.values and _strings(node.values[0]) == {"observed-"}:
                found.add("observed-{...}")  # resolved below from the calls that fill it
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "compile_failure":
                first = node.args[0]
                assert isinstance(first, ast.Constant), f"{path}: compile_failure's step must be a literal for this test"
                found.add(f"observed-{first.value}")
    assert "observed-{...}" in found  # the only formatted id: neuron.py's compile_failure, whose steps are read above
    found.discard("observed-{...}")
    return found


def every_id() -> set[str]:
    table = load_table()
    data = {r.id for r in table.rules} | {r.id for r in training_rules()[0]} | {r.id for r in load_hlo_rules().rules}
    data |= {p.rule for p in load_error_patterns().graph_breaks} | precision_rule_ids()
    return data | _ids_in_code() | set(load_audit_rules())


def test_the_ids_the_issue_names_are_found():
    ids = every_id()
    wanted = {"host-read", "branch-on-metric", "grad-scaler-sync", "unsupported-op", "data-dependent-branch", "observed-fallback", "hlo-f64"}
    assert wanted <= ids and len(ids) > 60


def test_fail_on_takes_every_id_a_finding_can_carry():
    known = known_rule_ids(load_table())
    missing = sorted(every_id() - known)
    assert missing == [], f"--fail-on refuses ids the report can print: {missing}"


@pytest.mark.parametrize("rule", sorted(every_id()))
def test_fail_on_gates_on_each_id(rule):
    gates = check_gates(Gates(fail_on=(rule,)), lambda: known_rule_ids(load_table()))
    report = make_report([finding("aten::addmm", "lowered", 3), finding("aten::nonzero", "dynamic_shape", 7)])
    report.findings[1].rule = rule
    audit_ids = set(load_audit_rules())
    if rule in audit_ids:  # analyze --audit: the audit's findings gate too
        report.findings[1].rule = "test-rule"
        report.audit = AuditSection(roots=["repo"], stack="xla", findings=[AuditFinding(rule, "warning", "train.py", 4)])
    [failure] = evaluate_gates(report, gates)
    assert failure.count == 1 and rule in failure.failed[0]
    assert evaluate_gates(make_report([finding("aten::nonzero", "dynamic_shape", 7)]), gates) == []


def test_the_cli_accepts_the_ids_it_used_to_refuse(tmp_path):
    run = CliRunner().invoke
    ids = "host-read,branch-on-metric,grad-scaler-sync,data-dependent-branch,observed-fallback,hlo-f64"
    result = run(app, ["analyze", str(MODELS / "mlp.py"), "--backend", "static", "--fail-on", ids, "-o", str(tmp_path)])
    assert result.exit_code == 0, result.output
    result = run(app, ["analyze", str(MODELS / "mlp.py"), "--backend", "static", "--fail-on", "no-such-id", "-o", str(tmp_path)])
    assert result.exit_code == 2 and "unknown verdict 'no-such-id'" in result.output
