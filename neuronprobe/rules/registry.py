"""The rule registry: every rule id a finding can carry, registered once (issue 27).

A finding names the rule that produced it. Those rules are data, in five files, and
each id appears in exactly one of them:

* ``support/data/neuron_rules.json``: the Neuron support table's rules (``table``);
* ``support/data/training_rules.json``: the measured training-step rules (``training``);
* ``backends/data/hlo_rules.json``: the rules read off a graph's HLO (``hlo``);
* ``support/data/builtin_rules.json``: the ids the code gives itself: the classifier's
  fall-through verdicts, a branch on a tensor value, a graph break, a host read, and the
  live backends' observations (``builtin``);
* ``support/data/precision_rules.json``: the risky low-precision constructs a parity run
  finds (``precision``; issue 25);
* ``audit/data/rules.toml``: the audit's CUDA-assumption catalogue (``audit``). Audit
  findings are not :class:`~neuronprobe.report.model.Finding` objects, but ``analyze
  --audit`` puts them in the same report and ``--fail-on`` gates on their ids, so they
  share the id space: no audit id may be a finding rule's id.

A user's ``--rules`` file adds its rules (``user``) to a registry *value*
(:meth:`RuleRegistry.with_user_rules`), which the analysis that read the file passes down
(``support.RuleSet``): nothing of a user's file stays in the process, so a notebook's next
analysis without ``--rules`` sees the bundled rules only. Each entry says which verdicts a
finding of the rule can have, its severity, its fix, its provenance and the file it comes from.
:meth:`Finding.at <neuronprobe.report.model.Finding.at>` makes every finding through
:func:`lookup` (given the analysis's registry when a user's rules apply), so a finding with an
id the registry does not know is an :class:`UnknownRule` (a bug in neuronprobe, exit 3), and
``--fail-on`` accepts exactly the registered ids and the verdicts.

This package is in the bottom layer, so the report model can check its findings against it:
it reads the data files as plain JSON/TOML (their full parsers live with the code that
applies the rules) and imports only the vocabulary and the errors.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from functools import lru_cache
from importlib import resources
from typing import Any

from neuronprobe.errors import InternalError
from neuronprobe.vocabulary import Severity, Verdict, Word

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


class RuleKind(Word):
    """Which catalogue a rule comes from (one data file each)."""

    TABLE = "table"  # the support table
    TRAINING = "training"
    HLO = "hlo"
    BUILTIN = "builtin"
    PRECISION = "precision"  # risky low-precision constructs (parity)
    AUDIT = "audit"
    USER = "user"  # a user's --rules file


# The data file of each bundled catalogue, relative to the package.
SOURCES: dict[RuleKind, str] = {
    RuleKind.TABLE: "support/data/neuron_rules.json",
    RuleKind.TRAINING: "support/data/training_rules.json",
    RuleKind.HLO: "backends/data/hlo_rules.json",
    RuleKind.BUILTIN: "support/data/builtin_rules.json",
    RuleKind.PRECISION: "support/data/precision_rules.json",
    RuleKind.AUDIT: "audit/data/rules.toml",
}
_HLO_DEFAULT_VERDICT = Verdict.COMPILE_ERROR  # hlo_rules.json: a rule without "verdict" rejects the graph (backends/hlo_checks.HloRule)


@dataclass(frozen=True)
class RegisteredRule:
    """One rule id: what its findings can be, how bad, what to do, and where the fact comes from."""

    id: str
    kind: RuleKind
    source: str  # the file that defines it (a user's --rules path for ``user``)
    verdicts: tuple[Verdict, ...]  # the verdicts a finding of the rule can have, the usual first; () for audit rules
    severity: Severity
    message: str  # what the rule finds, in one line
    fix: str  # the fix a finding gets unless its site knows a better one ("" for rules of supported ops)
    provenance: str  # the source or measurement the rule encodes
    where: str = ""  # builtin rules: the code that gives the id

    @property
    def verdict(self) -> Verdict | None:
        """The usual verdict (None for an audit rule, which has a severity instead)."""
        return self.verdicts[0] if self.verdicts else None

    def as_json(self) -> dict[str, Any]:
        """The entry as JSON-native values (``neuronprobe rules --json``)."""
        return {
            "id": self.id,
            "kind": str(self.kind),
            "verdicts": [str(v) for v in self.verdicts],
            "severity": str(self.severity),
            "message": self.message,
            "fix": self.fix,
            "provenance": self.provenance,
            "source": self.source,
            "where": self.where,
        }


class UnknownRule(InternalError):
    """The code gave a finding a rule id (or a verdict for it) the registry does not have: a bug, exit 3."""


@dataclass(frozen=True)
class RuleRegistry:
    """Every registered rule, by id, in catalogue order (table, training, hlo, builtin, precision, audit, user)."""

    rules: dict[str, RegisteredRule]

    def __contains__(self, rule_id: object) -> bool:
        return rule_id in self.rules

    def __iter__(self) -> Iterator[RegisteredRule]:
        return iter(self.rules.values())

    def __len__(self) -> int:
        return len(self.rules)

    def ids(self, kinds: Iterable[RuleKind] | None = None) -> frozenset[str]:
        wanted = set(kinds) if kinds is not None else set(RuleKind)
        return frozenset(r.id for r in self.rules.values() if r.kind in wanted)

    def with_user_rules(self, rules: Iterable[Any], source: str) -> RuleRegistry:
        """This registry and the rules of a user's ``--rules`` file (already checked: see ``support.rulefile``),
        as a new value: the registry itself is left as it was.

        A rule that overrides a registered one keeps its entry, which then also admits the user's verdict.
        """
        added: dict[str, RegisteredRule] = {}
        for rule in rules:
            verdict = Verdict(rule.verdict)
            base = added.get(rule.id) or self.rules.get(rule.id)
            if base is not None:
                added[rule.id] = base if verdict in base.verdicts else replace(base, verdicts=(*base.verdicts, verdict))
                continue
            added[rule.id] = RegisteredRule(
                id=rule.id,
                kind=RuleKind.USER,
                source=source,
                verdicts=(verdict,),
                severity=verdict.severity,
                message=rule.message,
                fix=rule.fix,
                provenance=rule.provenance or f"the user's rules file {source}",
            )
        return RuleRegistry({**self.rules, **added})

    def get(self, rule_id: str) -> RegisteredRule:
        """The rule called ``rule_id``; an :class:`UnknownRule` (exit 3) when none is registered."""
        try:
            return self.rules[rule_id]
        except KeyError:
            raise UnknownRule(
                f"a finding names rule {rule_id!r}, which no rule catalogue registers ({', '.join(SOURCES.values())}): "
                "register it in support/data/builtin_rules.json"
            ) from None


def _text(path: str) -> str:
    return resources.files("neuronprobe").joinpath(path).read_text(encoding="utf-8")


def _provenance(entry: dict[str, Any], fallback: str) -> str:
    value = entry.get("provenance")
    if isinstance(value, list):
        return "; ".join(str(v) for v in value)
    return str(value) if value else fallback


def _finding_rule(kind: RuleKind, entry: dict[str, Any], verdicts: tuple[Verdict, ...], fallback: str) -> RegisteredRule:
    return RegisteredRule(
        id=str(entry["id"]),
        kind=kind,
        source=SOURCES[kind],
        verdicts=verdicts,
        severity=verdicts[0].severity,
        message=str(entry.get("message", "")),
        fix=str(entry.get("fix", "")),
        provenance=_provenance(entry, fallback),
        where=str(entry.get("where", "")),
    )


def _bundled_entries() -> Iterator[RegisteredRule]:
    table = json.loads(_text(SOURCES[RuleKind.TABLE]))
    whole = f"{SOURCES[RuleKind.TABLE]} {table['version']} (its provenance list)"
    for r in table["rules"]:
        yield _finding_rule(RuleKind.TABLE, r, (Verdict(r["verdict"]),), whole)
    training = json.loads(_text(SOURCES[RuleKind.TRAINING]))
    whole = "; ".join(training["provenance"])
    for r in training["rules"]:
        yield _finding_rule(RuleKind.TRAINING, r, (Verdict(r["verdict"]),), whole)
    hlo = json.loads(_text(SOURCES[RuleKind.HLO]))
    whole = f"{SOURCES[RuleKind.HLO]} {hlo['version']} (its provenance list)"
    for r in hlo["rules"]:
        yield _finding_rule(RuleKind.HLO, r, (Verdict(r.get("verdict", _HLO_DEFAULT_VERDICT)),), whole)
    for r in json.loads(_text(SOURCES[RuleKind.BUILTIN]))["rules"]:
        yield _finding_rule(RuleKind.BUILTIN, r, tuple(Verdict(v) for v in r["verdicts"]), "")
    precision = json.loads(_text(SOURCES[RuleKind.PRECISION]))
    whole = "; ".join(precision["provenance"])
    for r in precision["rules"]:
        yield _finding_rule(RuleKind.PRECISION, r, (Verdict(r["verdict"]),), whole)
    for r in tomllib.loads(_text(SOURCES[RuleKind.AUDIT]))["rule"]:
        yield RegisteredRule(
            id=r["id"],
            kind=RuleKind.AUDIT,
            source=SOURCES[RuleKind.AUDIT],
            verdicts=(),
            severity=Severity(r["severity"]),
            message=r["message"],
            fix=r["fix_xla"],
            provenance=", ".join(r.get("provenance", ())),
        )


@lru_cache(maxsize=1)
def bundled_registry() -> RuleRegistry:
    """The rules neuronprobe ships; an id registered twice is an :class:`InternalError` naming both files."""
    rules: dict[str, RegisteredRule] = {}
    for rule in _bundled_entries():
        if rule.id in rules:
            raise InternalError(f"rule id {rule.id!r} is registered twice: in {rules[rule.id].source} and in {rule.source}")
        if not rule.id or not rule.message or (rule.verdict is not None and rule.verdict.reported and not rule.fix):
            raise InternalError(f"{rule.source}: rule {rule.id!r} needs an id, a message and (for a finding) a fix")
        rules[rule.id] = rule
    return RuleRegistry(rules)


def lookup(rule_id: str, verdict: Verdict | str | None = None, rules: RuleRegistry | None = None) -> RegisteredRule:
    """The registered rule ``rule_id`` in ``rules`` (default: the bundled rules); with ``verdict``, also checks the
    rule can give it.

    Either check failing is an :class:`UnknownRule`: the code and the rule data disagree.
    """
    rule = (rules if rules is not None else bundled_registry()).get(rule_id)
    if verdict is not None and rule.verdicts and Verdict(verdict) not in rule.verdicts:
        raise UnknownRule(f"a finding of rule {rule_id!r} has verdict {verdict!r}, but {rule.source} registers it for {', '.join(rule.verdicts)} only")
    return rule


__all__ = [
    "SOURCES",
    "RegisteredRule",
    "RuleKind",
    "RuleRegistry",
    "UnknownRule",
    "bundled_registry",
    "lookup",
]
