"""Prediction vs torch-xla observation, matched by the user's line as well as by op name.

The static table classifies the ops ``torch.export`` captures (``aten::adaptive_avg_pool1d``);
torch-xla reports the ops that reach its dispatcher after decomposition
(``aten::_adaptive_avg_pool2d``). Matching by name alone misses exactly the
disagreements the table most needs to learn from, so an observed problem is also
compared with every op predicted at the same file:line, and a predicted problem
with what torch-xla did on that line.

Only what the observation can see is compared in the second direction: CPU
fallbacks and data-dependent shapes (torch-xla's counters are authoritative), not
compiler rejections (the HLO checks are patterns, not neuronx-cc).

Ops are matched through their decompositions and overloads: the capture names the
op the user called (``aten::max_pool2d``), torch-xla's counters the op that fell back
after decomposition (``aten::max_pool2d_with_indices``), and ``adaptive_avg_pool1d``
reaches torch-xla as ``_adaptive_avg_pool2d``. A captured op's kin (:func:`kin_table`)
is its own family and that of every op torch's dispatcher decomposes it into (the
capture's ``OpCall.parts``, recorded from the CompositeImplicitAutograd kernel), and
:func:`op_family` names ops without overload, private prefix or dimensionality for
the ops no decomposition links. A prediction is never called wrong when the
observation has a problem of its kin that it could not place: a missing location is
the observer's gap, not a disagreement.
"""

from __future__ import annotations

import re
from typing import Any

from neuronprobe.report.model import PredictionMismatch
from neuronprobe.vocabulary import SUPPORTED_VERDICTS, Verdict

OBSERVABLE_VERDICTS = frozenset({Verdict.CPU_FALLBACK, Verdict.DYNAMIC_SHAPE})
# A decoding loop whose sequence grows per step (neuronprobe/decoding.py): a prediction about graphs per shape,
# not about one op's lowering, so one observed run whose ops all lower cannot contradict it.
GROWING_RULE = "decode-growing-sequence"
UNOBSERVABLE_RULES = frozenset({GROWING_RULE})
_SITE_PACKAGES = "site-packages/"


def place_key(file: str | None) -> str | None:
    """A file compared across interpreters: library files by their path inside site-packages."""
    if file is None:
        return None
    import os

    normal = os.path.abspath(file).replace(os.sep, "/")
    return normal.split(_SITE_PACKAGES, 1)[1] if _SITE_PACKAGES in normal else normal


_FAMILY_SUFFIXES = ("_with_indices", "_backward", "_forward")
_DIMS = re.compile(r"[123]d$")
_VERSION = re.compile(r"\d+$")


def op_family(op: str) -> str:
    """``aten::max_pool2d_with_indices`` and ``aten::max_pool2d.default`` -> ``aten::max_pool``;
    ``aten::_adaptive_avg_pool2d`` and ``aten::adaptive_avg_pool1d`` -> ``aten::adaptive_avg_pool``;
    ``aten::_unique2`` -> ``aten::unique``: the op and the ops it decomposes into or is built from,
    without overload, private prefix (and a private op's number), index/backward variant or
    dimensionality. ``log2`` stays ``log2``: only a private op's trailing number is dropped."""
    namespace, sep, rest = op.rpartition("::")
    name = rest.split(".", 1)[0]
    private = name.startswith("_")  # _unique2: a private implementation, numbered
    name = name.lstrip("_")
    for suffix in reversed(_FAMILY_SUFFIXES):
        name = name.removesuffix(suffix)
    name = _DIMS.sub("", name) or name
    if private:
        name = _VERSION.sub("", name) or name
    return f"{namespace}{sep}{name}"


def kin_table(calls: list[Any]) -> dict[str, set[str]]:
    """Captured op -> the families of it and of every op it decomposes into (``OpCall.parts``, recursively)."""
    table: dict[str, set[str]] = {}

    def walk(call: Any, kin: set[str]) -> None:
        kin.add(op_family(call.op))
        for part in call.parts or []:
            walk(part, kin)

    for call in calls:
        walk(call, table.setdefault(call.op, set()))
    return table


def kin(op: str, table: dict[str, set[str]]) -> set[str]:
    return table.get(op) or {op_family(op)}


def _worst(verdicts: list[str]) -> Verdict:
    return max((Verdict(v) for v in verdicts), key=lambda v: v.rank)


UNCAPTURED_DETAIL = "the static capture recorded no op of its kind, so nothing was predicted for it"


