"""Which files an audit reads: the scannable files under each root, minus what
``.gitignore`` ignores, virtual environments and vendored folders.

Ignore rules come from every ``.gitignore`` on the way down (git's own
semantics, via ``pathspec``); a folder holding ``pyvenv.cfg`` is a virtual
environment whatever its name.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pathspec

from neuronprobe.audit.text_scan import classify

SKIPPED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".tox",
        ".nox",
        ".venv",
        "venv",
        ".env",
        "env",
        "node_modules",
        "__pycache__",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".eggs",
        "site-packages",
        "dist-packages",
    }
)
VENDORED_DIRS = frozenset({"vendor", "vendored", "_vendor", "third_party", "third-party", "thirdparty", "external", "extern"})


@dataclass(frozen=True)
class SourceFile:
    """One file to audit: where it is, how the report names it, and which scanner reads it."""

    path: str  # absolute
    display: str  # relative to its root folder (forward slashes); a file given as the root keeps the path as given
    kind: str


def _spec(folder: Path) -> pathspec.PathSpec | None:
    gitignore = folder / ".gitignore"
    try:
        lines = gitignore.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    return pathspec.GitIgnoreSpec.from_lines(lines)


def discover(root: Path, include_vendored: bool = False) -> list[SourceFile]:
    """The scannable files under ``root`` (a folder or one file), sorted by path."""
    if root.is_file():
        kind = classify(root.name) or ("python" if root.suffix == ".py" else None)
        return [SourceFile(str(root), root.as_posix(), kind)] if kind else []
    found: list[SourceFile] = []
    specs: list[tuple[str, pathspec.PathSpec]] = []  # (folder relative to root, its .gitignore)
    root_str = str(root)
    for folder, dirs, files in os.walk(root_str):
        rel_folder = os.path.relpath(folder, root_str).replace(os.sep, "/")
        rel_folder = "" if rel_folder == "." else rel_folder
        spec = _spec(Path(folder))
        if spec is not None:
            specs.append((rel_folder, spec))

        def ignored(rel: str, is_dir: bool) -> bool:
            for base, s in specs:
                if base and not rel.startswith(base + "/"):
                    continue
                sub = rel[len(base) + 1 :] if base else rel
                if s.match_file(sub + ("/" if is_dir else "")):
                    return True
            return False

        keep = []
        for d in sorted(dirs):
            rel = f"{rel_folder}/{d}" if rel_folder else d
            if d in SKIPPED_DIRS or d.endswith(".egg-info") or (not include_vendored and d.lower() in VENDORED_DIRS):
                continue
            if os.path.exists(os.path.join(folder, d, "pyvenv.cfg")) or ignored(rel, True):
                continue
            keep.append(d)
        dirs[:] = keep
        for f in sorted(files):
            rel = f"{rel_folder}/{f}" if rel_folder else f
            kind = classify(rel)
            if kind and not ignored(rel, False):
                found.append(SourceFile(os.path.join(folder, f), rel, kind))
    return found
