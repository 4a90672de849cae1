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
"""

from __future__ import annotations

from typing import Any

from neuronprobe.report.model import PredictionMismatch
from neuronprobe.vocabulary import SUPPORTED_VERDICTS, Verdict

OBSERVABLE_VERDICTS = frozenset({Verdict.CPU_FALLBACK, Verdict.DYNAMIC_SHAPE})
_SITE_PACKAGES = "site-packages/"


def place_key(file: str | None) -> str | None:
    """A file compared across interpreters: library files by their path inside site-packages."""
    if file is None:
        return None
    import os

    normal = os.path.abspath(file).replace(os.sep, "/")
    return normal.split(_SITE_PACKAGES, 1)[1] if _SITE_PACKAGES in normal else normal


def _worst(verdicts: list[str]) -> Verdict:
    return max((Verdict(v) for v in verdicts), key=lambda v: v.rank)


def refine_diff(report: Any, observation: Any, calls: list[Any]) -> None:
    """Add the line-matched disagreements to ``report.prediction_diff`` (the name-matched ones stay)."""
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
    seen_lines = {(place_key(file), line) for file, line in (observation.extra or {}).get("lines_seen", [])}
    for p in report.findings:
        if p.origin != "predicted" or p.verdict not in OBSERVABLE_VERDICTS or p.line is None:
            continue
        key = (place_key(p.file), p.line)
        if key not in seen_lines or key in problem_places or p.op in listed_ops or (p.op, p.file, p.line) in listed:
            continue
        diff.predicted_failing_observed_ok.append(
            PredictionMismatch(
                p.op,
                p.verdict,
                Verdict.LOWERED,
                p.file,
                p.line,
                "torch-xla ran every op of this line on the device: no CPU fallback and no host read",
            )
        )


__all__ = ["OBSERVABLE_VERDICTS", "place_key", "refine_diff"]
