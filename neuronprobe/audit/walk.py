"""Which files an audit reads: the scannable files under each root, minus what
``.gitignore`` ignores, virtual environments and vendored folders.

Ignore rules come from every ``.gitignore`` on the way down, with git's own
semantics: patterns are ``pathspec``'s, the last pattern that matches decides
(so a nested ``!keep.py`` re-includes what a parent ignored), a pattern git
cannot use (``[z-a]``) is listed and matches nothing. A folder holding
``pyvenv.cfg`` is a virtual environment whatever its name. Only regular files
are audited: FIFOs, devices, sockets (a symlink to ``/dev/zero`` included) and
files or folders that cannot be read are listed as problems, never skipped
silently.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

import pathspec
from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

from neuronprobe.audit.reading import NotRegularFile, TooLarge, kind_of, read_regular, split_lines
from neuronprobe.audit.text_scan import classify

# A .gitignore larger than this is not a list of patterns a person wrote.
MAX_IGNORE_BYTES = 1024 * 1024

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


@dataclass
class Discovery:
    """What a walk found: the files to scan, what it could not or would not read, and the ignore files it read."""

    files: list[SourceFile] = field(default_factory=list)
    problems: list[tuple[str, int | None, str, str]] = field(default_factory=list)  # display, line, kind, detail
    read: list[str] = field(default_factory=list)  # every file the walk itself read (the .gitignore files)


@dataclass
class _Ignore:
    """The usable patterns of one .gitignore, in file order: (pattern, True to ignore / False to re-include)."""

    base: str  # the folder holding it, relative to the root ("" for the root)
    patterns: list[tuple[pathspec.Pattern, bool]]


def _read_gitignore(folder: str, base: str, found: Discovery) -> _Ignore | None:
    """The .gitignore of ``folder``: each pattern compiled on its own, so one bad line is listed and the rest still apply."""
    path = os.path.join(folder, ".gitignore")
    display = f"{base}/.gitignore" if base else ".gitignore"
    try:
        data = read_regular(path, MAX_IGNORE_BYTES)
    except FileNotFoundError:
        return None
    except (NotRegularFile, TooLarge) as exc:
        found.problems.append((display, None, "not-read", f"{exc.strerror}; its patterns do not apply"))
        return None
    except OSError as exc:
        if not os.path.lexists(path):
            return None
        found.problems.append((display, None, "unreadable", f"{exc.strerror or exc}; its patterns do not apply"))
        return None
    found.read.append(path)
    patterns: list[tuple[pathspec.Pattern, bool]] = []
    for number, line in enumerate(split_lines(data.decode("utf-8", errors="replace")), 1):
        try:
            pattern = GitIgnoreSpecPattern(line)
        except (ValueError, re.error) as exc:  # a bad character range ([z-a]) and the like: git matches nothing with it
            found.problems.append((display, number, "gitignore", f"pattern {line.strip()[:80]!r} ignored: {exc}"))
            continue
        if pattern.include is not None:
            patterns.append((pattern, bool(pattern.include)))
    return _Ignore(base, patterns)


def _ignored(specs: list[_Ignore], rel: str, is_dir: bool) -> bool:
    """Git's rule: the last pattern that matches decides, and a deeper .gitignore comes after a shallower one."""
    verdict = False
    for spec in specs:
        if spec.base and not rel.startswith(spec.base + "/"):
            continue
        sub = rel[len(spec.base) + 1 :] if spec.base else rel
        if is_dir:
            sub += "/"
        for pattern, ignore in spec.patterns:
            if pattern.match_file(sub) is not None:
                verdict = ignore
    return verdict


def discover(root: Path, include_vendored: bool = False) -> Discovery:
    """The scannable files under ``root`` (a folder or one file), sorted by path, with what could not be read."""
    found = Discovery()
    root_str = str(root)
    try:
        mode = os.stat(root_str).st_mode
    except OSError as exc:
        found.problems.append((root.as_posix(), None, "unreadable", exc.strerror or str(exc)))
        return found
    if not stat.S_ISDIR(mode):
        kind = classify(root.name) or ("python" if root.suffix == ".py" else None)
        if kind:
            found.files.append(SourceFile(root_str, root.as_posix(), kind))
        return found
    specs: list[_Ignore] = []

    def walk_error(exc: OSError) -> None:
        where = os.path.relpath(exc.filename, root_str).replace(os.sep, "/") if exc.filename else root.as_posix()
        where = root.as_posix() if where == "." else where + "/"
        found.problems.append((where, None, "unreadable", f"folder not listed: {exc.strerror or exc}"))

    for folder, dirs, files in os.walk(root_str, onerror=walk_error):
        rel_folder = os.path.relpath(folder, root_str).replace(os.sep, "/")
        rel_folder = "" if rel_folder == "." else rel_folder
        # specs of folders that are not on the way down to this one are dropped (os.walk is depth first)
        specs = [s for s in specs if not s.base or rel_folder == s.base or rel_folder.startswith(s.base + "/")]
        spec = _read_gitignore(folder, rel_folder, found)
        if spec is not None:
            specs.append(spec)
        keep = []
        for d in sorted(dirs):
            rel = f"{rel_folder}/{d}" if rel_folder else d
            if d in SKIPPED_DIRS or d.endswith(".egg-info") or (not include_vendored and d.lower() in VENDORED_DIRS):
                continue
            if os.path.lexists(os.path.join(folder, d, "pyvenv.cfg")) or _ignored(specs, rel, True):
                continue
            keep.append(d)
        dirs[:] = keep
        for f in sorted(files):
            rel = f"{rel_folder}/{f}" if rel_folder else f
            kind = classify(rel)
            if not kind or _ignored(specs, rel, False):
                continue
            path = os.path.join(folder, f)
            try:
                mode = os.stat(path).st_mode  # follows a symlink: a link to /dev/zero is a device
            except OSError as exc:
                found.problems.append((rel, None, "unreadable", exc.strerror or str(exc)))
                continue
            if not stat.S_ISREG(mode):
                found.problems.append((rel, None, "not-read", f"{kind_of(mode)}: not read"))
                continue
            found.files.append(SourceFile(path, rel, kind))
    return found
