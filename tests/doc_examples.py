"""The examples of the README and of every documentation page (docs/**/*.md), read the same way for every test.

An example is a fenced code block: a shell block's `neuronprobe ...` lines (a `$ ` prompt and `\\` continuations
allowed) and a whole ```python block. A block that cannot run on a machine like CI's (it needs a Neuron host,
downloads 7 GB, reads a file only the user has) is marked on the line just above its fence:

    <!-- not-run: needs a Neuron host -->

The reason is required; such a block's commands are still parsed against the command line (the command exists,
its options are accepted), and its Python must compile.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from helpers import ROOT

_NOT_RUN = re.compile(r"^<!--\s*not-run:\s*(?P<reason>.*?)\s*-->\s*$")
_FENCE = re.compile(r"^(?P<indent>\s*)```(?P<lang>[\w+-]*)")


@dataclass(frozen=True)
class Block:
    """One fenced code block: where it is, its language, its text, and why it is not run (empty: it is run)."""

    path: Path
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    not_run: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


@dataclass(frozen=True)
class Command:
    """One `neuronprobe ...` command of a shell block: its words after `neuronprobe`, the comment dropped."""

    block: Block
    words: tuple[str, ...]

    @property
    def text(self) -> str:
        return shlex.join(self.words)


def doc_files() -> list[Path]:
    """The README first, then every page of the documentation site in path order."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks(path: Path) -> list[Block]:
    """Every fenced block of one Markdown file."""
    found: list[Block] = []
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, indent = i, len(m.group("indent"))
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith("```"):
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        above = lines[start - 1] if start > 0 else ""
        mark = _NOT_RUN.match(above.strip())
        found.append(Block(path, start + 1, m.group("lang"), "\n".join(body) + "\n", mark.group("reason") if mark else ""))
        i += 1
    return found


def all_blocks() -> list[Block]:
    return [b for path in doc_files() for b in blocks(path)]


def _shell_lines(text: str) -> list[str]:
    """The logical lines of a shell block: continuations joined, a `$ ` prompt dropped."""
    joined = text.replace("\\\n", " ")
    return [line.strip().removeprefix("$ ").strip() for line in joined.splitlines()]


def commands(block: Block) -> list[Command]:
    """The `neuronprobe ...` commands of a shell block, in order (a `# comment` after a command is dropped)."""
    if block.lang not in ("", "bash", "sh", "console", "shell"):
        return []
    out: list[Command] = []
    for line in _shell_lines(block.text):
        if not line.startswith("neuronprobe "):
            continue
        words = shlex.split(line, comments=True)
        out.append(Command(block, tuple(words[1:])))
    return out


def all_commands() -> list[Command]:
    return [c for b in all_blocks() for c in commands(b)]


def python_blocks() -> list[Block]:
    return [b for b in all_blocks() if b.lang == "python"]
