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
from neuronprobe.audit.reading import NotRegularFile, TooLarge, read_regular
from neuronprobe.errors import InputError

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


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number JSON allows")


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def load_baseline(path: Path) -> list[AuditFinding]:
    """The findings of a previous ``audit --json``; InputError (exit 2) naming the file and the field for anything else."""
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
        data = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError:
        raise InputError(f"{label}: not UTF-8 text; write one with `neuronprobe audit --json`") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{label}: not valid JSON (line {exc.lineno}: {exc.msg}); write one with `neuronprobe audit --json`") from None
    except ValueError as exc:  # NaN / Infinity
        raise InputError(f"{label}: not valid JSON ({exc}); write one with `neuronprobe audit --json`") from None
    except RecursionError:
        raise InputError(f"{label}: nested too deeply to be an audit JSON") from None
    items = data.get("findings") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise InputError(f"{label}: not an audit JSON (no 'findings' list); write one with `neuronprobe audit --json`")
    findings = []
    for n, item in enumerate(items):
        where = f"{label}: findings[{n}]"
        if not isinstance(item, dict):
            raise InputError(f"{where}: expected an object, got {type(item).__name__}")
        for key in ("rule", "file", "snippet"):
            if key not in item:
                raise InputError(f"{where}.{key}: missing")
            if not isinstance(item[key], str):
                raise InputError(f"{where}.{key}: expected a string, got {_shown(item[key])}")
        severity = item.get("severity", "")
        if not isinstance(severity, str):
            raise InputError(f"{where}.severity: expected a string, got {_shown(severity)}")
        line = item.get("line", 0)
        if line is None:
            line = 0
        if not _whole(line) or line < 0:
            raise InputError(f"{where}.line: expected a line number (a whole number, 0 or more), got {_shown(line)}")
        findings.append(AuditFinding(rule=item["rule"], severity=severity, file=item["file"], line=line, snippet=item["snippet"]))
    return findings


def _shown(value: object) -> str:
    """A value as the user wrote it, short and on one line."""
    text = json.dumps(value) if not isinstance(value, float) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


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
