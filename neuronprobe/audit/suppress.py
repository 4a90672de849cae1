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

import json
import re
from collections import Counter
from pathlib import Path

from neuronprobe.audit.model import AuditFinding, AuditSection
from neuronprobe.errors import InputError

SUPPRESSION = re.compile(r"#\s*neuronprobe:\s*ignore\[([^\]]*)\]")


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
    """The findings of a previous ``audit --json``; InputError (exit 2) for anything else."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"--baseline {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"--baseline {path}: cannot read it ({exc})") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"--baseline {path}: not valid JSON (line {exc.lineno}: {exc.msg}); write one with `neuronprobe audit --json`") from None
    items = data.get("findings") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise InputError(f"--baseline {path}: not an audit JSON (no 'findings' list); write one with `neuronprobe audit --json`")
    findings = []
    for n, item in enumerate(items):
        if not isinstance(item, dict) or not all(isinstance(item.get(k), str) for k in ("rule", "file", "snippet")):
            raise InputError(f"--baseline {path}: findings[{n}] lacks rule, file or snippet")
        findings.append(
            AuditFinding(
                rule=item["rule"], severity=str(item.get("severity", "")), file=item["file"], line=int(item.get("line", 0) or 0), snippet=item["snippet"]
            )
        )
    return findings


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
