"""The audit's result objects: plain dataclasses that are part of the report schema.

``AuditSection`` is what ``neuronprobe audit --json`` writes, what ``--baseline``
reads back, and what ``Report.audit`` holds when ``analyze --audit PATH`` ran.
It imports only the typed JSON reader (below it), so the report model can import it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from neuronprobe.typed_json import DocumentSchema

SEVERITIES: tuple[str, ...] = ("error", "warning", "info")  # worst first
SEVERITY_RANK: dict[str, int] = {s: i for i, s in enumerate(SEVERITIES)}


@dataclass
class AuditFinding:
    """One CUDA assumption at one place."""

    rule: str
    severity: str  # error | warning | info
    file: str  # relative to the audited root, with forward slashes
    line: int  # 1-based
    column: int = 1  # 1-based
    message: str = ""
    fix: str = ""  # for the chosen stack
    snippet: str = ""  # the source line, stripped: also the baseline fingerprint
    new: bool = True  # False when the baseline already had it
    cell: int | None = None  # a notebook: the cell (1-based, every cell counted); ``line`` is then the line in the cell
    raw_line: int | None = None  # a notebook: the line of the .ipynb file that holds the code line (SARIF regions)
    # The same rule on the same source line in copies of this file elsewhere in the tree (same file
    # name; e.g. modded-nanogpt's records/*/train_gpt.py): their places, reported once here.
    copies: list[str] = field(default_factory=list)

    @property
    def place(self) -> str:
        """``file:line``, or ``notebook.ipynb cell n, line k`` in a notebook."""
        if self.cell is not None:
            return f"{self.file} cell {self.cell}, line {self.line}"
        return f"{self.file}:{self.line}"


@dataclass
class AuditProblem:
    """A file that could not be audited, or a suppression that names no rule: reported, never fatal."""

    file: str
    line: int | None
    kind: str  # unreadable | not-read (FIFO, device, over the size cap) | syntax | gitignore | suppression
    detail: str


@dataclass
class AuditSection:
    """The audit of one or more paths."""

    roots: list[str] = field(default_factory=list)
    stack: str = "xla"  # xla | native
    files_scanned: int = 0
    findings: list[AuditFinding] = field(default_factory=list)
    problems: list[AuditProblem] = field(default_factory=list)
    suppressed: int = 0  # findings silenced by an inline `# neuronprobe: ignore[rule]`
    baseline: str | None = None  # the baseline file compared against, if any
    baseline_known: int = 0  # findings the baseline already had

    def counts(self) -> dict[str, int]:
        """Findings per severity, worst first, zeros included."""
        return {s: sum(1 for f in self.findings if f.severity == s) for s in SEVERITIES}

    def worst_first(self) -> list[AuditFinding]:
        """Errors first, then warnings, then info; by file and line within each."""
        return sorted(self.findings, key=lambda f: (SEVERITY_RANK[f.severity], f.file, f.line, f.column))


# The ``audit --json`` file: ``schema_version`` then the section's fields. 1: the shape written since the
# audit has had --json (files without a version are read as 1).
AUDIT_SCHEMA_VERSION = 1
AUDIT_DOCUMENT: DocumentSchema[AuditSection] = DocumentSchema(
    "audit JSON", AuditSection, AUDIT_SCHEMA_VERSION, marker="findings", hint="`neuronprobe audit --json`", where="audit"
)
