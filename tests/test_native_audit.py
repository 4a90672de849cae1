"""`audit --stack native` (issue 36): the XLA-stack idioms that do not carry over to TorchNeuron, each with its replacement."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from neuronprobe.audit.engine import audit_paths
from neuronprobe.audit.rules import PROVENANCE_URLS, load_rules
from neuronprobe.cli import app

REPO = Path(__file__).parent / "data" / "native" / "xla_repo"
IDIOMS = ("xla-import", "xla-mark-step", "xla-device-string", "parallel-model-trace", "transformers-neuronx", "nxdi-entry-point")


def _marked() -> list[tuple[str, int]]:
    out = []
    for number, text in enumerate((REPO / "train_xla.py").read_text().splitlines(), start=1):
        m = re.search(r"#\s*AUDIT\s+(\S+)", text)
        if m:
            out.append((m.group(1), number))
    return out


def test_each_xla_idiom_is_found_at_its_line_for_the_native_stack():
    section = audit_paths([REPO], "native", jobs=1)
    assert sorted((f.rule, f.line) for f in section.findings) == sorted(_marked())
    fixes = {f.rule: f.fix for f in section.findings}
    assert "torch.device('neuron')" in fixes["xla-import"] and "optimizer.step()" in fixes["xla-mark-step"]
    assert "'neuron'" in fixes["xla-device-string"] and "vLLM Neuron" in fixes["nxdi-entry-point"]


def test_the_xla_stack_keeps_its_own_idioms():
    assert audit_paths([REPO], "xla", jobs=1).findings == []


def test_every_idiom_rule_names_its_replacement_and_sources():
    rules = load_rules()
    for rule_id in IDIOMS:
        rule = rules[rule_id]
        assert rule.stacks == ("native",) and rule.fix_native and rule.provenance
        assert all(p in PROVENANCE_URLS for p in rule.provenance), rule.provenance
    assert rules["silent-cpu-fallback"].stacks == ("xla", "native")


def test_audit_target_trn2_reports_them_from_the_cli(tmp_path):
    result = CliRunner().invoke(app, ["audit", str(REPO), "--target", "trn2", "--json", str(tmp_path / "a.json")])
    assert result.exit_code == 0, result.output
    assert "parallel-model-trace" in result.output and "xla-mark-step" in result.output
