"""Reading and checking the rule file (``data/neuron_rules.json`` or a user's own).

The rules are data people edit by hand, so every mistake must be caught on load
with the rule's id in the message, not show up as a rule that silently never
fires: an unknown key, a verdict outside the closed set, a malformed NCC code,
an SDK release the file does not list, a condition that cannot be read, and a
condition naming an argument the rule's ops do not have (checked against
torch's own op schemas by :func:`check_rule_arguments`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from neuronprobe.errors import InputError
from neuronprobe.support.conditions import OUTPUT_NAME, ConditionError, parse_condition, schema_arguments
from neuronprobe.support.rule import TARGETS, Rule, release_key
from neuronprobe.vocabulary import Verdict

RULE_KEYS = frozenset(
    {
        "id",
        "verdict",
        "message",
        "fix",
        "ops",
        "tags",
        "dtypes",
        "input_dtypes",
        "layouts",
        "targets",
        "ncc_code",
        "when",
        "fixes",
        "not_ops",
        "sdk_from",
        "sdk_fixed",
        "provenance",
        "comment",
        "override",
    }
)
LIST_KEYS = ("ops", "not_ops", "tags", "dtypes", "input_dtypes", "layouts", "targets")
RULE_VERDICTS = ("cpu_fallback", "dynamic_shape", "control_flow", "compile_error")
NCC_CODE = re.compile(r"^NCC_[A-Z]{4}\d{3}$")
RELEASE = re.compile(r"^\d{1,4}(\.\d{1,4}){1,3}$")  # a Neuron SDK release: 2.31.0


def _short(value: Any) -> str:
    """A value as an error quotes it: JSON, cut at 80 characters (a hostile one may be huge or deep)."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError, RecursionError):
        text = type(value).__name__
    return text if len(text) <= 80 else text[:77] + "..."


def _fail(source: str, rule_id: str, why: str) -> InputError:
    return InputError(f"{source}: rule {rule_id!r}: {why}")


def parse_rule(doc: Any, source: str, releases: dict[str, str]) -> Any:
    """One rule object -> :class:`neuronprobe.support.Rule`; :class:`InputError` names the rule."""
    if not isinstance(doc, dict) or not isinstance(doc.get("id"), str) or not doc["id"]:
        raise InputError(f'{source}: every rule needs a string "id"; got {_short(doc)}')
    rid = doc["id"]
    if len(rid) > 100 or not rid.isprintable():
        raise InputError(f"{source}: rule id {_short(rid)} must be printable and at most 100 characters")
    unknown = sorted(set(doc) - RULE_KEYS)
    if unknown:
        raise _fail(source, rid, f"unknown key(s) {', '.join(unknown)}")
    for key in ("verdict", "message", "fix"):
        if not isinstance(doc.get(key), str) or not doc[key]:
            raise _fail(source, rid, f'needs a non-empty string "{key}"')
    if doc["verdict"] not in RULE_VERDICTS:
        raise _fail(source, rid, f"verdict {doc['verdict']!r} is not one of {', '.join(RULE_VERDICTS)}")
    for key in LIST_KEYS:
        value = doc.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise _fail(source, rid, f'"{key}" must be a list of strings')
    if not any(doc.get(k) for k in ("ops", "tags", "dtypes", "input_dtypes", "layouts")):
        raise _fail(source, rid, "matches nothing: give ops, tags, dtypes, input_dtypes or layouts")
    bad_targets = set(doc.get("targets", [])) - set(TARGETS)
    if bad_targets:
        raise _fail(source, rid, f"unknown target(s) {', '.join(sorted(bad_targets))}")
    code = doc.get("ncc_code")
    if code is not None and (not isinstance(code, str) or not NCC_CODE.match(code)):
        raise _fail(source, rid, f"ncc_code {code!r} is not of the form NCC_ABCD123")
    for key in ("provenance", "comment"):
        if key in doc and not isinstance(doc[key], str):
            raise _fail(source, rid, f'"{key}" must be a string')
    if "override" in doc and not isinstance(doc["override"], bool):
        raise _fail(source, rid, '"override" must be true or false')
    for key in ("sdk_from", "sdk_fixed"):
        if key in doc and (not isinstance(doc[key], str) or not RELEASE.match(doc[key])):
            raise _fail(source, rid, f"{key} {_short(doc[key])} is not a release written like 2.31.0")
        if key in doc and doc[key] not in releases:
            raise _fail(source, rid, f"{key} {doc[key]!r} is not a release the file lists ({', '.join(releases)})")
    if "sdk_from" in doc and "sdk_fixed" in doc and release_key(doc["sdk_fixed"]) <= release_key(doc["sdk_from"]):
        raise _fail(source, rid, "sdk_fixed must be a later release than sdk_from")
    when = doc.get("when", [])
    if not isinstance(when, list):
        raise _fail(source, rid, '"when" must be a list of conditions')
    try:
        conditions = tuple(parse_condition(c) for c in when)
    except ConditionError as exc:
        raise _fail(source, rid, str(exc)) from None
    if (conditions or "sdk_fixed" in doc) and not doc.get("provenance"):
        raise _fail(source, rid, 'a conditional or release-bound rule needs its "provenance" (file:line at a tag, an error-code page or an issue)')
    fixes = doc.get("fixes", {})
    if not isinstance(fixes, dict) or not all(isinstance(v, str) and v for v in fixes.values()):
        raise _fail(source, rid, '"fixes" must be an object of op -> fix (a non-empty string)')
    return Rule(
        id=rid,
        verdict=Verdict(doc["verdict"]),
        message=doc["message"],
        fix=doc["fix"],
        ops=frozenset(doc.get("ops", ())),
        not_ops=frozenset(doc.get("not_ops", ())),
        tags=frozenset(doc.get("tags", ())),
        dtypes=frozenset(doc.get("dtypes", ())),
        input_dtypes=frozenset(doc.get("input_dtypes", ())),
        layouts=frozenset(doc.get("layouts", ())),
        targets=frozenset(doc.get("targets", TARGETS)),
        ncc_code=code,
        when=conditions,
        fixes=dict(fixes),
        sdk_from=doc.get("sdk_from"),
        sdk_fixed=doc.get("sdk_fixed"),
        provenance=str(doc.get("provenance", "")),
        override=bool(doc.get("override", False)),
    )


