"""Adopting the audit gradually: inline suppressions and a baseline file.

* ``# neuronprobe: ignore[rule-id]`` (or ``ignore[a, b]``) on a finding's line
  silences those rules there. A rule id that does not exist is reported, so a
  typo cannot silence nothing forever.
* ``--baseline audit.json`` (a previous ``audit --json``): findings it already
  has are marked known, and only new ones gate. Findings are matched by rule,
  file and the stripped source line, so code edited above them does not make
  them new; two identical lines count twice.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from neuronprobe.audit.model import AUDIT_DOCUMENT, AuditFinding, AuditSection
from neuronprobe.audit.reading import NotRegularFile, TooLarge, read_regular
from neuronprobe.errors import InputError, ReportFormatError

# The bracket's contents stop at the next '#': every attempt scans only up to the next '#' or ']',
# and attempts start at distinct '#'s, so a line is matched in time linear in its length (with
# ``[^\]]*`` a line of repeated "# neuronprobe: ignore[" took time quadratic in its length).
SUPPRESSION = re.compile(r"#[ \t]*neuronprobe:[ \t]*ignore\[([^\]#]*)\]")
# A baseline is an earlier ``audit --json``; one larger than this is not one.
MAX_BASELINE_BYTES = 64 * 1024 * 1024


def suppressions(lines: list[str]) -> dict[int, set[str]]:
    """1-based line -> rule ids named by a suppression comment on that line."""
    out: dict[int, set[str]] = {}
    for i, line in enumerate(lines, 1):
        if "neuronprobe" not in line:
            continue
        for m in SUPPRESSION.finditer(line):
            ids = {part.strip() for part in m.group(1).split(",") if part.strip()}
            out.setdefault(i, set()).update(ids)
    return out


def _key(f: AuditFinding) -> tuple[str, str, str]:
    return (f.rule, f.file, f.snippet)


def load_baseline(path: Path) -> list[AuditFinding]:
    """The findings of a previous ``audit --json``, read by the strict typed reader (``AUDIT_DOCUMENT``);
    InputError (exit 2) naming the file and the field for anything else."""
    label = f"--baseline {path}"
    try:
        raw = read_regular(path, MAX_BASELINE_BYTES)
    except FileNotFoundError:
        raise InputError(f"{label}: no such file") from None
    except (NotRegularFile, TooLarge) as exc:
        raise InputError(f"{label}: {exc.strerror}; give an earlier `neuronprobe audit --json`") from None
    except OSError as exc:
        raise InputError(f"{label}: cannot read it ({exc.strerror or exc})") from None
    try:
        section = AUDIT_DOCUMENT.loads(raw)
    except ReportFormatError as exc:
        raise InputError(f"{label}: {exc}") from None
    for n, finding in enumerate(section.findings):
        if finding.line < 0:  # a type the schema accepts, a value no audit writes
            raise InputError(f"{label}: audit.findings[{n}].line: expected a line number (0 or more), got {finding.line}")
    return section.findings


def apply_baseline(section: AuditSection, baseline: list[AuditFinding], label: str) -> None:
    """Mark the findings the baseline already has as not new (multiset match)."""
    known = Counter(_key(f) for f in baseline)
    for f in section.findings:
        k = _key(f)
        if known[k] > 0:
            known[k] -= 1
            f.new = False
    section.baseline = label
    section.baseline_known = sum(1 for f in section.findings if not f.new)
