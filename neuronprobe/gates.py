"""Gates: the checks that fail a CI job, evaluated by the library.

A gate is a question a job asks of a report: does any finding have one of these
verdicts or rules (``--fail-on``)? Does the static-shape policy need more graphs
than allowed (``--fail-on-recompiles``)? Did anything regress against the
baseline (``--fail-on-regression``, and the nightly)? :func:`evaluate_gates`
answers all three and returns one :class:`GateFailure` per failed gate, as data;
a notebook or a CI script calls it directly, and the CLI only prints the
failures and exits 1 when there are any.

A gate that cannot be evaluated must not pass silently: asking for the
recompile gate of a report without traffic is an :class:`InputError`.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

from neuronprobe.errors import InputError
from neuronprobe.vocabulary import PARITY_GATE, SECTION_GATES, Verdict, location

if TYPE_CHECKING:  # pragma: no cover
    from neuronprobe.report.model import Report, RunDiff
    from neuronprobe.support import SupportTable

GATE_FAIL_ON = "fail_on"  # findings with a verdict or rule
GATE_RECOMPILES = "fail_on_recompiles"  # graphs the static-shape policy needs
GATE_REGRESSION = "fail_on_regression"  # regressions against a comparable baseline
GATES: tuple[str, ...] = (GATE_FAIL_ON, GATE_RECOMPILES, GATE_REGRESSION)


STATIC_POLICY = "static"  # the policy --fail-on-recompiles counts: one graph per distinct shape

NEEDS_TRAFFIC = "--fail-on-recompiles needs traffic: give --shapes or --lengths, or define sample_inputs() in the model file"
NEEDS_REFERENCE = "--fail-on parity needs a frozen reference to compare with: run `neuronprobe parity MODEL --reference DIR`"


@dataclass(frozen=True)
class Gates:
    """Which gates to evaluate, as a CI job sets them; the defaults evaluate none."""

    fail_on: tuple[str, ...] = ()  # verdicts (cpu_fallback) or rule ids (dynamic-output-shape)
    fail_on_recompiles: int | None = None  # the most graphs the static policy may need
    fail_on_regression: bool = False  # fail on any regression of a comparable diff

    @property
    def any(self) -> bool:
        return bool(self.fail_on) or self.fail_on_recompiles is not None or self.fail_on_regression


@dataclass(frozen=True)
class GateFailure:
    """One gate that failed: which, as set to what, what failed, how many, and one sentence."""

    gate: str  # one of GATES
    threshold: tuple[str, ...] | int | None  # fail_on's values, the graph limit, or None (any regression)
    failed: tuple[str, ...]  # what failed, one line each: a finding, the policy, a regression
    count: int  # findings that matched, graphs the static policy needs, or regressions
    message: str  # for people, e.g. "3 finding(s) with verdict in {cpu_fallback}"


def check_gates(gates: Gates, rule_ids: Callable[[], Collection[str]]) -> Gates:
    """``gates`` when every setting is usable, else an :class:`InputError` (exit 2) naming the first bad one.

    ``rule_ids`` gives the rule ids ``--fail-on`` may name (:func:`known_rule_ids`); it is
    called only when a value is not a verdict, so a plain verdict gate loads no rule data.
    An unknown value is refused with the registered ids and verdicts closest to it.
    """
    verdicts = Verdict.values()
    others = [v for v in gates.fail_on if v not in verdicts and v not in SECTION_GATES]
    if others:
        known = rule_ids()
        unknown = [v for v in others if v not in known]
        if unknown:
            raise InputError(unknown_fail_on(unknown[0], known))
    if gates.fail_on_recompiles is not None and gates.fail_on_recompiles < 0:
        raise InputError(f"--fail-on-recompiles {gates.fail_on_recompiles}: use a number of graphs >= 0")
    return gates


def unknown_fail_on(value: str, known: Collection[str]) -> str:
    """The one sentence that refuses a ``--fail-on`` value, naming the closest verdicts and rule ids."""
    close = difflib.get_close_matches(value, [*Verdict.values(), *SECTION_GATES, *sorted(known)], n=3, cutoff=0.6)
    hint = f"did you mean {' or '.join(close)}?" if close else f"use a verdict ({', '.join(Verdict.values())}), {', '.join(SECTION_GATES)} or a rule id"
    return f"--fail-on: unknown verdict {value!r}, and no rule has that id; {hint} (`neuronprobe rules` lists every id)"


def known_rule_ids(table: SupportTable) -> frozenset[str]:
    """Every rule id the report can print, so ``--fail-on`` takes each: the registry's
    (:mod:`neuronprobe.rules`: the table, training, HLO, built-in and audit rules) and the
    rules of ``table`` (with its ``--rules``)."""
    from neuronprobe.rules import bundled_registry

    return frozenset(bundled_registry().ids() | {r.id for r in table.rules})


def evaluate_gates(report: Report, gates: Gates, diff: RunDiff | None = None) -> list[GateFailure]:
    """The gates of ``gates`` that ``report`` fails, in the order of :data:`GATES`; empty when all pass.

    ``diff`` is the comparison the regression gate reads (default: the report's own
    ``baseline_diff``); with neither, there is nothing to regress against and the gate passes.
    Raises :class:`InputError` when the recompile gate is set and the report has no traffic.
    """
    failures = []
    if gates.fail_on:
        failure = _fail_on(report, gates.fail_on)
        if failure is not None:
            failures.append(failure)
    if gates.fail_on_recompiles is not None:
        failure = _recompiles(report, gates.fail_on_recompiles)
        if failure is not None:
            failures.append(failure)
    if gates.fail_on_regression:
        failure = _regression(diff if diff is not None else report.baseline_diff)
        if failure is not None:
            failures.append(failure)
    return failures


def _fail_on(report: Report, values: tuple[str, ...]) -> GateFailure | None:
    wanted = set(values) - set(SECTION_GATES)
    hit = [f"{f.verdict}: {f.op} at {location(f.file, f.line)} ({f.rule})" for f in report.findings if f.verdict in wanted or f.rule in wanted]
    if PARITY_GATE in values:
        hit += _parity(report)
    if report.audit is not None:  # analyze --audit: the audit's findings gate by their rule id
        hit += [f"audit {a.severity}: {location(a.file, a.line)} ({a.rule})" for a in report.audit.findings if a.rule in wanted]
    if not hit:
        return None
    kinds = "" if wanted <= set(Verdict.values()) else " or rule"
    return GateFailure(
        gate=GATE_FAIL_ON,
        threshold=values,
        failed=tuple(hit),
        count=len(hit),
        message=f"{len(hit)} finding(s) with verdict{kinds} in {{{', '.join(values)}}}" if wanted else f"parity: {hit[0].removeprefix('parity: ')}",
    )


def _parity(report: Report) -> list[str]:
    """``--fail-on parity``: the frozen-reference comparison's failure, if it gates; one that cannot be evaluated is exit 2."""
    frozen = report.parity.frozen if report.parity is not None else None
    if frozen is None:
        raise InputError(NEEDS_REFERENCE)
    return [f"parity: {frozen.summary}"] if frozen.gate_fails else []


def _recompiles(report: Report, limit: int) -> GateFailure | None:
    if report.recompiles is None:
        raise InputError(NEEDS_TRAFFIC)
    static = report.recompiles.predicted.get(STATIC_POLICY)
    if static is None or static.graphs <= limit:
        return None
    return GateFailure(
        gate=GATE_RECOMPILES,
        threshold=limit,
        failed=(f"the {STATIC_POLICY} policy: {static.graphs} graphs",),
        count=static.graphs,
        message=f"the static policy needs {static.graphs} graphs (limit {limit})",
    )


def _regression(diff: RunDiff | None) -> GateFailure | None:
    if diff is None or not diff.has_regression:
        return None
    return GateFailure(
        gate=GATE_REGRESSION,
        threshold=None,
        failed=tuple(diff.regressions),
        count=len(diff.regressions),
        message=f"{len(diff.regressions)} regression(s)",
    )


__all__ = [
    "GATES",
    "GATE_FAIL_ON",
    "GATE_RECOMPILES",
    "GATE_REGRESSION",
    "PARITY_GATE",
    "SECTION_GATES",
    "GateFailure",
    "Gates",
    "check_gates",
    "evaluate_gates",
    "known_rule_ids",
    "unknown_fail_on",
]