def parse_rules_doc(doc: Any, source: str, known_releases: dict[str, str] | None = None) -> tuple[Any, ...]:
    """All rules of a rule document, validated; ids must be unique.

    A user's file may leave out ``sdk_releases``: its rules then name the releases the bundled table knows.
    """
    if not isinstance(doc, dict) or not isinstance(doc.get("rules"), list):
        raise InputError(f'{source}: a rule file is a JSON object with a "rules" list')
    releases = doc.get("sdk_releases", known_releases or {})
    if not isinstance(releases, dict) or not all(isinstance(k, str) and RELEASE.match(k) and isinstance(v, str) for k, v in releases.items()):
        raise InputError(f'{source}: "sdk_releases" must be an object of release (like 2.31.0) -> neuronx-cc version (a string)')
    rules = tuple(parse_rule(r, source, releases) for r in doc["rules"])
    seen: set[str] = set()
    for rule in rules:
        if rule.id in seen:
            raise _fail(source, rule.id, "the id is used twice")
        seen.add(rule.id)
    return rules


def check_rule_arguments(rules: tuple[Any, ...], source: str) -> None:
    """Every argument or tensor a condition names exists in each of the rule's ops (torch's schemas).

    Ops torch does not know (another release's names) are skipped; a rule none
    of whose ops torch knows cannot be checked and is an error.
    """
    for rule in rules:
        names = set().union(*(c.names() for c in rule.when)) if rule.when else set()
        names = {(subject, n) for subject, n in names if n != OUTPUT_NAME}
        if not names:
            continue
        schemas = {op: schema_arguments(op) for op in rule.ops}
        known = {op: s for op, s in schemas.items() if s is not None}
        if not known:
            raise _fail(source, rule.id, "its conditions name arguments, but torch knows none of its ops")
        for op, schema in sorted(known.items()):
            for subject, name in sorted(names):
                if name not in schema:
                    raise _fail(source, rule.id, f"the condition names {name!r}, which aten::{op} does not have")
                if subject == "tensor" and not schema[name][0]:
                    raise _fail(source, rule.id, f"the condition reads {name!r} of aten::{op} as a tensor; it is not one")


MAX_RULE_FILE_BYTES = 16 * 1024 * 1024  # a rule file is hand-written; anything larger is not one


def check_user_ids(rules: tuple[Any, ...], source: str, bundled: frozenset[str], reserved: frozenset[str]) -> None:
    """A user's rule may not take an id the code gives (``reserved``), nor a bundled rule's id unless it says ``"override": true``.

    Otherwise ``--fail-on`` and the report could not tell the user's finding from neuronprobe's.
    """
    for rule in rules:
        if rule.id in reserved:
            raise _fail(source, rule.id, "the id is one neuronprobe gives its own findings; choose another")
        if rule.id in bundled and not rule.override:
            raise _fail(source, rule.id, 'the id is a bundled rule\'s: choose another, or add "override": true to replace it for the ops the rule names')
        if rule.override and rule.id not in bundled:
            raise _fail(source, rule.id, '"override": true, but no bundled rule has this id')


def load_rules_file(
    path: Path,
    known_releases: dict[str, str] | None = None,
    bundled: frozenset[str] = frozenset(),
    reserved: frozenset[str] = frozenset(),
) -> tuple[Any, ...]:
    """A user's rule file (same format as the bundled one), fully checked; every error names ``path``.

    ``bundled`` and ``reserved`` are the ids the user's rules may not reuse (see :func:`check_user_ids`).
    """
    from neuronprobe.files import read_input_text

    # The bounded reader, judged on the open descriptor: a FIFO, a device or a file above the cap is one sentence.
    text = read_input_text(path, "rule", cap=MAX_RULE_FILE_BYTES)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except RecursionError:
        raise InputError(f"{path}: the rule file is nested too deep to read") from None
    try:
        rules = parse_rules_doc(doc, str(path), known_releases)
    except RecursionError:
        raise InputError(f"{path}: a rule's conditions are nested too deep to read") from None
    check_user_ids(rules, str(path), bundled, reserved)
    check_rule_arguments(rules, str(path))
    return rules
