"""Audit noise from copies: one finding per rule per line, and copies of a file folded into the first.

Training repositories keep old versions of their script beside the current one
(modded-nanogpt keeps 53 ``records/*/train_gpt*.py``, renamed as they go): every copy repeats
the same CUDA assumptions, and the audit reported each one in each copy (421 of the 641
findings over the ten labelled repositories of ``benchmarks/audit_recall_labels.toml``). A
reader fixes the current script and learns nothing from the repeats, so:

* one finding per rule per line (the first column): ``a.cuda(), b.cuda()`` is one place to fix;
* a file whose text is a near-copy of a file met before (at least :data:`COPY_SIMILARITY` of
  their distinct lines shared, Jaccard) has each finding that repeats one of that file's (same
  rule, same source line) listed in the earlier finding's ``copies`` instead of on its own.
  A copy lives in another folder than its original (an archive: ``records/``, ``old/``):
  near-identical siblings in one folder (mae's ``main_finetune.py`` and ``main_linprobe.py``,
  TinyLlama's ``pretrain/tinyllama.py`` and ``tinyllama_code.py``) are alternatives a user
  runs, each reported in full. Files are met shallowest first (the current script before its
  archived copies), so a site at the top of the tree is never hidden behind a copy. Lines only the copy has stay
  findings; two lines of one file are never merged; two different scripts that share a few
  lines (``train.py`` and ``sample.py`` both calling ``torch.cuda.set_device``) are not
  copies, and each keeps its findings.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import PurePosixPath

from neuronprobe.audit.model import AuditFinding

COPY_SIMILARITY = 0.6  # archived versions of one script share ~0.8-0.99 of their lines; different scripts of one repo < 0.3
MAX_CANDIDATES = 32  # earlier files compared with one file: those sharing the most findings

Pair = tuple[str, str, bool]  # rule, snippet, in a notebook


def _pair(f: AuditFinding) -> Pair:
    return f.rule, f.snippet, f.cell is not None


def _similarity(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


def collapse_copies(
    findings: list[AuditFinding], lines_of: Callable[[str], frozenset[str]], root_of: Callable[[str], int] = lambda file: 0
) -> list[AuditFinding]:
    """``findings`` with repeats on one line merged and repeats in near-copies folded into ``copies`` (module docstring).

    ``lines_of(file)`` gives the distinct stripped lines of a finding's file (empty when it
    cannot be read again: then the file is nobody's copy). ``root_of(file)`` the audited root
    it was found under: copies are looked for within one root (roots named side by side are
    each reported in full).
    """
    order = sorted(findings, key=lambda f: (f.file.count("/"), f.file, f.cell or 0, f.line, f.column, f.rule))
    by_file: dict[str, list[AuditFinding]] = {}
    on_line: set[tuple[str, int, int, str]] = set()
    for f in order:
        place = (f.file, f.cell or 0, f.line, f.rule)
        if place not in on_line:  # the same rule again on this line: one finding
            on_line.add(place)
            by_file.setdefault(f.file, []).append(f)
    kept: list[AuditFinding] = []
    resolved: dict[str, dict[Pair, AuditFinding]] = {}  # file -> its pair -> the finding that pair is reported under
    files_with: dict[Pair, list[str]] = {}
    for file, mine in by_file.items():
        pairs = {_pair(f) for f in mine if f.snippet}
        shared: dict[str, int] = {}
        for p in pairs:
            for other in files_with.get(p, []):
                if root_of(other) == root_of(file) and PurePosixPath(other).parent != PurePosixPath(file).parent:
                    shared[other] = shared.get(other, 0) + 1
        best, best_sim = None, 0.0
        if shared:
            here = lines_of(file)
            for other in sorted(shared, key=lambda o: (-shared[o], o))[:MAX_CANDIDATES]:
                sim = _similarity(here, lines_of(other))
                if sim > best_sim:
                    best, best_sim = other, sim
        original = resolved[best] if best is not None and best_sim >= COPY_SIMILARITY else {}
        table = resolved.setdefault(file, {})
        for f in mine:
            target = original.get(_pair(f)) if f.snippet else None
            if target is not None:
                target.copies.append(f.place)
                table.setdefault(_pair(f), target)
            else:
                kept.append(f)
                table.setdefault(_pair(f), f)
        for p in pairs:
            files_with.setdefault(p, []).append(file)
    return kept


__all__ = ["COPY_SIMILARITY", "collapse_copies"]
