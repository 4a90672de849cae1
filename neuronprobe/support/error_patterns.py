"""The error texts of torch and the Neuron SDK that pick a verdict, read from rule data.

Some verdicts cannot come from an op's schema: an export that fails on a branch
on a tensor value, a custom op without a fake kernel, a dynamo graph break on a
data-dependent shape, a compiler that rejects an op. They are recognised by the
text the tool printed, which is the tool's wording, not an API: it changes
between releases. The texts therefore live beside the rules, in
``data/error_patterns.json``, each with the tool and versions it was checked on,
and the code only asks this module which pattern matched.

The file ships with neuronprobe, so a mistake in it is a bug in neuronprobe: it is
rejected on load with an :class:`ErrorPatternsError` (exit 3) naming the entry.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from neuronprobe.errors import InternalError
from neuronprobe.vocabulary import BreakCause

PATTERNS_FILE = "error_patterns.json"
SOURCE = f"support/data/{PATTERNS_FILE}"  # how messages name the bundled file

# Where an export-failure pattern looks: the exception's text or its class name.
FIELD_MESSAGE = "message"
FIELD_EXCEPTION_TYPE = "exception_type"
FIELDS: tuple[str, ...] = (FIELD_MESSAGE, FIELD_EXCEPTION_TYPE)
# What a failed export is (capture.CaptureFailure.kind) when a pattern matches.
EXPORT_KINDS: tuple[str, ...] = ("control_flow", "unsupported_op")
# How a matched export failure names its op: the pattern's own ``op`` group, or the first aten.<name> of the text.
OP_NAMED = "named"
OP_ATEN = "aten"
EXPORT_OP_SOURCES: tuple[str, ...] = (OP_NAMED, OP_ATEN)

_COMMON_KEYS = frozenset({"id", "checked_on", "provenance", "comment"})
_EXPORT_KEYS = _COMMON_KEYS | {"field", "regex", "ignore_case", "kind", "op"}
_BREAK_KEYS = _COMMON_KEYS | {"regex", "ignore_case", "op", "rule", "cause"}
_FAILURE_AT_KEYS = _COMMON_KEYS | {"text", "verdict"}
_TOP_KEYS = frozenset({"version", "comment", "aten_op", "export_failures", "graph_breaks", "neuronx_cc", "quiet"})
_QUIET_KEYS = _COMMON_KEYS | {"regex", "ignore_case", "action", "say"}
# What a quiet pattern does to a message shown to the user (the whole text goes to the detail):
QUIET_CUT = "cut"  # keep the text before the match
QUIET_REPLACE = "replace"  # say the pattern's own sentence instead of the matched span
QUIET_ACTIONS: tuple[str, ...] = (QUIET_CUT, QUIET_REPLACE)
_NCC_KEYS = frozenset({"diagnostic", "failure_at", "failure_at_default", "comment"})
_SINGLE_KEYS = frozenset({"regex", "verdict", "checked_on", "provenance", "comment"})

CheckedOn = tuple[tuple[str, str], ...]  # (tool, versions) pairs, e.g. (("torch", "2.13.0"),)


class ErrorPatternsError(InternalError):
    """The bundled error-pattern file is malformed: a bug in neuronprobe, named by entry."""


@dataclass(frozen=True)
class ExportFailurePattern:
    """A torch.export failure text that makes the failure a ``kind`` (control flow, unsupported op)."""

    id: str
    field: str  # FIELD_MESSAGE or FIELD_EXCEPTION_TYPE
    regex: re.Pattern[str]
    kind: str  # one of EXPORT_KINDS
    op: str | None  # OP_NAMED, OP_ATEN or None (the failure names no op)
    checked_on: CheckedOn
    provenance: str


@dataclass(frozen=True)
class GraphBreakPattern:
    """A dynamo graph-break reason that makes the broken-off code a finding of rule ``rule``."""

    id: str
    regex: re.Pattern[str]
    rule: str  # a rule id of the support table (or a built-in break rule of analysis.py)
    op: str  # OP_ATEN (the aten.<name>.<overload> the reason names) or a placeholder such as "<sparse tensor>"
    cause: BreakCause  # what kind of thing broke the graph, as the report names it
    checked_on: CheckedOn
    provenance: str


@dataclass(frozen=True)
class FailureAtVerdict:
    """torch_neuronx.analyze's ``failureAt`` text and the verdict it means."""

    id: str
    text: str
    verdict: str
    checked_on: CheckedOn
    provenance: str


