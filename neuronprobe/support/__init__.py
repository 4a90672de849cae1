"""The bundled Neuron support table and the rules that read it.

The table is data (``data/``), with provenance:

* ``xla_lowerings.json``: the aten ops that have a torch-xla lowering, generated
  by ``scripts/build_support_table.py`` from torch-xla's
  ``codegen/xla_native_functions.yaml`` at a release tag (or, on a Neuron host,
  from the dispatcher's ``XLA`` registrations).
* ``neuron_rules.json``: what the Neuron compiler adds on top, per target:
  dtypes it rejects, ops it cannot compile, data-dependent shapes, with the
  NCC_* code where the error catalogue has one, and a one-line fix.

:func:`classify` applies them in a fixed order, so every verdict names the
rule that produced it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

from neuronprobe.errors import InputError

TARGETS: tuple[str, ...] = ("trn1", "trn2", "inf2")
# Least to most severe; the same order as the report's VERDICTS.
_SEVERITY: tuple[str, ...] = ("lowered", "decomposed", "cpu_fallback", "dynamic_shape", "control_flow", "compile_error")
DEFAULT_TARGET = "trn1"


@dataclass(frozen=True)
class Rule:
    id: str
    verdict: str
    message: str
    fix: str
    ops: frozenset[str] = frozenset()
    tags: frozenset[str] = frozenset()
    dtypes: frozenset[str] = frozenset()
    input_dtypes: frozenset[str] = frozenset()
    layouts: frozenset[str] = frozenset()
    targets: frozenset[str] = frozenset(TARGETS)
    ncc_code: str | None = None
    when: dict[str, Any] | None = None
    fixes: dict[str, str] = field(default_factory=dict)

    def fix_for(self, key: str) -> str:
        return self.fixes.get(key) or self.fixes.get(key.split(".")[0]) or self.fix


@dataclass(frozen=True)
class SupportTable:
    version: str
    torch_xla: str
    compiler: str
    lowered: frozenset[str]
    rules: tuple[Rule, ...]
    bookkeeping: frozenset[str]
    device_artifacts: dict[str, str]
    provenance: tuple[str, ...]

    def label(self) -> str:
        return f"{self.version} (torch-xla {self.torch_xla} lowerings + Neuron rules)"


@dataclass(frozen=True)
class Classification:
    verdict: str
    rule: str
    reason: str
    fix: str = ""
    ncc_code: str | None = None


def _read(name: str) -> Any:
    return json.loads(resources.files("neuronprobe.support").joinpath("data", name).read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def load_table() -> SupportTable:
    lowerings = _read("xla_lowerings.json")
    rules_doc = _read("neuron_rules.json")
    rules = tuple(
        Rule(
            id=r["id"],
            verdict=r["verdict"],
            message=r["message"],
            fix=r["fix"],
            ops=frozenset(r.get("ops", ())),
            tags=frozenset(r.get("tags", ())),
            dtypes=frozenset(r.get("dtypes", ())),
            input_dtypes=frozenset(r.get("input_dtypes", ())),
            layouts=frozenset(r.get("layouts", ())),
            targets=frozenset(r.get("targets", TARGETS)),
            ncc_code=r.get("ncc_code"),
            when=r.get("when"),
            fixes=dict(r.get("fixes", {})),
        )
        for r in rules_doc["rules"]
    )
    return SupportTable(
        version=rules_doc["version"],
        torch_xla=lowerings["torch_xla"],
        compiler=rules_doc["compiler"],
        lowered=frozenset(lowerings["ops"]),
        rules=rules,
        bookkeeping=frozenset(rules_doc["bookkeeping_ops"]),
        device_artifacts=dict(rules_doc["device_artifacts"]["ops"]),
        provenance=(lowerings["source"], *rules_doc["provenance"]),
    )


def check_target(target: str) -> str:
    if target not in TARGETS:
        raise InputError(f"--target {target!r}: unknown Neuron target; use one of {', '.join(TARGETS)}")
    return target


def _functional_key(key: str) -> str | None:
    """``add_.Tensor`` -> ``add.Tensor``: in-place ops lower through their functional form."""
    name, dot, overload = key.partition(".")
    if name.endswith("_") and not name.endswith("__"):
        return name[:-1] + dot + overload
    return None


def _rule_matches(rule: Rule, call: Any, target: str) -> bool:
    if target not in rule.targets:
        return False
    matched = False
    if rule.ops:
        if call.key not in rule.ops and call.name not in rule.ops:
            return False
        matched = True
    if rule.tags and set(call.tags) & rule.tags:
        matched = True
    if rule.layouts and any(t.layout in rule.layouts for t in [*call.inputs, *call.outputs]):
        matched = True
    if rule.dtypes:
        if not any(t.dtype in rule.dtypes for t in [*call.inputs, *call.outputs]):
            return False
        matched = True
    if rule.input_dtypes:
        if not call.inputs or call.inputs[0].dtype not in rule.input_dtypes:
            return False
        matched = True
    if rule.when is not None:
        value = call.constants.get(rule.when.get("kwarg", ""))
        if value != rule.when.get("equals"):
            return False
    return matched


def classify(call: Any, target: str = DEFAULT_TARGET, table: SupportTable | None = None) -> Classification:
    """The verdict for one captured op call (a :class:`neuronprobe.capture.OpCall`)."""
    table = table or load_table()
    key = call.key
    if call.namespace != "aten":
        return Classification(
            "cpu_fallback",
            "custom-op",
            f"{call.op} is a custom op outside the aten namespace: Neuron has no lowering for it unless you register one",
            "register a Neuron/XLA lowering for the op (an NKI kernel), or express it with aten ops",
        )
    if key in table.bookkeeping or call.name in table.bookkeeping:
        return Classification("lowered", "bookkeeping", f"{call.op} is tracer bookkeeping: no device work")
    # A boolean-mask index produces a data-dependent size even though index.Tensor lowers.
    if call.data_dependent_output and call.name not in ("_local_scalar_dense", "item"):
        rule = next(r for r in table.rules if r.id == "dynamic-output-shape")
        return Classification(rule.verdict, rule.id, rule.message, rule.fix_for(key), rule.ncc_code)
    for rule in table.rules:
        if _rule_matches(rule, call, target):
            return Classification(rule.verdict, rule.id, rule.message, rule.fix_for(key), rule.ncc_code)
    if key in table.device_artifacts:
        stands_for = table.device_artifacts[key]
        return Classification(
            "decomposed",
            "device-artifact",
            f"{call.op} is the kernel a CPU capture picks for {stands_for}; on Neuron, {stands_for} decomposes into matmul and softmax, which lower",
        )
    if key in table.lowered or (call.overload == "default" and call.name in table.lowered):
        return Classification("lowered", "xla-lowering", f"{call.op} has a torch-xla lowering ({table.torch_xla})")
    functional = _functional_key(key)
    if functional and (functional in table.lowered or functional.split(".")[0] in table.lowered):
        return Classification(
            "lowered", "xla-lowering-functional", f"{call.op} lowers through its functional form {functional}"
        )
    if call.has_composite_implicit:
        failing = [(part, classify(part, target, table)) for part in call.parts or ()]
        failing = [(part, c) for part, c in failing if c.verdict not in ("lowered", "decomposed")]
        if failing:
            part, worst = max(failing, key=lambda pc: _SEVERITY.index(pc[1].verdict))
            return Classification(
                worst.verdict,
                "composite-part",
                f"decomposes into {part.op}, which does not lower: {worst.reason}",
                worst.fix,
                worst.ncc_code,
            )
        if call.parts is None:
            return Classification(
                "decomposed",
                "composite-implicit",
                f"{call.op} is CompositeImplicitAutograd: it decomposes into other aten ops before lowering "
                "(its parts could not be replayed to check them)",
            )
        return Classification(
            "decomposed",
            "composite-implicit",
            f"{call.op} is CompositeImplicitAutograd: it decomposes into "
            f"{', '.join(p.op for p in call.parts) or 'no device work'}, all of which lower",
        )
    if call.has_composite_explicit:
        return Classification(
            "decomposed",
            "composite-explicit",
            f"{call.op} has a backend-independent (CompositeExplicitAutograd) kernel built from other aten ops",
        )
    return Classification(
        "cpu_fallback",
        "no-lowering",
        f"{call.op} has no torch-xla lowering ({table.torch_xla}) and no decomposition: torch-xla runs it on the host",
        f"replace {call.op} with ops that lower (see the op inventory), or move it out of the traced forward",
    )
