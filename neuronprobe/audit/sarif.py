"""SARIF 2.1.0 output, for GitHub code scanning (findings inline on pull requests).

One run, the whole rule catalogue in ``tool.driver.rules``, one result per
finding with a ``%SRCROOT%``-relative location (an absolute ``file://`` URI for a file outside the audited folder), a stable partial fingerprint
(rule, file, source line) so code scanning tracks a finding across line
shifts, and files that could not be audited as tool notifications.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote

from neuronprobe.audit.model import AuditSection
from neuronprobe.audit.rules import PROVENANCE_URLS, load_rules

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
LEVELS = {"error": "error", "warning": "warning", "info": "note"}
FINGERPRINT_KEY = "neuronprobe/v1"


def _artifact(path: str) -> dict[str, Any]:
    """An artifactLocation: relative paths against ``%SRCROOT%`` (the audited folder), any other path as an absolute file URI.

    SARIF 2.1.0 (3.4.4, 3.10.3): a ``uriBaseId`` is for a relative reference only, so a file given
    by an absolute path, or one above the audited folder (``../x.py``), gets a ``file://`` URI and
    no base. ``./`` in front of a relative path is dropped.
    """
    posix = PurePosixPath(path)
    if posix.is_absolute() or ".." in posix.parts:
        return {"uri": Path(os.path.abspath(path)).as_uri()}
    return {"uri": quote(posix.as_posix(), safe="/"), "uriBaseId": "%SRCROOT%"}


def _rule_json(rule: Any, stack: str) -> dict[str, Any]:
    sources = [PROVENANCE_URLS.get(p, p) for p in rule.provenance]
    markdown = (
        f"{rule.why}\n\n**Fix (XLA-era torch-neuronx, trn1/inf2):** {rule.fix_xla}\n\n"
        f"**Fix (TorchNeuron, trn2/trn3):** {rule.fix_native}"
        + (f"\n\n**Where the Neuron docs are silent:** {rule.docs_silent}" if rule.docs_silent else "")
        + ("\n\nSources: " + ", ".join(sources) if sources else "")
    )
    return {
        "id": rule.id,
        "name": "".join(part.capitalize() for part in rule.id.split("-")),
        "shortDescription": {"text": rule.title},
        "fullDescription": {"text": rule.why},
        "help": {"text": f"{rule.why} Fix: {rule.fix(stack)}", "markdown": markdown},
        "defaultConfiguration": {"level": LEVELS[rule.severity]},
        "properties": {"tags": ["neuron", "cuda", "portability"], "severity": rule.severity},
    }


def to_sarif(section: AuditSection, tool_version: str) -> dict[str, Any]:
    """The SARIF log as a JSON-ready dict."""
    rules = load_rules()
    index = {rule_id: i for i, rule_id in enumerate(rules)}
    results = []
    for f in section.findings:
        fingerprint = hashlib.sha256(f"{f.rule}\0{f.file}\0{f.snippet}".encode()).hexdigest()
        result: dict[str, Any] = {
            "ruleId": f.rule,
            "ruleIndex": index[f.rule],
            "level": LEVELS[f.severity],
            "message": {"text": (f"Cell {f.cell}, line {f.line}: " if f.cell is not None else "") + f"{f.message}. Fix ({section.stack}): {f.fix}"},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": _artifact(f.file),
                        # a notebook: the line of the stored .ipynb that holds the code (what GitHub shows)
                        "region": {"startLine": f.raw_line, "startColumn": 1} if f.raw_line is not None else {"startLine": f.line, "startColumn": f.column},
                    }
                }
            ],
            "partialFingerprints": {FINGERPRINT_KEY: fingerprint},
        }
        if section.baseline is not None:
            result["baselineState"] = "new" if f.new else "unchanged"
        results.append(result)
    notifications = []
    for p in section.problems:
        note: dict[str, Any] = {"level": "warning", "message": {"text": f"{p.file}: {p.detail}"}}
        location: dict[str, Any] = {"artifactLocation": _artifact(p.file)}
        if p.line:
            location["region"] = {"startLine": p.line}
        note["locations"] = [{"physicalLocation": location}]
        notifications.append(note)
    return {
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "neuronprobe",
                        "version": tool_version,
                        "rules": [_rule_json(r, section.stack) for r in rules.values()],
                    }
                },
                "invocations": [{"executionSuccessful": True, "toolExecutionNotifications": notifications}],
                "results": results,
            }
        ],
    }


def sarif_json(section: AuditSection, tool_version: str) -> str:
    return json.dumps(to_sarif(section, tool_version), indent=2) + "\n"