@dataclass(frozen=True)
class QuietPattern:
    """Text of torch's that never reaches the normal output (issue 33.7, 33.8): a dispatcher's list of
    backends, a PyTorch internal assertion. It is cut (or replaced by ``say``); the whole text is the detail."""

    id: str
    regex: re.Pattern[str]
    action: str  # QUIET_CUT or QUIET_REPLACE
    say: str
    checked_on: CheckedOn
    provenance: str


@dataclass(frozen=True)
class Quieted:
    """A message as the user sees it, and the whole text (empty when nothing was taken out)."""

    shown: str
    detail: str = ""


@dataclass(frozen=True)
class ErrorPatterns:
    """The whole file, validated."""

    version: str
    aten_op: re.Pattern[str]  # groups "name" and "overload" (optional)
    export_failures: tuple[ExportFailurePattern, ...]
    graph_breaks: tuple[GraphBreakPattern, ...]
    ncc_diagnostic: re.Pattern[str]  # groups "code" and "message"
    ncc_diagnostic_verdict: str
    failure_at: tuple[FailureAtVerdict, ...]
    failure_at_default: str
    quiet: tuple[QuietPattern, ...] = ()

    def quieted(self, text: str) -> Quieted:
        """``text`` without the parts torch's users should not have to read; the whole of it as the detail."""
        shown = text
        for pattern in self.quiet:
            m = pattern.regex.search(shown)
            if m is None:
                continue
            if pattern.action == QUIET_REPLACE:  # the matched span (the assertion's own text) becomes the pattern's sentence
                shown = shown[: m.start()] + pattern.say + shown[m.end() :]
                continue
            shown = shown[: m.start()].rstrip(" .:;,\n") + "."
        return Quieted(shown, text if shown != text else "")

    def failure_at_verdict(self, failure_at: str) -> str:
        """The verdict of an op torch_neuronx.analyze reports unsupported at ``failure_at``."""
        for entry in self.failure_at:
            if entry.text == failure_at:
                return entry.verdict
        return self.failure_at_default

    def export_failure(self, message: str, exception_type: str) -> tuple[ExportFailurePattern, str | None] | None:
        """The first export-failure pattern that matches, with the op it names (``aten::x`` or ``ns::op``)."""
        for pattern in self.export_failures:
            m = pattern.regex.search(message if pattern.field == FIELD_MESSAGE else exception_type)
            if m is None:
                continue
            if pattern.op == OP_NAMED:
                return pattern, m.group("op")
            if pattern.op == OP_ATEN:
                aten = self.aten_op.search(message)
                return pattern, f"aten::{aten.group('name')}" if aten else None
            return pattern, None
        return None

    def graph_break(self, reason: str) -> tuple[GraphBreakPattern, str] | None:
        """The first graph-break pattern that matches ``reason``, with the op key it names (``nonzero``, ``index.Tensor``)."""
        for pattern in self.graph_breaks:
            if not pattern.regex.search(reason):
                continue
            if pattern.op != OP_ATEN:
                return pattern, pattern.op
            for aten in self.aten_op.finditer(reason):  # a reason that names no aten.<name>.<overload> is not this one
                name, overload = aten.group("name"), aten.group("overload")
                if overload:
                    return pattern, name if overload == "default" else f"{name}.{overload}"
        return None


# --- reading and checking ------------------------------------------------------------------


def _fail(source: str, where: str, why: str) -> ErrorPatternsError:
    return ErrorPatternsError(f"{source}: {where}: {why}")


def _object(value: object, source: str, where: str, keys: frozenset[str]) -> dict[str, object]:
    if not isinstance(value, dict):
        raise _fail(source, where, "must be a JSON object")
    unknown = sorted(set(value) - keys)
    if unknown:
        raise _fail(source, where, f"unknown key(s) {', '.join(unknown)}")
    return value


