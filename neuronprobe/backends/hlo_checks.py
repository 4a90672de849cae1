"""HLO checks: what neuronx-cc rejects, read from the HLO torch-xla builds.

neuronx-cc is not on PyPI, but many of its documented rejections are patterns in
its input, the HLO module: an integer ``dot`` (NCC_EVRF035), a scatter that adds
integers (NCC_EVRF060), complex types (NCC_EVRF004), an unknown custom-call target
(NCC_EHCA005), dynamically sized shapes (NCC_EMOD025), a reduce-window over other
than two operands (NCC_EVRF019, torch.cummax). The patterns and their NCC codes are
data (``data/hlo_rules.json``, with provenance; ``data/hlo_inventory.md`` says for
every code of the catalogue whether it is decidable from HLO text and which rule
checks it); this module parses HLO text and applies them. Pure: text in,
:class:`HloHit` out.

The HLO comes from torch-xla on the CPU, which keeps f64, s16 and u16; a Neuron
device computes them as f32, s32 and u32 (:mod:`neuronprobe.support.device_dtypes`).
Rules judge each instruction in the device's types; a ``device_mapped`` rule (f64)
sees the CPU's types and fires only on those the device narrows: a precision note.

The reader splits a line by bracket nesting, not by one pattern: tuple types,
``/*index=5*/`` comments and quoted metadata cannot cut a field short, and a line
of any other shape is skipped, never an exception (property-tested over the HLO of
OpInfo samples, ``tests/data/hlo_corpus.json``).

Each hit is placed at the user's line: the ``op_name`` tag that
:mod:`neuronprobe.backends.xla_observe` puts on each op's IR (``np@FILE:LINE@``),
else the ``source_file``/``source_line`` metadata of ``XLA_HLO_DEBUG=1`` when it is
the user's file, else the aten op (``op_type``) for the caller to place.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from neuronprobe.backends.xla_observe import TAG_PREFIX
from neuronprobe.usercode import is_installed, is_library
from neuronprobe.vocabulary import Verdict

RULES_FILE = Path(__file__).parent / "data" / "hlo_rules.json"
INTEGER_TYPES = frozenset({"s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64"})
# Instructions that only pack values computed elsewhere (the graph's output tuple): a dtype rule judges
# the values where they are made, so a tuple of them is not one more finding at "unknown location".
PACKING_OPCODES = frozenset({"tuple"})

_NAME = re.compile(r"\s*(?:ROOT\s+)?%(?P<name>[^\s=]+)\s*=\s*")
_ARRAY_TYPE = re.compile(r"[a-z][a-z0-9]*\[[^\]]*\](?:\{[^}]*\})?")
_OPCODE = re.compile(r"\s*(?P<opcode>[a-z][\w\-]*)\(")
_COMPUTATION = re.compile(r"^\s*(?:ENTRY\s+)?%(?P<name>[\w.\-]+)\s*(?:\(.*\))?\s*->.*\{\s*$")
_TYPE = re.compile(r"\b(?P<dtype>pred|[a-z]+\d+(?:e\d+m\d+\w*)?)\[(?P<dims>[^\]]*)\]")
_META = re.compile(r'(?P<key>op_type|op_name|source_file)="(?P<value>(?:[^"\\]|\\.)*)"|source_line=(?P<line>\d+)')
_TO_APPLY = re.compile(r"to_apply=%(?P<name>[\w.\-]+)")
_TARGET = re.compile(r'custom_call_target="(?P<target>[^"]+)"')
_TAG = re.compile(re.escape(TAG_PREFIX) + r"(?P<file>.+?):(?P<line>\d+)@(?P<op>[\w:.]*)@")
_WINDOW = re.compile(r"\bwindow=\{(?P<body>[^}]*)\}")
_ATTRIBUTE = re.compile(r"\b(?P<key>[a-z_]+)=(?P<value>[\w.\-]+)")
_CLOSE = {"(": ")", "{": "}", "[": "]"}


def _closing(text: str, start: int) -> int:
    """The index just past the bracket that closes ``text[start]``, skipping quoted strings; -1 if it never closes."""
    stack: list[str] = []
    quoted = False
    i = start
    while i < len(text):
        ch = text[i]
        if quoted:
            if ch == "\\":
                i += 1
            elif ch == '"':
                quoted = False
        elif ch == '"':
            quoted = True
        elif ch in _CLOSE:
            stack.append(_CLOSE[ch])
        elif ch in ")}]":
            if not stack or stack.pop() != ch:
                return -1
            if not stack:
                return i + 1
        i += 1
    return -1


def _split_top(text: str) -> list[str]:
    """``a, (b, c), d`` -> ``["a", "(b, c)", "d"]``: commas outside brackets and quotes."""
    parts: list[str] = []
    depth, quoted, current = 0, False, []
    i = 0
    while i < len(text):
        ch = text[i]
        current.append(ch)
        if quoted:
            if ch == "\\" and i + 1 < len(text):
                current.append(text[i + 1])
                i += 1
            elif ch == '"':
                quoted = False
        elif ch == '"':
            quoted = True
        elif ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth = max(depth - 1, 0)
        elif ch == "," and depth == 0:
            current.pop()
            parts.append("".join(current).strip())
            current = []
        i += 1
    tail = "".join(current).strip()
    if tail or parts:
        parts.append(tail)
    return [p for p in parts if p]


def split_instruction(line: str) -> tuple[str, str, str, str, str] | None:
    """``(name, result type, opcode, operands text, rest)`` of one HLO instruction line, or None when it is not one.

    Reads brackets by nesting, never by pattern alone, so that a tuple result type
    (``(f32[2]{0}, (s32[], u32[]))``), an operand of tuple type or a quoted string with
    a parenthesis in it cannot cut a field short. Never raises: any line that does not
    have the shape is not an instruction.
    """
    head = _NAME.match(line)
    if not head:
        return None
    pos = head.end()
    if line.startswith("(", pos):
        end = _closing(line, pos)
        if end < 0:
            return None
    else:
        m = _ARRAY_TYPE.match(line, pos)
        if not m:
            return None
        end = m.end()
    result_type = line[pos:end]
    op = _OPCODE.match(line, end)
    if not op:
        return None
    open_at = op.end() - 1
    close = _closing(line, open_at)
    if close < 0:
        return None
    return head.group("name"), result_type, op.group("opcode"), line[open_at + 1 : close - 1], line[close:]


def window_sizes(attributes: str) -> dict[str, list[int]]:
    """``window={size=1x3 stride=1x2 lhs_dilate=1x2}`` -> ``{"size": [1, 3], "stride": [1, 2], "lhs_dilate": [1, 2]}``."""
    m = _WINDOW.search(attributes)
    if not m:
        return {}
    out: dict[str, list[int]] = {}
    for item in m.group("body").split():
        key, _, value = item.partition("=")
        if key and value and all(v.isdigit() for v in value.split("x")):
            out[key] = [int(v) for v in value.split("x")]
    return out


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
    operand_count: int = 0  # top-level operands (a variadic reduce-window has 4: two inputs, two inits)
    operands_text: str = ""  # what is inside the parentheses (a constant's literal)

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
        if self.source_file and not is_installed(self.source_file) and not is_library(self.source_file):
            return self.source_file, self.source_line
        return None, None

    def on_device(self, mapping: dict[str, str]) -> HloInstruction:
        """The instruction with each element type as the device computes it (``f64`` -> ``f32`` on Neuron)."""
        if not mapping:
            return self

        def swap(text: str) -> str:
            return _TYPE.sub(lambda m: f"{mapping.get(m.group('dtype'), m.group('dtype'))}[{m.group('dims')}]", text)

        return replace(self, result_type=swap(self.result_type), operand_types=[swap(t) for t in self.operand_types])


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
    """The instructions of an HLO module's text (every computation), with their metadata.

    Lines of any other shape (the module header, comments, closing braces, a line cut
    short) are skipped: the reader never raises on text (a property test holds it to that
    over the HLO of the OpInfo samples, ``tests/data/hlo_corpus.json``).
    """
    module = HloModule()
    computation = ""
    for raw in text.splitlines():
        line = raw.rstrip()
        parts = split_instruction(line)
        if parts is None:
            header = _COMPUTATION.match(line)
            if header:
                computation = header.group("name")
            continue
        name, result_type, opcode, operands, rest = parts
        meta: dict[str, str | None] = {"op_type": "", "op_name": "", "source_file": None}
        source_line = None
        for mm in _META.finditer(rest):
            if mm.group("line"):
                source_line = int(mm.group("line"))
            else:
                meta[mm.group("key")] = mm.group("value")
        inst = HloInstruction(
            name=name,
            opcode=opcode,
            result_type=result_type,
            operand_types=_split_operands(operands),
            computation=computation,
            attributes=rest,
            op_type=meta["op_type"] or "",
            op_name=meta["op_name"] or "",
            source_file=meta["source_file"],
            source_line=source_line,
            operand_count=len(_split_top(operands)),
            operands_text=operands,
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
    verdict: str = Verdict.COMPILE_ERROR  # or Verdict.PRECISION (a note: compiles, results differ)
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
    # the dtypes as torch-xla wrote them on the CPU, and only those the device's mapping narrows ({device_dtype})
    device_mapped: bool = False
    operand_count_ne: int | None = None  # fires when the instruction has another number of operands
    window_gt: dict[str, int] = field(default_factory=dict)  # window={...} fields with an element above the bound (all must)
    attribute_ne: dict[str, str] = field(default_factory=dict)  # key=value attributes present with another value
    constant_gt: int | None = None  # a constant whose integer literal is above this
    provenance: str = ""
    comment: str = ""


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


def _literal(text: str) -> int | None:
    value = text.strip()
    return int(value) if value.lstrip("-").isdigit() else None


def _matches(rule: HloRule, inst: HloInstruction, module: HloModule, mapping: dict[str, str]) -> dict[str, str] | None:
    """The message fields when ``rule`` fires on ``inst``, else None.

    ``inst`` is as torch-xla wrote it on the CPU; every rule but a ``device_mapped`` one
    judges it in the types the device computes in (``mapping``).
    """
    if rule.opcodes and inst.opcode not in rule.opcodes and not (rule.dynamic_dims and "<=" in inst.result_type):
        return None
    if rule.op_types:
        op = inst.aten_op() or ""
        if not any(op == t or op.startswith(t + ".") for t in rule.op_types):
            return None
    fields: dict[str, str] = {
        "shape": inst.result_type,
        "target": "",
        "computation": "",
        "dtype": "",
        "device_dtype": "",
        "operands": str(inst.operand_count),
        "window": "",
    }
    seen = inst if rule.device_mapped else inst.on_device(mapping)
    if rule.operand_dtypes:
        hit = sorted(seen.operand_dtypes(rule.operand_index) & set(rule.operand_dtypes))
        if not hit:
            return None
        fields["dtype"] = ", ".join(hit)
    if rule.any_dtypes:
        if inst.opcode in PACKING_OPCODES:
            return None
        hit = sorted(seen.dtypes(nonscalar=rule.nonscalar) & set(rule.any_dtypes))
        if rule.device_mapped:
            hit = [d for d in hit if mapping.get(d, d) != d]
        if not hit:
            return None
        fields["dtype"] = ", ".join(hit)
        fields["device_dtype"] = ", ".join(sorted({mapping.get(d, d) for d in hit}))
    if rule.operand_count_ne is not None and inst.operand_count == rule.operand_count_ne:
        return None
    if rule.window_gt:
        window = window_sizes(inst.attributes)
        if not all(any(v > bound for v in window.get(key, [])) for key, bound in rule.window_gt.items()):
            return None
        fields["window"] = " ".join(f"{k}={'x'.join(map(str, window[k]))}" for k in rule.window_gt)
    if rule.attribute_ne:
        found = {m.group("key"): m.group("value") for m in _ATTRIBUTE.finditer(inst.attributes)}
        if not any(key in found and found[key] != value for key, value in rule.attribute_ne.items()):
            return None
        fields["target"] = ", ".join(f"{k}={found[k]}" for k in rule.attribute_ne if k in found)
    if rule.constant_gt is not None:
        value = _literal(inst.operands_text)
        if inst.opcode != "constant" or value is None or value <= rule.constant_gt:
            return None
        fields["target"] = str(value)
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


def check_hlo(text: str, target: str, rules: HloRuleSet | None = None, mapping: dict[str, str] | None = None) -> list[HloHit]:
    """Every (rule, instruction) match in one HLO module, for ``target``.

    ``mapping`` is the device's dtype mapping on HLO element types (``{"f64": "f32"}``,
    :meth:`neuronprobe.support.device_dtypes.DeviceDtypes.hlo_mapping`); None: the target's
    own, with no environment variable set.
    """
    rules = rules or load_rules()
    if mapping is None:
        from neuronprobe.support.device_dtypes import device_dtypes

        mapping = device_dtypes(target).hlo_mapping()
    module = parse_hlo(text)
    active = [r for r in rules.rules if not r.targets or target in r.targets]
    hits: list[HloHit] = []
    for inst in module.instructions:
        for rule in active:
            fields = _matches(rule, inst, module, mapping)
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
                "verdict": h.rule.verdict,
                "ncc_code": h.rule.ncc_code,
                "message": h.message,
                "fix": h.rule.fix,
                "file": h.file,
                "line": h.line,
                "aten_op": h.aten_op,
                "opcode": h.instruction.opcode,
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


__all__ = ["HloHit", "HloInstruction", "HloRule", "check_hlo", "load_rules", "parse_hlo", "split_instruction", "summarize_hits", "window_sizes"]
