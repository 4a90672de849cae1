"""HLO checks: what neuronx-cc rejects, read from the HLO torch-xla builds.

neuronx-cc is not on PyPI, but many of its documented rejections are patterns in
its input, the HLO module: an integer ``dot`` (NCC_EVRF035), a scatter that adds
integers (NCC_EVRF060), complex types (NCC_EVRF004), an unknown custom-call target
(NCC_EHCA005), dynamically sized shapes (NCC_EMOD025). The patterns and their NCC
codes are data (``data/hlo_rules.json``, with provenance); this module parses HLO
text and applies them. Pure: text in, :class:`HloHit` out.

Each hit is placed at the user's line: the ``op_name`` tag that
:mod:`neuronprobe.backends.xla_observe` puts on each op's IR (``np@FILE:LINE@``),
else the ``source_file``/``source_line`` metadata of ``XLA_HLO_DEBUG=1`` when it is
the user's file, else the aten op (``op_type``) for the caller to place.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from neuronprobe.backends.xla_observe import TAG_PREFIX, is_library_path

RULES_FILE = Path(__file__).parent / "data" / "hlo_rules.json"
INTEGER_TYPES = frozenset({"s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64"})

_INSTRUCTION = re.compile(
    r"^\s*(?:ROOT\s+)?%(?P<name>[\w.\-]+)\s*=\s*(?P<type>\([^=]*?\)|[a-z0-9]+\[[^\]]*\](?:\{[^}]*\})?|[a-z0-9]+\[\])\s+"
    r"(?P<opcode>[a-z][\w\-]*)\((?P<operands>.*?)\)(?P<rest>.*)$"
)
_COMPUTATION = re.compile(r"^\s*(?:ENTRY\s+)?%(?P<name>[\w.\-]+)\s*(?:\(.*\))?\s*->.*\{\s*$")
_TYPE = re.compile(r"\b(?P<dtype>pred|[a-z]+\d+(?:e\d+m\d+\w*)?)\[(?P<dims>[^\]]*)\]")
_META = re.compile(r'(?P<key>op_type|op_name|source_file)="(?P<value>(?:[^"\\]|\\.)*)"|source_line=(?P<line>\d+)')
_TO_APPLY = re.compile(r"to_apply=%(?P<name>[\w.\-]+)")
_TARGET = re.compile(r'custom_call_target="(?P<target>[^"]+)"')
_TAG = re.compile(re.escape(TAG_PREFIX) + r"(?P<file>.+?):(?P<line>\d+)@(?P<op>[\w:.]*)@")


@dataclass
class HloInstruction:
    name: str
    opcode: str
    result_type: str
    operand_types: list[str]
    computation: str
    attributes: str = ""
    op_type: str = ""  # "aten__mm"
    op_name: str = ""
    source_file: str | None = None
    source_line: int | None = None

    def dtypes(self, nonscalar: bool = False) -> set[str]:
        text = self.result_type + " " + " ".join(self.operand_types)
        return {m.group("dtype") for m in _TYPE.finditer(text) if not nonscalar or m.group("dims").strip()}

    def operand_dtypes(self, index: int | None = None) -> set[str]:
        operands = self.operand_types if index is None else self.operand_types[index : index + 1]
        return {m.group("dtype") for m in _TYPE.finditer(" ".join(operands))}

    def aten_op(self) -> str | None:
        """The dispatched op that built it (from the tag), else torch-xla's op_type (``aten__mm`` -> ``aten::mm``).

        The tag is the truth where they differ: torch-xla builds a sort's IR as TopK, so
        ``torch.sort`` and ``torch.topk`` both have op_type ``aten__topk``.
        """
        m = _TAG.search(self.op_name)
        if m and m.group("op"):
            return m.group("op")
        if not self.op_type.startswith("aten__"):
            return None
        return "aten::" + self.op_type[len("aten__") :]

    def user_place(self) -> tuple[str | None, int | None]:
        m = _TAG.search(self.op_name)
        if m:
            return m.group("file"), int(m.group("line"))
        if self.source_file and not _installed(self.source_file) and not is_library_path(self.source_file):
            return self.source_file, self.source_line
        return None, None


def _installed(path: str) -> bool:
    """A file of an installed package (the worker's torch is not this process's torch)."""
    return "site-packages" in path or "dist-packages" in path


@dataclass
class HloModule:
    instructions: list[HloInstruction] = field(default_factory=list)
    roots: dict[str, str] = field(default_factory=dict)  # computation -> opcode of its ROOT

    def computation_kind(self, name: str) -> str | None:
        return self.roots.get(name)


def _split_operands(text: str) -> list[str]:
    """``f32[2,8]{1,0} %p3.14, s64[] %c`` -> the operand types (what each operand's dtype is)."""
    return [m.group(0) for m in _TYPE.finditer(text)]


def parse_hlo(text: str) -> HloModule:
    """The instructions of an HLO module's text (every computation), with their metadata."""
    module = HloModule()
    computation = ""
    for raw in text.splitlines():
        line = raw.rstrip()
        header = _COMPUTATION.match(line)
        if header and "=" not in line.split("->", 1)[0].split("(", 1)[0]:
            computation = header.group("name")
            continue
        m = _INSTRUCTION.match(line)
        if not m:
            continue
        rest = m.group("rest")
        meta = {"op_type": "", "op_name": "", "source_file": None}
        source_line = None
        for mm in _META.finditer(rest):
            if mm.group("line"):
                source_line = int(mm.group("line"))
            else:
                meta[mm.group("key")] = mm.group("value")
        inst = HloInstruction(
            name=m.group("name"),
            opcode=m.group("opcode"),
            result_type=m.group("type"),
            operand_types=_split_operands(m.group("operands")),
            computation=computation,
            attributes=rest,
            op_type=meta["op_type"] or "",
            op_name=meta["op_name"] or "",
            source_file=meta["source_file"],
            source_line=source_line,
        )
        module.instructions.append(inst)
        if line.lstrip().startswith("ROOT"):
            module.roots[computation] = inst.opcode
    return module


@dataclass
class HloRule:
    id: str
    message: str
    fix: str
    ncc_code: str | None = None
    opcodes: list[str] = field(default_factory=list)
    operand_dtypes: list[str] = field(default_factory=list)
    any_dtypes: list[str] = field(default_factory=list)
    computations: list[str] = field(default_factory=list)
    known_custom_calls: list[str] = field(default_factory=list)
    dynamic_dims: bool = False
    nonscalar: bool = False  # any_dtypes: only on tensors of rank >= 1 (torch-xla's f64[] scalar constants are not)
    op_types: list[str] = field(default_factory=list)  # only instructions built by these aten ops ("aten::sort")
    operand_index: int | None = None  # operand_dtypes: only this operand (a sort's keys, not its iota indices)
    targets: list[str] = field(default_factory=list)  # empty: every target


@dataclass
class HloRuleSet:
    version: str
    provenance: list[str]
    rules: list[HloRule]


@lru_cache(maxsize=1)
def load_rules(path: str = str(RULES_FILE)) -> HloRuleSet:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return HloRuleSet(
        version=str(data.get("version", "")),
        provenance=list(data.get("provenance", [])),
        rules=[HloRule(**r) for r in data["rules"]],
    )


@dataclass
class HloHit:
    """One instruction a rule matched."""

    rule: HloRule
    instruction: HloInstruction
    message: str
    file: str | None
    line: int | None
    aten_op: str | None


def _matches(rule: HloRule, inst: HloInstruction, module: HloModule) -> dict[str, str] | None:
    """The message fields when ``rule`` fires on ``inst``, else None."""
    if rule.opcodes and inst.opcode not in rule.opcodes and not (rule.dynamic_dims and "<=" in inst.result_type):
        return None
    if rule.op_types:
        op = inst.aten_op() or ""
        if not any(op == t or op.startswith(t + ".") for t in rule.op_types):
            return None
    fields: dict[str, str] = {"shape": inst.result_type, "target": "", "computation": "", "dtype": ""}
    if rule.operand_dtypes:
        hit = sorted(inst.operand_dtypes(rule.operand_index) & set(rule.operand_dtypes))
        if not hit:
            return None
        fields["dtype"] = ", ".join(hit)
    if rule.any_dtypes:
        hit = sorted(inst.dtypes(nonscalar=rule.nonscalar) & set(rule.any_dtypes))
        if not hit:
            return None
        fields["dtype"] = ", ".join(hit)
    if rule.computations:
        m = _TO_APPLY.search(inst.attributes)
        kind = module.computation_kind(m.group("name")) if m else None
        if kind not in rule.computations:
            return None
        fields["computation"] = kind or ""
    if rule.known_custom_calls:
        m = _TARGET.search(inst.attributes)
        target = m.group("target") if m else "?"
        if target in rule.known_custom_calls:
            return None
        fields["target"] = target
    return fields


def check_hlo(text: str, target: str, rules: HloRuleSet | None = None) -> list[HloHit]:
    """Every (rule, instruction) match in one HLO module, for ``target``."""
    rules = rules or load_rules()
    module = parse_hlo(text)
    active = [r for r in rules.rules if not r.targets or target in r.targets]
    hits: list[HloHit] = []
    for inst in module.instructions:
        for rule in active:
            fields = _matches(rule, inst, module)
            if fields is None:
                continue
            file, line = inst.user_place()
            hits.append(HloHit(rule, inst, rule.message.format(**fields), file, line, inst.aten_op()))
    return hits


def summarize_hits(hits: list[HloHit]) -> list[dict[str, Any]]:
    """One entry per (rule, place): the count of instructions and one example."""
    groups: dict[tuple[str, str | None, int | None, str | None], dict[str, Any]] = {}
    for h in hits:
        key = (h.rule.id, h.file, h.line, h.aten_op if h.file is None else None)
        entry = groups.setdefault(
            key,
            {
                "rule": h.rule.id,
                "ncc_code": h.rule.ncc_code,
                "message": h.message,
                "fix": h.rule.fix,
                "file": h.file,
                "line": h.line,
                "aten_op": h.aten_op,
                "count": 0,
                "example": f"{h.instruction.result_type} {h.instruction.opcode}({', '.join(h.instruction.operand_types)})",
                "aten_ops": [],
            },
        )
        entry["count"] += 1
        if h.aten_op and h.aten_op not in entry["aten_ops"]:
            entry["aten_ops"].append(h.aten_op)
        if entry["aten_op"] is None and h.aten_op:
            entry["aten_op"] = h.aten_op
    return list(groups.values())


__all__ = ["HloHit", "HloInstruction", "HloRule", "check_hlo", "load_rules", "parse_hlo", "summarize_hits"]
