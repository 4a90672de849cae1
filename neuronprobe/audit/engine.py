"""Run an audit: discover files, scan them in parallel worker processes, apply
suppressions, and collect one :class:`AuditSection`.

Library only: nothing here prints or exits. Progress is reported through an
optional callback ``progress(done, total)`` that the CLI turns into a bar.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from neuronprobe.audit.copies import collapse_copies
from neuronprobe.audit.model import SEVERITY_RANK, AuditFinding, AuditProblem, AuditSection
from neuronprobe.audit.notebooks import scan_notebook
from neuronprobe.audit.python_scan import scan_python
from neuronprobe.audit.reading import MAX_FILE_BYTES, NotRegularFile, TooLarge, kind_of, read_regular, split_lines
from neuronprobe.audit.rules import STACKS, load_rules
from neuronprobe.audit.suppress import apply_baseline, load_baseline, suppressions
from neuronprobe.audit.text_scan import KIND_NOTEBOOK, KIND_PYTHON, scan_text
from neuronprobe.audit.walk import Discovery, SourceFile, discover
from neuronprobe.errors import InputError

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
        data = read_regular(source.path, MAX_FILE_BYTES)
    except (NotRegularFile, TooLarge) as exc:
        result.problems.append((None, "not-read", exc.strerror or str(exc)))
        return result
    except OSError as exc:
        result.problems.append((None, "unreadable", exc.strerror or str(exc)))
        return result
    if source.kind == KIND_NOTEBOOK:
        return _scan_notebook(result, data)
    text = data.decode("utf-8", errors="replace")
    try:
        hits = scan_python(data, source.display) if source.kind == KIND_PYTHON else scan_text(source.kind, source.display, text)
    except SyntaxError as exc:
        result.problems.append((exc.lineno, "syntax", f"does not parse: {exc.msg}; not audited"))
        return result
    except (RecursionError, MemoryError) as exc:
        # Nesting deeper than the parser or the tree walk goes: the parser gives up with MemoryError
        # ("-" * 100_000) or RecursionError, the walk stops at the interpreter's recursion limit.
        result.problems.append((None, "syntax", f"nested too deeply to be parsed ({type(exc).__name__}); not audited"))
        return result
    except ValueError as exc:  # null bytes
        result.problems.append((None, "syntax", f"cannot be parsed ({exc}); not audited"))
        return result
    if not hits:
        return result
    lines = split_lines(text)  # numbered as the syntax tree numbers them
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


def _roots(paths: Sequence[str | Path]) -> list[Path]:
    """The paths to audit, each once (the same folder or file given twice, or by two spellings, is audited once)."""
    if not paths:
        raise InputError("give at least one PATH to audit")
    roots: list[Path] = []
    seen: set[str] = set()
    for p in paths:
        if str(p) == "":
            raise InputError("an empty PATH: give a file or folder to audit ('.' for the current folder)")
        root = Path(p)
        try:
            st = root.stat()
        except FileNotFoundError:
            raise InputError(f"{root}: no such file or folder") from None
        except OSError as exc:
            raise InputError(f"{root}: cannot be read ({exc.strerror or exc})") from None
        if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
            raise InputError(f"{root}: {kind_of(st.st_mode)}, not a file or folder to audit")
        key = os.path.realpath(root)
        if key not in seen:
            seen.add(key)
            roots.append(root)
    return roots


def _discover_all(roots: list[Path], include_vendored: bool) -> tuple[list[SourceFile], Discovery]:
    """Every file under the roots, each real file once (a file inside a folder also given is audited once)."""
    files: list[SourceFile] = []
    every = Discovery()
    seen: set[str] = set()
    prefix_roots = len(roots) > 1
    for root in roots:
        found = discover(root, include_vendored)
        is_dir = root.is_dir()

        def named(display: str, root: Path = root, is_dir: bool = is_dir) -> str:
            return f"{root.as_posix().rstrip('/')}/{display}" if prefix_roots and is_dir and display != root.as_posix() else display

        for f in found.files:
            key = os.path.realpath(f.path)
            if key in seen:
                continue
            seen.add(key)
            files.append(SourceFile(f.path, named(f.display), f.kind))
        every.problems.extend((named(d), line, kind, detail) for d, line, kind, detail in found.problems)
        every.read.extend(found.read)
    return files, every


def audit_inputs(paths: Sequence[str | Path], include_vendored: bool = False, baseline: Path | None = None) -> list[Path]:
    """Every path an audit of ``paths`` reads: the roots, each file it would scan, every .gitignore and the baseline.

    For the guard that refuses to write an output over an input. InputError as :func:`audit_paths`.
    """
    roots = _roots(paths)
    files, found = _discover_all(roots, include_vendored)
    out = [*roots, *(Path(f.path) for f in files), *(Path(p) for p in found.read)]
    if baseline is not None:
        out.append(Path(baseline))
    return out


def _line_sets(files: list[SourceFile], roots: list[Path]) -> tuple[Callable[[str], frozenset[str]], Callable[[str], int]]:
    """For the copy check, by a file's display name: its distinct stripped lines (read again on demand, bounded) and its root."""
    paths: dict[str, str] = {}
    for f in files:
        paths.setdefault(f.display, f.path)
    cache: dict[str, frozenset[str]] = {}
    resolved = [os.path.realpath(r) for r in roots]

    def root_of(display: str) -> int:
        path = os.path.realpath(paths.get(display, display))
        return next((i for i, r in enumerate(resolved) if path == r or path.startswith(r.rstrip(os.sep) + os.sep)), -1)

    def lines_of(display: str) -> frozenset[str]:
        if display not in cache:
            try:
                text = read_regular(paths[display]).decode("utf-8", errors="replace")
            except (KeyError, OSError, NotRegularFile, TooLarge):
                text = ""
            cache[display] = frozenset(line.strip() for line in text.splitlines() if line.strip())
        return cache[display]

    return lines_of, root_of


