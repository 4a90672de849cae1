"""One rule registry (issue 27, point 3): every rule id a finding can carry is registered once.

The registry (neuronprobe/rules/registry.py) reads the rule catalogues; findings are made
through ``Finding.at``, which refuses an id the registry does not know (a bug: exit 3);
``--fail-on`` takes exactly the registered ids and the verdicts; ``neuronprobe rules``
lists them.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
import tomllib
from helpers import MODELS
from typer.testing import CliRunner

import neuronprobe
from neuronprobe.analysis import AnalyzeOptions, analyze_spec
from neuronprobe.backends.xla_findings import fallback_findings, hlo_findings, host_sync_findings
from neuronprobe.cli import app
from neuronprobe.errors import EXIT_INTERNAL, InternalError
from neuronprobe.gates import known_rule_ids
from neuronprobe.report.model import Finding
from neuronprobe.rules import RuleKind, UnknownRule, bundled_registry, lookup
from neuronprobe.support import load_table, rule_set
from neuronprobe.support.error_patterns import load_error_patterns
from neuronprobe.vocabulary import Severity, SourceLocation, Verdict

PACKAGE = Path(neuronprobe.__file__).parent
HERE = SourceLocation("model.py", 3)


def _data(path: str) -> dict:
    text = (PACKAGE / path).read_text(encoding="utf-8")
    return tomllib.loads(text) if path.endswith(".toml") else json.loads(text)


def test_every_catalogue_rule_is_registered_once_with_its_verdict_and_source():
    reg = bundled_registry()
    expected = {
        RuleKind.TABLE: [(r["id"], r["verdict"]) for r in _data("support/data/neuron_rules.json")["rules"]],
        RuleKind.TRAINING: [(r["id"], r["verdict"]) for r in _data("support/data/training_rules.json")["rules"]],
        RuleKind.HLO: [(r["id"], r.get("verdict", "compile_error")) for r in _data("backends/data/hlo_rules.json")["rules"]],
        RuleKind.BUILTIN: [(r["id"], r["verdicts"][0]) for r in _data("support/data/builtin_rules.json")["rules"]],
        RuleKind.PRECISION: [(r["id"], r["verdict"]) for r in _data("support/data/precision_rules.json")["rules"]],
        RuleKind.AUDIT: [(r["id"], None) for r in _data("audit/data/rules.toml")["rule"]],
    }
    for kind, pairs in expected.items():
        assert [(r.id, r.verdict) for r in reg if r.kind == kind] == pairs, kind
    assert len(reg) == sum(len(p) for p in expected.values())  # no id in two catalogues
    for rule in reg:
        assert rule.message, rule.id
        if rule.verdict is not None:  # a finding's rule names its source (some audit rules name none)
            assert rule.provenance and rule.severity == rule.verdict.severity, rule.id
            assert rule.fix or not rule.verdict.reported, rule.id  # a finding always says what to do


def test_the_parsers_and_the_registry_agree():
    from neuronprobe.audit.rules import load_rules as load_audit_rules
    from neuronprobe.backends.hlo_checks import load_rules as load_hlo_rules
    from neuronprobe.training import training_rules

    reg = bundled_registry()
    for rule in load_table().rules:
        assert (reg.get(rule.id).verdict, reg.get(rule.id).fix) == (rule.verdict, rule.fix)
    for t in training_rules()[0]:
        assert (reg.get(t.id).verdict, reg.get(t.id).fix) == (t.verdict, t.fix)
    for h in load_hlo_rules().rules:
        assert (reg.get(h.id).verdict, reg.get(h.id).fix) == (h.verdict, h.fix)
    for a in load_audit_rules().values():
        assert reg.get(a.id).severity == a.severity
    for pattern in load_error_patterns().graph_breaks:  # the rule each graph break pattern picks
        assert pattern.rule in reg


def test_the_severity_follows_the_verdict():
    assert Verdict.COMPILE_ERROR.severity is Severity.ERROR and Verdict.DYNAMIC_SHAPE.severity is Severity.ERROR
    assert Verdict.CPU_FALLBACK.severity is Severity.WARNING
    assert Verdict.PRECISION.severity is Severity.INFO and Verdict.LOWERED.severity is Severity.INFO
    assert lookup("host-read").severity is Severity.WARNING and lookup("hlo-f64").severity is Severity.INFO


def _finding_calls() -> list[tuple[str, ast.Call]]:
    calls = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                calls.append((str(path.relative_to(PACKAGE)), node))
    return calls


def test_findings_are_made_only_through_the_registry():
    direct = [
        f"{path}:{call.lineno}"
        for path, call in _finding_calls()
        if isinstance(call.func, ast.Name) and call.func.id == "Finding" and path != "report/model.py"
    ]
    assert direct == [], f"Finding(...) built outside Finding.at: {direct}"
    sites = [(path, call) for path, call in _finding_calls() if isinstance(call.func, ast.Attribute) and call.func.attr == "at"]
    assert len(sites) >= 14  # analysis, training, the xla-cpu and neuron backends
    for path, call in sites:
        first = call.args[0]
        if isinstance(first, ast.Constant):
            assert first.value in bundled_registry(), f"{path}:{call.lineno}: Finding.at({first.value!r}) is not registered"


def test_an_unknown_id_or_verdict_is_an_internal_error():
    with pytest.raises(UnknownRule, match="'no-such-rule', which no rule catalogue registers"):
        Finding.at("no-such-rule", HERE, "aten::add", "msg")
    with pytest.raises(UnknownRule, match="registers it for cpu_fallback only"):
        Finding.at("host-read", HERE, "aten::_local_scalar_dense", "msg", verdict=Verdict.COMPILE_ERROR)
    with pytest.raises(UnknownRule, match="an audit rule"):
        Finding.at("silent-cpu-fallback", HERE, "x", "msg")
    assert issubclass(UnknownRule, InternalError) and UnknownRule.exit_code == EXIT_INTERNAL == 3


def test_finding_at_takes_the_rule_s_verdict_and_fix_unless_the_site_knows_better():
    f = Finding.at("host-read", SourceLocation("train.py", 9, 4), "aten::_local_scalar_dense", "reads loss")
    assert (f.verdict, f.fix, f.rule, f.file, f.line, f.cell) == (Verdict.CPU_FALLBACK, lookup("host-read").fix, "host-read", "train.py", 9, 4)
    g = Finding.at("composite-part", HERE, "aten::x", "m", verdict=Verdict.DYNAMIC_SHAPE, fix="the part's fix")
    assert (g.verdict, g.fix) == (Verdict.DYNAMIC_SHAPE, "the part's fix")


def test_a_user_rules_file_registers_its_rules_in_a_value(tmp_path):
    path = tmp_path / "rules.json"
    path.write_text(json.dumps({"rules": [{"id": "team-no-cumsum", "verdict": "compile_error", "ops": ["cumsum"], "message": "m", "fix": "f"}]}))
    rules = rule_set(path)
    assert "team-no-cumsum" in known_rule_ids(rules.table) and "team-no-cumsum" not in bundled_registry()
    rule = rules.registry.get("team-no-cumsum")
    assert (rule.kind, rule.source, rule.verdict) == (RuleKind.USER, str(path), Verdict.COMPILE_ERROR)
    assert Finding.at("team-no-cumsum", HERE, "aten::cumsum", "m", registry=rules.registry).fix == "f"
    with pytest.raises(UnknownRule, match="'team-no-cumsum', which no rule catalogue registers"):
        Finding.at("team-no-cumsum", HERE, "aten::cumsum", "m")  # the value, not the process, holds the user's rules


def test_a_rules_file_applies_to_its_own_analysis_only(tmp_path):
    """A notebook runs analyses one after another in one process: the one without --rules sees none of the
    earlier one's rules, neither a new id nor a verdict an override gave a bundled rule."""
    path = tmp_path / "rules.json"
    team = {"id": "team-no-layer-norm", "verdict": "cpu_fallback", "ops": ["layer_norm"], "message": "ours", "fix": "use rms", "provenance": "p"}
    override = {"id": "dynamic-output-shape", "override": True, "verdict": "cpu_fallback", "ops": ["gelu"], "message": "m", "fix": "f", "provenance": "p"}
    path.write_text(json.dumps({"rules": [team, override]}))
    model = str(MODELS / "mlp.py")
    first = analyze_spec(model, AnalyzeOptions(backend="static", rules=path))
    assert {(f.rule, f.op, f.verdict, f.fix) for f in first.findings} == {
        ("team-no-layer-norm", "aten::layer_norm", Verdict.CPU_FALLBACK, "use rms"),
        ("dynamic-output-shape", "aten::gelu", Verdict.CPU_FALLBACK, "f"),
    }
    second = analyze_spec(model, AnalyzeOptions(backend="static"))
    assert [f.rule for f in second.findings] == [] and second.summary.counts[Verdict.CPU_FALLBACK] == 0
    assert "team-no-layer-norm" not in known_rule_ids(load_table()) and "team-no-layer-norm" not in bundled_registry()
    with pytest.raises(UnknownRule):
        Finding.at("team-no-layer-norm", HERE, "aten::layer_norm", "m")
    with pytest.raises(UnknownRule, match="registers it for dynamic_shape only"):
        Finding.at("dynamic-output-shape", HERE, "aten::gelu", "m", verdict=Verdict.CPU_FALLBACK)
    third = analyze_spec(model, AnalyzeOptions(backend="static", rules=path))  # and the file applies again when given again
    assert [f.rule for f in third.findings] == [f.rule for f in first.findings]