def _text(entry: dict[str, object], key: str, source: str, where: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value:
        raise _fail(source, where, f'needs a non-empty string "{key}"')
    return value


def _choice(entry: dict[str, object], key: str, choices: tuple[str, ...], source: str, where: str) -> str:
    value = _text(entry, key, source, where)
    if value not in choices:
        raise _fail(source, where, f"{key} {value!r} is not one of {', '.join(choices)}")
    return value


def _regex(entry: dict[str, object], source: str, where: str, groups: tuple[str, ...] = ()) -> re.Pattern[str]:
    text = _text(entry, "regex", source, where)
    ignore_case = entry.get("ignore_case", False)
    if not isinstance(ignore_case, bool):
        raise _fail(source, where, '"ignore_case" must be true or false')
    try:
        compiled = re.compile(text, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise _fail(source, where, f"regex {text!r} does not compile ({exc})") from None
    missing = [g for g in groups if g not in compiled.groupindex]
    if missing:
        raise _fail(source, where, f"regex {text!r} needs the named group(s) {', '.join(missing)}")
    return compiled


def _provenance(entry: dict[str, object], source: str, where: str) -> tuple[CheckedOn, str]:
    """Every pattern says which tool printed the text and on which versions it was checked."""
    checked = entry.get("checked_on")
    if not isinstance(checked, dict) or not checked or not all(isinstance(k, str) and isinstance(v, str) and v for k, v in checked.items()):
        raise _fail(source, where, '"checked_on" must be a non-empty object of tool -> versions, e.g. {"torch": "2.13.0"}')
    return tuple(sorted(checked.items())), _text(entry, "provenance", source, where)


def _entries(doc: dict[str, object], key: str, source: str) -> list[tuple[str, dict[str, object]]]:
    """The list under ``key`` as (name for messages, entry); ids must be unique within it."""
    items = doc.get(key)
    if not isinstance(items, list):
        raise _fail(source, key, "must be a list of patterns")
    out: list[tuple[str, dict[str, object]]] = []
    seen: set[str] = set()
    for index, item in enumerate(items):
        where = f"{key}[{index}]"
        if not isinstance(item, dict) or not isinstance(item.get("id"), str) or not item["id"]:
            raise _fail(source, where, 'every pattern needs a string "id"')
        where = f"{where} ({item['id']})"
        if item["id"] in seen:
            raise _fail(source, where, "the id is used twice")
        seen.add(item["id"])
        out.append((where, item))
    return out


def _export_failure(entry: dict[str, object], source: str, where: str) -> ExportFailurePattern:
    _object(entry, source, where, _EXPORT_KEYS)
    op = entry.get("op")
    if op is not None and op not in EXPORT_OP_SOURCES:
        raise _fail(source, where, f"op {op!r} is not one of {', '.join(EXPORT_OP_SOURCES)}")
    checked_on, provenance = _provenance(entry, source, where)
    return ExportFailurePattern(
        id=_text(entry, "id", source, where),
        field=_choice(entry, "field", FIELDS, source, where),
        regex=_regex(entry, source, where, ("op",) if op == OP_NAMED else ()),
        kind=_choice(entry, "kind", EXPORT_KINDS, source, where),
        op=op if isinstance(op, str) else None,
        checked_on=checked_on,
        provenance=provenance,
    )


def _graph_break(entry: dict[str, object], source: str, where: str) -> GraphBreakPattern:
    _object(entry, source, where, _BREAK_KEYS)
    op = _text(entry, "op", source, where)
    if op != OP_ATEN and not op.startswith("<"):
        raise _fail(source, where, f'op {op!r} must be "aten" (the op the reason names) or a placeholder in <angle brackets>')
    checked_on, provenance = _provenance(entry, source, where)
    return GraphBreakPattern(
        id=_text(entry, "id", source, where),
        regex=_regex(entry, source, where),
        rule=_text(entry, "rule", source, where),
        op=op,
        cause=BreakCause(_choice(entry, "cause", BreakCause.values(), source, where)),
        checked_on=checked_on,
        provenance=provenance,
    )


def _failure_at(entry: dict[str, object], source: str, where: str, verdicts: tuple[str, ...]) -> FailureAtVerdict:
    _object(entry, source, where, _FAILURE_AT_KEYS)
    checked_on, provenance = _provenance(entry, source, where)
    return FailureAtVerdict(
        id=_text(entry, "id", source, where),
        text=_text(entry, "text", source, where),
        verdict=_choice(entry, "verdict", verdicts, source, where),
        checked_on=checked_on,
        provenance=provenance,
    )


def _quiet(entry: dict[str, object], source: str, where: str) -> QuietPattern:
    _object(entry, source, where, _QUIET_KEYS)
    checked_on, provenance = _provenance(entry, source, where)
    action = _choice(entry, "action", QUIET_ACTIONS, source, where)
    say = _text(entry, "say", source, where) if action == QUIET_REPLACE else ""
    return QuietPattern(
        id=_text(entry, "id", source, where),
        regex=_regex(entry, source, where),
        action=action,
        say=say,
        checked_on=checked_on,
        provenance=provenance,
    )


def parse_error_patterns(doc: object, source: str = SOURCE) -> ErrorPatterns:
    """Validate the parsed JSON into :class:`ErrorPatterns`; the first problem raises, naming its entry."""
    from neuronprobe.vocabulary import PROBLEM_VERDICTS

    top = _object(doc, source, "the file", _TOP_KEYS)
    version = _text(top, "version", source, "the file")
    aten = _object(top.get("aten_op"), source, "aten_op", _SINGLE_KEYS - {"verdict"})
    _provenance(aten, source, "aten_op")
    ncc = _object(top.get("neuronx_cc"), source, "neuronx_cc", _NCC_KEYS)
    diagnostic = _object(ncc.get("diagnostic"), source, "neuronx_cc.diagnostic", _SINGLE_KEYS)
    _provenance(diagnostic, source, "neuronx_cc.diagnostic")
    failure_at = [(f"neuronx_cc.{where}", entry) for where, entry in _entries(ncc, "failure_at", source)]
    return ErrorPatterns(
        version=version,
        aten_op=_regex(aten, source, "aten_op", ("name", "overload")),
        export_failures=tuple(_export_failure(e, source, w) for w, e in _entries(top, "export_failures", source)),
        graph_breaks=tuple(_graph_break(e, source, w) for w, e in _entries(top, "graph_breaks", source)),
        ncc_diagnostic=_regex(diagnostic, source, "neuronx_cc.diagnostic", ("code", "message")),
        ncc_diagnostic_verdict=_choice(diagnostic, "verdict", PROBLEM_VERDICTS, source, "neuronx_cc.diagnostic"),
        failure_at=tuple(_failure_at(e, source, w, PROBLEM_VERDICTS) for w, e in failure_at),
        failure_at_default=_choice(ncc, "failure_at_default", PROBLEM_VERDICTS, source, "neuronx_cc"),
        quiet=tuple(_quiet(e, source, w) for w, e in _entries(top, "quiet", source)) if "quiet" in top else (),
    )


@lru_cache(maxsize=1)
def load_error_patterns() -> ErrorPatterns:
    """The bundled patterns, read and validated once per process."""
    text = resources.files("neuronprobe.support").joinpath("data", PATTERNS_FILE).read_text(encoding="utf-8")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ErrorPatternsError(f"{SOURCE}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    return parse_error_patterns(doc)


def quieted(text: str) -> Quieted:
    """``text`` as the normal output shows it (see :meth:`ErrorPatterns.quieted`)."""
    return load_error_patterns().quieted(text)


__all__ = [
    "ErrorPatterns",
    "ErrorPatternsError",
    "ExportFailurePattern",
    "FailureAtVerdict",
    "GraphBreakPattern",
    "QuietPattern",
    "Quieted",
    "load_error_patterns",
    "parse_error_patterns",
    "quieted",
]