def audit_paths(
    paths: Sequence[str | Path],
    stack: str = "xla",
    *,
    jobs: int | None = None,
    include_vendored: bool = False,
    baseline: Path | None = None,
    progress: Progress | None = None,
) -> AuditSection:
    """Audit files and folders for CUDA assumptions.

    InputError (exit 2) when a path is empty, does not exist or is neither a file nor a folder, or the
    baseline is not an earlier audit JSON. What cannot be read inside a folder (an unreadable file or
    folder, a FIFO, a device, a file over the size cap, a bad .gitignore pattern) is listed in
    ``section.problems`` and the rest is audited. The files read are :func:`audit_inputs`.
    """
    if stack not in STACKS:
        raise InputError(f"--stack {stack!r}: use {' or '.join(STACKS)}")
    roots = _roots(paths)
    known_baseline = load_baseline(baseline) if baseline is not None else None
    files, found = _discover_all(roots, include_vendored)
    results = _scan_all(files, jobs if jobs is not None else default_jobs(), progress)
    rules = load_rules()
    section = AuditSection(roots=[str(r) for r in roots], stack=stack, files_scanned=len(files))
    for display, line, kind, detail in found.problems:
        section.problems.append(AuditProblem(display, line, kind, detail))
    for r in results:
        section.suppressed += r.suppressed
        for line, kind, detail in r.problems:
            section.problems.append(AuditProblem(r.display, line, kind, detail))
        for i, (rule_id, line, col, snippet) in enumerate(r.findings):
            rule = rules[rule_id]
            if stack not in rule.stacks:  # an XLA-stack idiom is only a finding for the native stack
                continue
            cell, raw_line = r.cells[i] if r.cells else (None, None)
            section.findings.append(
                AuditFinding(rule_id, rule.severity, r.display, line, col, rule.message, rule.fix(stack), snippet, cell=cell, raw_line=raw_line)
            )
    lines_of, root_of = _line_sets(files, roots)
    section.findings = collapse_copies(section.findings, lines_of, root_of)  # one per line per rule; near-copies folded in
    section.findings.sort(key=lambda f: (f.file, f.cell or 0, f.line, f.column, SEVERITY_RANK[f.severity], f.rule))
    section.problems.sort(key=lambda p: (p.file, p.line or 0, p.kind))
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