def count_uncaptured(report: Any, calls: list[Any]) -> None:
    """Every observed problem whose op the static capture never saw (no captured op is of its kin, and none at
    its line) is a disagreement: the static report said nothing fails there. An observed op at a line the
    capture has ops of (``x[mask]`` captured as ``index``, observed as ``nonzero``) is the line-matched diff's. Without this a capture that missed the code
    (a ``no_grad`` body it did not enter) read "0 disagreements" next to the fallbacks the device observed.
    Runs for every live backend, after the name-matched diff; each op is listed once. Findings that name no
    op (``<forward on the XLA device>``) are the observer's own, not an op the capture missed."""
    diff = report.prediction_diff
    if diff is None:
        return
    captured = set().union(*kin_table([c.call for c in calls]).values()) if calls else set()
    lines = {(place_key(c.call.file), c.call.line) for c in calls if c.call.line is not None}
    listed = {m.op for m in [*diff.predicted_ok_observed_failing, *diff.predicted_failing_observed_ok]}
    for f in report.findings:
        if f.origin != "observed" or f.verdict in SUPPORTED_VERDICTS or "::" not in f.op or f.op in listed or op_family(f.op) in captured:
            continue
        if f.line is not None and (place_key(f.file), f.line) in lines:
            continue
        diff.predicted_ok_observed_failing.append(
            PredictionMismatch(f.op, Verdict.LOWERED, f.verdict, f.file, f.line, f"{UNCAPTURED_DETAIL}; observed: {f.message}")
        )
        listed.add(f.op)


def refine_diff(report: Any, observation: Any, calls: list[Any], observer: str = "torch-xla") -> None:
    """Add the line-matched disagreements to ``report.prediction_diff`` (the name-matched ones stay).

    ``observer`` names who ran the line in the message of a predicted problem it did not see (``torch-xla``,
    or the native-cpu stand-in)."""
    diff = report.prediction_diff
    if diff is None:
        return
    listed = {(m.op, m.file, m.line) for m in [*diff.predicted_ok_observed_failing, *diff.predicted_failing_observed_ok]}
    listed_ops = {m.op for m in [*diff.predicted_ok_observed_failing, *diff.predicted_failing_observed_ok]}
    predicted: dict[tuple[str | None, int | None], list[tuple[str, str]]] = {}
    for c in calls:
        if c.call.file and c.call.line:
            predicted.setdefault((place_key(c.call.file), c.call.line), []).append((c.call.op, c.verdict.verdict))
    observed_problems = [f for f in report.findings if f.origin == "observed" and f.verdict not in SUPPORTED_VERDICTS]
    problem_places = {(place_key(f.file), f.line) for f in observed_problems}
    for f in observed_problems:
        if f.op in listed_ops or f.line is None:
            continue
        at_line = predicted.get((place_key(f.file), f.line), [])
        if not at_line or any(v not in SUPPORTED_VERDICTS for _, v in at_line):
            continue
        ops = ", ".join(sorted({op for op, _ in at_line}))
        diff.predicted_ok_observed_failing.append(
            PredictionMismatch(
                f.op,
                _worst([v for _, v in at_line]),
                f.verdict,
                f.file,
                f.line,
                f"the table predicted {ops} on this line to be fine; observed: {f.message}",
            )
        )
        listed.add((f.op, f.file, f.line))
    # A predicted problem with an observed problem of its kin (at its line, or where the observer could not
    # place it) agrees with the observation, whatever each side calls the op: never "predicted failing, observed ok".
    kins = kin_table([c.call for c in calls])
    observed_at = [(op_family(f.op), place_key(f.file) if f.line is not None else None, f.line) for f in observed_problems]

    def agrees(op: str, key: tuple[str | None, int | None] | None) -> bool:
        related = kin(op, kins)
        return any(family in related and (key is None or line is None or (file, line) == key) for family, file, line in observed_at)

    diff.predicted_failing_observed_ok = [m for m in diff.predicted_failing_observed_ok if not agrees(m.op, None)]
    seen_lines = {(place_key(file), line) for file, line in (observation.extra or {}).get("lines_seen", [])}
    for p in report.findings:
        if p.origin != "predicted" or p.verdict not in OBSERVABLE_VERDICTS or p.line is None or p.rule in UNOBSERVABLE_RULES:
            continue
        key = (place_key(p.file), p.line)
        if key not in seen_lines or key in problem_places or p.op in listed_ops or (p.op, p.file, p.line) in listed:
            continue
        if agrees(p.op, key):
            continue
        diff.predicted_failing_observed_ok.append(
            PredictionMismatch(
                p.op,
                p.verdict,
                Verdict.LOWERED,
                p.file,
                p.line,
                f"{observer} ran every op of this line on the device: no CPU fallback and no host read",
            )
        )


__all__ = ["GROWING_RULE", "OBSERVABLE_VERDICTS", "UNOBSERVABLE_RULES", "count_uncaptured", "kin", "kin_table", "op_family", "place_key", "refine_diff"]