@pytest.mark.parametrize(
    "name, train",
    [
        ("train_grad_scaler.py", True),
        ("train_branch_metric.py", True),
        ("train_host_reads.py", True),
        ("graph_break_python.py", False),
        ("data_branch.py", False),
        ("float64.py", False),
    ],
)
def test_every_finding_of_an_analysis_carries_a_registered_rule(name, train):
    report = neuronprobe.analyze(str(MODELS / name), backend="static", train=train)
    assert report.findings
    for f in report.findings:
        assert f.verdict in lookup(f.rule).verdicts, (f.rule, f.verdict)


def test_observed_findings_carry_registered_rules():
    value = {
        "fallbacks": [{"op": "aten::_adaptive_avg_pool2d", "count": 2, "bytes": 64, "file": None, "line": None}],
        "fallback_totals": {"aten::_adaptive_avg_pool2d": 3},
        "host_syncs": [{"count": 1, "file": "m.py", "line": 4}],
    }
    found, _ = fallback_findings(value)
    found += host_sync_findings(value)
    hlo = (
        "HloModule m, entry_computation_layout={(f64[4]{0})->(f64[4]{0})}\n\n"
        "ENTRY %m (p0.1: f64[4]) -> f64[4] {\n"
        "  %p0.1 = f64[4]{0} parameter(0)\n"
        "  ROOT %add.2 = f64[4]{0} add(f64[4]{0} %p0.1, f64[4]{0} %p0.1)\n"
        "}\n"
    )
    found += hlo_findings([{"hlo": hlo}], "trn1")[0]
    assert {f.rule for f in found} == {"observed-fallback", "observed-host-sync", "hlo-f64"}
    for f in found:
        assert f.verdict in lookup(f.rule).verdicts


