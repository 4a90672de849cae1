"""Run an audit: discover files, scan them in parallel worker processes, apply
suppressions, and collect one :class:`AuditSection`.

Library only: nothing here prints or exits. Progress is reported through an
optional callback ``progress(done, total)`` that the CLI turns into a bar.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from neuronprobe.audit.model import SEVERITY_RANK, AuditFinding, AuditProblem, AuditSection
from neuronprobe.audit.notebooks import scan_notebook
from neuronprobe.audit.python_scan import scan_python
from neuronprobe.audit.rules import STACKS, load_rules
from neuronprobe.audit.suppress import apply_baseline, load_baseline, suppressions
from neuronprobe.audit.text_scan import KIND_NOTEBOOK, KIND_PYTHON, scan_text
from neuronprobe.audit.walk import SourceFile, discover
from neuronprobe.errors import InputError

# Files above this size are generated data, not code a person wrote.
MAX_FILE_BYTES = 4 * 1024 * 1024
# Fewer files than this are scanned in-process: starting workers costs more than it saves.
MIN_FILES_FOR_POOL = 48
CHUNK_FILES = 16

Progress = Callable[[int, int], None]


@dataclass
class FileResult:
    """What one worker found in one file (plain tuples: cheap to send between processes)."""

    display: str
    findings: list[tuple[str, int, int, str]] = field(default_factory=list)  # rule, line, col, snippet
    cells: list[tuple[int, int]] = field(default_factory=list)  # a notebook: (cell, raw line) of each finding, same order
    problems: list[tuple[int | None, str, str]] = field(default_factory=list)  # line, kind, detail
    suppressed: int = 0


def scan_file(source: SourceFile) -> FileResult:
    """Scan one file; every failure becomes a problem, never an exception."""
    result = FileResult(source.display)
    try:
        if os.path.getsize(source.path) > MAX_FILE_BYTES:
            result.problems.append((None, "too-large", f"larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB: not audited"))
            return result
        with open(source.path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        result.problems.append((None, "unreadable", exc.strerror or str(exc)))
        return result
    if source.kind == KIND_NOTEBOOK:
        return _scan_notebook(result, data)
    try:
        if source.kind == KIND_PYTHON:
            hits = scan_python(data, source.display)
        else:
            hits = scan_text(source.kind, source.display, data.decode("utf-8", errors="replace"))
    except SyntaxError as exc:
        result.problems.append((exc.lineno, "syntax", f"does not parse: {exc.msg}; not audited"))
        return result
    except (ValueError, RecursionError) as exc:  # null bytes, absurdly deep nesting
        result.problems.append((None, "syntax", f"cannot be parsed ({type(exc).__name__}: {exc}); not audited"))
        return result
    if not hits:
        return result
    lines = data.decode("utf-8", errors="replace").splitlines()
    silenced = suppressions(lines)
    known = load_rules()
    for line, ids in silenced.items():
        for rule_id in sorted(ids - known.keys()):
            result.problems.append((line, "suppression", f"suppression names an unknown rule {rule_id!r}"))
    for rule, line, col in hits:
        if rule in silenced.get(line, ()):
            result.suppressed += 1
            continue
        snippet = lines[line - 1].strip() if 0 < line <= len(lines) else ""
        result.findings.append((rule, line, col, snippet))
    return result


def _scan_notebook(result: FileResult, data: bytes) -> FileResult:
    """A notebook's code cells, each scanned as Python (audit/notebooks.py)."""
    scan = scan_notebook(data, set(load_rules()))
    result.problems.extend(scan.problems)
    result.problems.extend((line, "suppression", detail) for line, detail in scan.unknown_suppressions or [])
    result.suppressed += scan.suppressed
    for hit in scan.hits:
        result.findings.append((hit.rule, hit.line, hit.column, hit.snippet))
        result.cells.append((hit.cell, hit.raw_line))
    return result


def _scan_all(files: list[SourceFile], jobs: int, progress: Progress | None) -> list[FileResult]:
    total = len(files)
    if jobs <= 1 or total < MIN_FILES_FOR_POOL:
        results = []
        for i, f in enumerate(files, 1):
            results.append(scan_file(f))
            if progress:
                progress(i, total)
        return results
    results = []
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for i, r in enumerate(pool.map(scan_file, files, chunksize=CHUNK_FILES), 1):
            results.append(r)
            if progress and (i % CHUNK_FILES == 0 or i == total):
                progress(i, total)
    return results


def default_jobs() -> int:
    """One worker per core this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def audit_paths(
    paths: Sequence[str | Path],
    stack: str = "xla",
    *,
    jobs: int | None = None,
    include_vendored: bool = False,
    baseline: Path | None = None,
    progress: Progress | None = None,
) -> AuditSection:
    """Audit files and folders for CUDA assumptions. InputError (exit 2) when a path does not exist."""
    if stack not in STACKS:
        raise InputError(f"--stack {stack!r}: use {' or '.join(STACKS)}")
    if not paths:
        raise InputError("give at least one PATH to audit")
    roots = [Path(p) for p in paths]
    for root in roots:
        if not root.exists():
            raise InputError(f"{root}: no such file or folder")
    known_baseline = load_baseline(baseline) if baseline is not None else None
    files: list[SourceFile] = []
    prefix_roots = len(roots) > 1
    for root in roots:
        for f in discover(root, include_vendored):
            display = f"{root.as_posix().rstrip('/')}/{f.display}" if prefix_roots and root.is_dir() else f.display
            files.append(SourceFile(f.path, display, f.kind))
    results = _scan_all(files, jobs if jobs is not None else default_jobs(), progress)
    rules = load_rules()
    section = AuditSection(roots=[str(r) for r in roots], stack=stack, files_scanned=len(files))
    for r in results:
        section.suppressed += r.suppressed
        for line, kind, detail in r.problems:
            section.problems.append(AuditProblem(r.display, line, kind, detail))
        for i, (rule_id, line, col, snippet) in enumerate(r.findings):
            rule = rules[rule_id]
            cell, raw_line = r.cells[i] if r.cells else (None, None)
            section.findings.append(
                AuditFinding(rule_id, rule.severity, r.display, line, col, rule.message, rule.fix(stack), snippet, cell=cell, raw_line=raw_line)
            )
    section.findings.sort(key=lambda f: (f.file, f.cell or 0, f.line, f.column, SEVERITY_RANK[f.severity], f.rule))
    if known_baseline is not None and baseline is not None:
        apply_baseline(section, known_baseline, str(baseline))
    return section


def gate(section: AuditSection, fail_on: Sequence[str]) -> list[AuditFinding]:
    """The new findings that fail ``--fail-on``: severities (error = errors; warning = errors and warnings) or rule ids."""
    wanted_rules = {v for v in fail_on if v in load_rules()}
    levels = {v for v in fail_on if v in ("error", "warning", "info")}
    worst = max((SEVERITY_RANK[v] for v in levels), default=-1)
    return [f for f in section.findings if f.new and (f.rule in wanted_rules or SEVERITY_RANK[f.severity] <= worst)]


def check_fail_on(values: Sequence[str]) -> None:
    """InputError naming the first value that is neither a severity nor a rule id."""
    rules = load_rules()
    for v in values:
        if v not in ("error", "warning", "info") and v not in rules:
            raise InputError(f"--fail-on: unknown rule or severity {v!r}; use error, warning, info or a rule id from `neuronprobe audit --rules`")
