"""What the captured training step means on the device: verdicts by phase, and the findings of its host reads.

An op of the backward or the optimizer gets a measured training rule when one matches
(``support/data/training_rules.json``: e.g. a fused optimizer torch-xla has no kernel for),
else the support table's verdict, worded for its phase. Each host read of the step is a
device sync per step: a loop finding with what it costs in graph executions.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from neuronprobe.capture.graph import OpCall, relative_path
from neuronprobe.report.model import Finding
from neuronprobe.support import Classification, find_rule
from neuronprobe.training.recorder import HostRead
from neuronprobe.vocabulary import Phase, SourceLocation, Verdict

# The op each kind of host read stands for in a finding (a print or a copy is no aten op of its own).
HOST_READ_OP: dict[str, str] = {
    "item": "aten::_local_scalar_dense",
    "bool": "aten::_local_scalar_dense",
    "float": "aten::_local_scalar_dense",
    "int": "aten::_local_scalar_dense",
    "print": "<print(tensor)>",
    "cpu": "<tensor.cpu()>",
    "numpy": "<tensor.numpy()>",
    "tolist": "<tensor.tolist()>",
    "grad_scaler": "aten::_local_scalar_dense",
}
_READ_WORDS = {
    "item": ".item()",
    "print": "print/format of a tensor",
    "cpu": ".cpu()",
    "tolist": ".tolist()",
    "numpy": ".numpy()",
    "bool": "a Python truth test of a tensor",
    "float": "float(tensor)",
    "int": "int(tensor)",
}


@dataclass(frozen=True)
class TrainingRule:
    """One measured training rule: the ops it matches in which phases, and what it says."""

    id: str
    verdict: Verdict
    phases: frozenset[str]
    ops: frozenset[str]
    message: str
    fix: str
    fixes: dict[str, str]

    def fix_for(self, name: str) -> str:
        return self.fixes.get(name) or self.fix


@lru_cache(maxsize=1)
def _training_doc() -> dict[str, Any]:
    """The rule file as parsed JSON (Any: its shape is checked where each field is read)."""
    doc: dict[str, Any] = json.loads(resources.files("neuronprobe.support").joinpath("data", "training_rules.json").read_text("utf-8"))
    return doc


@lru_cache(maxsize=1)
def training_rules() -> tuple[tuple[TrainingRule, ...], tuple[str, ...]]:
    """The measured training rules (``support/data/training_rules.json``) and their provenance."""
    doc = _training_doc()
    rules = tuple(
        TrainingRule(
            id=r["id"],
            verdict=Verdict(r["verdict"]),
            phases=frozenset(r["phases"]),
            ops=frozenset(r["ops"]),
            message=r["message"],
            fix=r["fix"],
            fixes=dict(r.get("fixes", {})),
        )
        for r in doc["rules"]
    )
    return rules, tuple(doc["provenance"])


def provenance() -> list[str]:
    """Where the training rules' measurements come from, for the report's support table."""
    return list(training_rules()[1])


def fused_fix() -> str:
    """The fix of the ``fused-optimizer`` rule (an observed error about a fused kernel gets it too)."""
    rules, _ = training_rules()
    table = f"training rules {_training_doc().get('version', '?')} (support/data/training_rules.json)"
    return find_rule(rules, "fused-optimizer", table).fix


def classify_training(call: OpCall, base: Callable[[OpCall], Classification]) -> Classification:
    """A training rule when one matches the op in its phase, else the support table's verdict."""
    rules, _ = training_rules()
    for rule in rules:
        if call.phase in rule.phases and (call.key in rule.ops or call.name in rule.ops):
            return Classification(rule.verdict, rule.id, rule.message, rule.fix_for(call.name))
    result = base(call)
    if call.phase == Phase.BACKWARD and result.verdict not in (Verdict.LOWERED, Verdict.DECOMPOSED):
        result = dataclasses.replace(result, reason=f"in the gradient of this line: {result.reason}")
    elif call.phase == Phase.OPTIMIZER and result.verdict not in (Verdict.LOWERED, Verdict.DECOMPOSED):
        result = dataclasses.replace(result, reason=f"in the optimizer step: {result.reason}")
    return result


def host_read_findings(reads: list[HostRead], graphs_without_reads: int, existing: list[Finding] | None = None) -> list[Finding]:
    """Each host read is a loop finding with what it costs per step and the fix.

    A read inside the model's forward whose line already has a finding (the forward capture's
    ``control_flow`` for an ``assert``/``if`` on a tensor) makes no second finding: that finding
    gains the read's per-step cost instead (one finding per line and problem)."""
    syncs = sum(r.count for r in reads)
    placed: dict[tuple[str | None, int | None], Finding] = {(f.file, f.line): f for f in existing or [] if f.line is not None}
    out = []
    for r in reads:
        if r.kind == "grad_scaler":
            out.append(_grad_scaler_finding(r, graphs_without_reads + syncs, graphs_without_reads))
            continue
        cost = (
            f"reads {r.shape} on the host every step ({_READ_WORDS[r.kind]}): torch-xla executes the pending graph first "
            f"(a device sync and a {r.nbytes}-byte device-to-host copy), so with the {syncs} host read(s) in this step "
            f"each step runs as {graphs_without_reads + syncs} graph executions instead of {graphs_without_reads}"
        )
        there = placed.get((relative_path(r.file), r.line)) if r.in_forward else None
        if there is not None:
            there.message += f"; in the training step this line is a host read: it {cost}"
            continue
        out.append(_read_finding(r, cost))
    return out


def _grad_scaler_finding(read: HostRead, graphs: int, graphs_without_reads: int) -> Finding:
    return Finding.at(
        "grad-scaler-sync",
        SourceLocation(relative_path(read.file), read.line),
        HOST_READ_OP[read.kind],
        "GradScaler.step reads found_inf on the host every step to decide whether to step "
        f"(measured on torch-xla 2.9: one aten::_local_scalar_dense per step, with AdamW and with "
        f"torch_xla.amp.syncfree.AdamW): a device sync, so each step runs as {graphs} "
        f"graph executions instead of {graphs_without_reads}",
        source_line=read.source_line,
        count=read.count,
        bytes_per_call=read.nbytes,
        shapes=read.shape,
        phase=Phase.LOOP,
    )


def _read_finding(read: HostRead, cost: str) -> Finding:
    """A ``branch-on-metric`` finding when the read decides a Python branch, else a ``host-read``."""
    site = SourceLocation(relative_path(read.file), read.line)
    phase = Phase.FORWARD if read.in_forward else Phase.LOOP
    if read.branch:
        op = HOST_READ_OP[read.kind] if read.kind != "bool" else "<python branch on tensor value>"
        rule, message = "branch-on-metric", f"a Python branch on a device value in the training step: {cost}"
    else:  # `rule, ... = "<id>", ...`: the form tests/hostile/test_hostile_gates.py finds rule ids in
        rule, op, message = "host-read", HOST_READ_OP[read.kind], cost
    return Finding.at(rule, site, op, message, source_line=read.source_line, count=read.count, bytes_per_call=read.nbytes, shapes=read.shape, phase=phase)