def test_fail_on_a_registered_id_gates_a_model_that_has_it(tmp_path):
    args = ["analyze", str(MODELS / "train_item_logging.py"), "--train", "--backend", "static", "-o", str(tmp_path)]
    result = CliRunner().invoke(app, [*args, "--fail-on", "host-read"])
    assert result.exit_code == 1, result.output
    assert "host-read" in result.output and "train_item_logging.py:33" in result.output
    assert CliRunner().invoke(app, [*args, "--fail-on", "grad-scaler-sync"]).exit_code == 0


def test_fail_on_an_unknown_value_names_the_close_matches(tmp_path):
    args = ["analyze", str(MODELS / "mlp.py"), "--backend", "static", "-o", str(tmp_path)]
    result = CliRunner().invoke(app, [*args, "--fail-on", "host-raed"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "error: --fail-on: unknown verdict 'host-raed', and no rule has that id; did you mean host-read? (`neuronprobe rules` lists every id)"
    ]
    result = CliRunner().invoke(app, [*args, "--fail-on", "zzz"])
    assert result.exit_code == 2 and "use a verdict (lowered, decomposed, precision, cpu_fallback" in result.output
    assert not list(tmp_path.iterdir())  # nothing half-written


def test_the_rules_command_lists_every_id():
    result = CliRunner().invoke(app, ["rules", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert [r["id"] for r in rows] == [r.id for r in bundled_registry()]  # no user rules: none are kept in the process
    assert [r["id"] for r in rows][: len(bundled_registry())] == [r.id for r in bundled_registry()]
    (host_read,) = [r for r in rows if r["id"] == "host-read"]
    assert (host_read["verdicts"], host_read["severity"], host_read["kind"], host_read["source"]) == (
        ["cpu_fallback"],
        "warning",
        "builtin",
        "support/data/builtin_rules.json",
    )
    assert "torch-xla 2.9.0" in host_read["provenance"]
    result = CliRunner().invoke(app, ["rules"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert f"{len(rows)} rules" in result.output
    line = next(ln for ln in result.output.splitlines() if ln.strip().startswith("host-read "))
    assert [cell.strip() for cell in line.split("│")[:4]] == ["host-read", "cpu_fallback", "warning", "builtin"]


def test_the_rules_command_lists_a_user_file_and_refuses_a_bad_one(tmp_path):
    good = tmp_path / "rules.json"
    good.write_text(json.dumps({"rules": [{"id": "team-rule", "verdict": "cpu_fallback", "ops": ["cumsum"], "message": "m", "fix": "f"}]}))
    rows = json.loads(CliRunner().invoke(app, ["rules", "--json", "--rules", str(good)]).output)
    assert rows[-1]["id"] == "team-rule" and rows[-1]["kind"] == "user"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"rules": [{"id": "host-read", "verdict": "cpu_fallback", "ops": ["x"], "message": "m", "fix": "f"}]}))
    result = CliRunner().invoke(app, ["rules", "--rules", str(bad)])
    assert result.exit_code == 2 and "host-read" in result.output


def test_a_finding_with_an_unregistered_id_is_exit_3_with_one_line(tmp_path, monkeypatch):
    import neuronprobe.rules.registry as registry_module

    full = bundled_registry()
    without = registry_module.RuleRegistry({k: v for k, v in full.rules.items() if k != "host-read"})
    monkeypatch.setattr(registry_module, "bundled_registry", lambda: without)  # the forked worker inherits it
    args = ["analyze", str(MODELS / "train_item_logging.py"), "--train", "--backend", "static", "-o", str(tmp_path)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 3, result.output
    assert "'host-read', which no rule catalogue registers" in result.output and "Traceback" not in result.output
    assert not list(tmp_path.iterdir())
