"""Compare two reports: what appeared, what went away, and whether it is a regression.

``diff_reports(base, new)`` is pure: two :class:`Report` objects in, one
:class:`RunDiff` out. The CLI's ``diff`` command and the nightly job both use it;
they decide what to print and which exit code a regression gives.

Identity of a finding
    A finding is the pair (what, where): ``(op, verdict, file, line)``. Line
    numbers shift whenever someone edits the code above a finding, and a gate that
    calls every shifted finding "new" fails the nightly on a comment. So findings
    are matched in two passes:

    1. exactly, on ``(op, verdict, file, line)``;
    2. the rest, on ``(op, verdict, file)`` plus the text of the source line
       (``source_line``, stripped). A pair found this way is *moved*: reported,
       never a regression. When a report carries no source text, a finding left
       over in pass 1 is paired with the nearest-line leftover of the same
       ``(op, verdict, file)`` that also has no source text, so the number of
       findings per op, verdict and file is what counts.

    Everything still unmatched is new or removed. A finding whose verdict changed
    at the same place is therefore one removed and one new finding.

Regressions (only between comparable runs)
    - a new finding with a problem verdict (anything but ``lowered`` or ``decomposed``);
    - a drop of the support percentage;
    - more device graphs (``summary.device_graphs``) or more graphs under the
      static-shape policy (``recompiles.predicted["static"].graphs``);
    - more padding overhead (``buckets.overhead.tokens``).

Comparable runs
    Two runs are gated only when they ran on the same backend (name, and real SDK
    versus the test fake), for the same target and with the same compiler
    (``backend.versions["neuronx-cc"]``). Otherwise a difference says more about
    the change of stack than about the code: the diff is still computed and shown,
    ``comparable`` is False, ``not_comparable_reason`` says why, and what would have
    been regressions is listed under ``ungated_regressions``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path

from neuronprobe.report.schema.findings import Finding
from neuronprobe.report.schema.report import ReportData
from neuronprobe.report.schema.run_diff import FindingChange, RunDiff
from neuronprobe.typed_json import DocumentSchema
from neuronprobe.vocabulary import PROBLEM_VERDICTS, Verdict

# The ``diff --json`` file: ``schema_version`` then the RunDiff's fields (the report's ``baseline_diff`` is the same
# object, versioned with the report). 1: the shape written since diff has had --json (files without a version read as 1).
DIFF_SCHEMA_VERSION = 1
DIFF_DOCUMENT: DocumentSchema[RunDiff] = DocumentSchema(
    "diff JSON", RunDiff, DIFF_SCHEMA_VERSION, marker="new_findings", hint="`neuronprobe diff BASE NEW --json`", where="diff"
)


def load_diff(path: str | Path) -> RunDiff:
    """A ``diff --json`` file read back, checked field by field (ReportFormatError naming the file and the field)."""
    return DIFF_DOCUMENT.load(path)


# The analysis is deterministic: the same code, traffic and stack give the same
# numbers to the last bit. These tolerances only absorb float rounding (JSON
# round trips, summation order); any change larger than that is real.
SUPPORT_TOLERANCE_PP = 1e-6  # support percentage, percentage points
PADDING_TOLERANCE_PP = 1e-6  # padded-token overhead, percentage points

COMPILER_PACKAGE = "neuronx-cc"  # the backend.versions key whose change makes two runs not comparable

# The metrics a diff reports, in display order: key -> what it means.
METRICS: dict[str, str] = {
    "support_percentage": "support %",
    "problem_findings": "problem findings",
    "cpu_fallbacks": "CPU fallbacks",
    "device_graphs": "device graphs",
    "static_graphs": "static-policy graphs",
    "padding_overhead": "padding %",
}

# Metrics that count things (shown as whole numbers); the others are percentages.
COUNT_METRICS = frozenset({"problem_findings", "cpu_fallbacks", "device_graphs", "static_graphs"})

# Run metadata shown when it changed between runs; never part of the gate.
_METADATA_FIELDS: tuple[str, ...] = (
    "git_commit",
    "git_dirty",
    "dtype",
    "batch_size",
    "seq_len",
    "model_source",
    "tool_version",
    "host",
)


def diff_reports(base: ReportData, new: ReportData, *, base_label: str = "", new_label: str = "") -> RunDiff:
    """Compare ``new`` against its baseline ``base``; pure, no I/O."""
    new_findings, removed, moved = match_findings(base.findings, new.findings)
    reasons = not_comparable_reasons(base, new)
    metrics = run_metrics(base, new)
    regressions = _regressions(new_findings, metrics)
    return RunDiff(
        base_label=base_label or run_label(base),
        new_label=new_label or run_label(new),
        comparable=not reasons,
        not_comparable_reason="; ".join(reasons),
        new_findings=[_change(f) for f in new_findings],
        removed_findings=[_change(f) for f in removed],
        moved_findings=[_change(n, base_line=b.line) for b, n in moved],
        support_percentage_change=_delta(metrics["support_percentage"]) or 0.0,
        graphs_change=int(_delta(metrics["device_graphs"]) or 0),
        padding_overhead_change=_delta(metrics["padding_overhead"]),
        version_changes=_changed(base.backend.versions, new.backend.versions),
        metadata_changes=_metadata_changes(base, new),
        metrics=metrics,
        regressions=[] if reasons else regressions,
        ungated_regressions=regressions if reasons else [],
    )


def run_label(report: ReportData) -> str:
    """A short name for a run: model, backend/target, time and commit."""
    backend = report.backend.name + (" (fake)" if report.backend.fake else "")
    parts = [report.model, f"{backend}/{report.target}"]
    if report.metadata.time:
        parts.append(report.metadata.time)
    if report.metadata.git_commit:
        parts.append(report.metadata.git_commit[:10] + ("+dirty" if report.metadata.git_dirty else ""))
    return " ".join(parts)


def not_comparable_reasons(base: ReportData, new: ReportData) -> list[str]:
    """Why two runs must not be gated against each other; empty when they may."""
    reasons = []
    if (base.backend.name, base.backend.fake) != (new.backend.name, new.backend.fake):
        reasons.append(f"different backend ({_backend_name(base)} vs {_backend_name(new)})")
    if base.target != new.target:
        reasons.append(f"different target ({base.target} vs {new.target})")
    if base.support_table.stack != new.support_table.stack:  # issue 36: never a silent cross-stack comparison
        reasons.append(f"different stack ({base.support_table.stack} vs {new.support_table.stack})")
    base_cc = base.backend.versions.get(COMPILER_PACKAGE)
    new_cc = new.backend.versions.get(COMPILER_PACKAGE)
    if base_cc != new_cc:
        reasons.append(f"different {COMPILER_PACKAGE} ({base_cc or 'none'} vs {new_cc or 'none'})")
    return reasons


def run_metrics(base: ReportData, new: ReportData) -> dict[str, list[float | None]]:
    """Each metric of :data:`METRICS` as ``[base, new]``."""
    return {name: [metric(base, name), metric(new, name)] for name in METRICS}


def match_findings(base: list[Finding], new: list[Finding]) -> tuple[list[Finding], list[Finding], list[tuple[Finding, Finding]]]:
    """Split findings into (new, removed, moved pairs); see the module docstring for the rule."""
    base_left, new_left = _match_exact(base, new)
    moved: list[tuple[Finding, Finding]] = []
    for key_fn in (_source_key, _sourceless_key):
        pairs, base_left, new_left = _match_by(base_left, new_left, key_fn)
        moved.extend(pairs)
    return new_left, base_left, moved


def _match_exact(base: list[Finding], new: list[Finding]) -> tuple[list[Finding], list[Finding]]:
    """Remove the findings present on both sides at the same place, one for one."""
    waiting: dict[tuple[str, str, str | None, int | None], list[Finding]] = defaultdict(list)
    for f in base:
        waiting[_place(f)].append(f)
    new_left = []
    for f in new:
        same = waiting.get(_place(f))
        if same:
            same.pop(0)
        else:
            new_left.append(f)
    return _in_order(base, [f for group in waiting.values() for f in group]), new_left


def _match_by(
    base: list[Finding], new: list[Finding], key_fn: Callable[[Finding], tuple[object, ...] | None]
) -> tuple[list[tuple[Finding, Finding]], list[Finding], list[Finding]]:
    """Pair leftovers with the same key, nearest line first; return (pairs, base left, new left)."""
    groups: dict[tuple[object, ...], list[Finding]] = defaultdict(list)
    for f in base:
        key = key_fn(f)
        if key is not None:
            groups[key].append(f)
    pairs = []
    new_left = []
    for f in sorted(new, key=_line):
        key = key_fn(f)
        candidates = groups.get(key) if key is not None else None
        if not candidates:
            new_left.append(f)
            continue
        nearest = min(candidates, key=lambda b: abs(_line(b) - _line(f)))
        candidates.remove(nearest)
        pairs.append((nearest, f))
    paired = {id(b) for b, _ in pairs}
    return pairs, [f for f in base if id(f) not in paired], _in_order(new, new_left)


def _place(f: Finding) -> tuple[str, str, str | None, int | None]:
    return (f.op, f.verdict, f.file, f.line)


def _source_key(f: Finding) -> tuple[object, ...] | None:
    text = (f.source_line or "").strip()
    return (f.op, f.verdict, f.file, text) if text else None


def _sourceless_key(f: Finding) -> tuple[object, ...] | None:
    return None if (f.source_line or "").strip() else (f.op, f.verdict, f.file)


def _line(f: Finding) -> int:
    return f.line if f.line is not None else -1


def _in_order(original: list[Finding], subset: Iterable[Finding]) -> list[Finding]:
    keep = {id(f) for f in subset}
    return [f for f in original if id(f) in keep]


def _change(f: Finding, base_line: int | None = None) -> FindingChange:
    return FindingChange(
        op=f.op,
        verdict=f.verdict,
        file=f.file,
        line=f.line,
        message=f.message,
        base_line=base_line,
        count=f.count,
        source_line=f.source_line,
        cell=f.cell,
    )


def metric(report: ReportData, name: str) -> float | None:
    """One metric of :data:`METRICS` for one run; None where the run has no value for it."""
    if name == "support_percentage":
        return report.summary.support_percentage
    if name == "problem_findings":
        return float(len(report.findings_with(frozenset(PROBLEM_VERDICTS))))
    if name == "cpu_fallbacks":
        return float(len(report.findings_with({Verdict.CPU_FALLBACK})))
    if name == "device_graphs":
        return float(report.summary.device_graphs)
    if name == "static_graphs":
        static = report.recompiles.predicted.get("static") if report.recompiles else None
        return float(static.graphs) if static is not None else None
    if name == "padding_overhead":
        return report.buckets.overhead.tokens if report.buckets is not None else None
    raise KeyError(name)


def _delta(pair: list[float | None]) -> float | None:
    base, new = pair
    return None if base is None or new is None else new - base


def _regressions(new_findings: list[Finding], metrics: dict[str, list[float | None]]) -> list[str]:
    """One sentence per regression, in a stable order."""
    out = [f"new {f.verdict}: {f.op} at {f.location}" for f in new_findings if f.verdict.is_problem]
    support = _delta(metrics["support_percentage"])
    if support is not None and support < -SUPPORT_TOLERANCE_PP:
        base, new = metrics["support_percentage"]
        out.append(f"support dropped from {base:.2f}% to {new:.2f}%")
    for name, what in (("device_graphs", "device graphs"), ("static_graphs", "graphs under the static-shape policy")):
        change = _delta(metrics[name])
        if change is not None and change > 0:
            base, new = metrics[name]
            out.append(f"more {what}: {base:.0f} -> {new:.0f}")
    padding = _delta(metrics["padding_overhead"])
    if padding is not None and padding > PADDING_TOLERANCE_PP:
        base, new = metrics["padding_overhead"]
        out.append(f"more padding overhead: {base:.2f}% -> {new:.2f}% of real tokens")
    return out


def format_metric(name: str, value: float | None, *, signed: bool = False) -> str:
    """A metric value (or a change, with ``signed``) for people: counts whole, percentages to 2 places."""
    if value is None:
        return "-"
    if signed and abs(value) <= SUPPORT_TOLERANCE_PP:
        return "="
    sign = "+" if signed else ""
    return f"{value:{sign}.0f}" if name in COUNT_METRICS else f"{value:{sign}.2f}"


def _backend_name(report: ReportData) -> str:
    return report.backend.name + (" fake" if report.backend.fake else "")


def _changed(base: dict[str, str], new: dict[str, str]) -> dict[str, list[str | None]]:
    return {k: [base.get(k), new.get(k)] for k in sorted(base.keys() | new.keys()) if base.get(k) != new.get(k)}


def _metadata_changes(base: ReportData, new: ReportData) -> dict[str, list[str | None]]:
    def value(report: ReportData, name: str) -> str | None:
        v = getattr(report.metadata, name)
        return None if v is None or v == "" else str(v)

    out = {name: [value(base, name), value(new, name)] for name in _METADATA_FIELDS}
    out["support_table"] = [base.support_table.version or None, new.support_table.version or None]
    return {k: v for k, v in out.items() if v[0] != v[1]}
