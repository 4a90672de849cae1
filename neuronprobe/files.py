"""Atomic file writes: a report is complete on disk or absent, never half-written.

And outputs never destroy inputs: before a command writes anything,
:func:`check_outputs` refuses (exit 2) an output that is one of the command's
input files (``analyze m.py --json m.py``), two outputs of one command that are
the same file (``--json x.html`` next to the HTML report ``x.html``), and a target
that exists but is not a regular file (a device, a folder, a socket: a rename
over ``/dev/full`` would replace the device node). :func:`write_atomic` checks
the target again just before its rename, and removes its temporary file on
every way out.

Used by the CLI edge only; the library returns strings and objects.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

from neuronprobe.errors import InputError


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISFIFO(mode):
        return "a pipe"
    return "not a regular file"


def not_regular(path: str | os.PathLike[str]) -> str | None:
    """What the existing ``path`` is when it is not a regular file (a symbolic link is judged by its target)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError:
        try:  # a dangling or looping link: the rename would replace the link itself
            mode = os.lstat(path).st_mode
        except OSError:
            return None
        return None if stat.S_ISLNK(mode) else _kind(mode)
    return None if stat.S_ISREG(mode) else _kind(mode)


def check_input_file(path: str | os.PathLike[str], what: str, pipes: bool = False) -> None:
    """Refuse (InputError, exit 2) an input that exists but is not a regular file, before anything reads it.

    ``/dev/zero`` as a report would be read until memory runs out, a FIFO without a
    writer blocks for ever, a folder is not a file. ``pipes``: a pipe is fine (a
    lengths file from ``<(cut -f2 log.tsv)``); it is read as its writer writes.
    A missing path is left to the reader's own sentence.
    """
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return
    if stat.S_ISREG(mode) or (pipes and stat.S_ISFIFO(mode)):
        return
    raise InputError(f"{path}: is {_kind(mode)}, not a {what} file")


def _identity(path: Path) -> tuple[str, object]:
    """A key that is equal for two spellings of one file: (device, inode) when it exists, else the real path."""
    try:
        st = os.stat(path)
        return ("inode", (st.st_dev, st.st_ino))
    except OSError:
        return ("path", os.path.realpath(path))


def _input_keys(inputs: Iterable[str | os.PathLike[str] | None]) -> dict[tuple[str, object], str]:
    """Identity -> spelling of every input; a folder stands for itself (its files are listed by the caller)."""
    keys: dict[tuple[str, object], str] = {}
    for p in inputs:
        if p is None or str(p) == "":
            continue
        keys.setdefault(_identity(Path(p)), str(p))
    return keys


def _check_parents(what: str, path: Path) -> None:
    """The nearest existing folder above ``path`` is a folder: nothing can be made under a file."""
    for parent in path.absolute().parents:
        try:
            mode = os.stat(parent).st_mode
        except OSError:
            continue
        if not stat.S_ISDIR(mode):
            raise InputError(f"{what} {path}: {parent} is not a folder")
        return


def check_outputs(
    outputs: Iterable[tuple[str, str | os.PathLike[str]]],
    inputs: Iterable[str | os.PathLike[str] | None] = (),
    folders: Iterable[tuple[str, str | os.PathLike[str]]] = (),
) -> None:
    """The one guard every command calls before any work: outputs never destroy an input, each other, or a non-file.

    ``outputs`` are (what, path) pairs (``("--json", "x.json")``) so the sentence can
    name the option. ``inputs`` is everything the command reads: the model file,
    traffic and lengths files, rule files, baselines, configs, and every file of an
    audited tree (a folder given here protects only itself: list its files).
    ``folders`` are (what, path) pairs of folders the command creates or fills
    (``setup --path``): one that exists must be a folder and must not be an input.
    Raises :class:`InputError` (exit 2) naming the option and both paths.
    """
    seen: dict[tuple[str, object], str] = {}
    input_ids = _input_keys(inputs)
    for what, raw in folders:
        if str(raw) == "":
            raise InputError(f"{what}: the path is empty; give a folder")
        path = Path(raw)
        try:
            mode: int | None = os.stat(path).st_mode
        except OSError:
            mode = None
        key = _identity(path)
        if key in input_ids and not (mode is not None and stat.S_ISDIR(mode)):  # writing into an audited folder is fine
            raise InputError(f"{what} {path} is an input of this command ({input_ids[key]}); choose another folder")
        if mode is not None and not stat.S_ISDIR(mode):
            raise InputError(f"{what} {path} exists and is {'a file' if stat.S_ISREG(mode) else _kind(mode)}; give a folder")
        _check_parents(what, path)
    for what, raw in outputs:
        if str(raw) == "":
            raise InputError(f"{what}: the path is empty; give a file path")
        path = Path(raw)
        key = _identity(path)
        if key in input_ids:
            raise InputError(f"{what} {path} is an input of this command ({input_ids[key]}); write the output elsewhere")
        if key in seen:
            raise InputError(f"{what} {path} is also the {seen[key]} output; give each output its own file")
        kind = not_regular(path)
        if kind is not None:
            raise InputError(f"{what} {path} exists and is {kind}; give a file path")
        _check_parents(what, path)
        seen[key] = what


def write_atomic(path: str | os.PathLike[str], data: str | bytes) -> Path:
    """Write to a temporary file in the target folder, fsync, then rename over ``path``.

    Never renames over something that is not a regular file (raises IsADirectoryError
    or OSError instead), and removes the temporary file whatever happens.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    mode = "wb" if isinstance(data, bytes) else "w"
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        with os.fdopen(fd, mode, encoding=None if isinstance(data, bytes) else "utf-8") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        # mkstemp creates 0600; a report is for sharing, so honour the umask like open() would.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        kind = not_regular(target)
        if kind is not None:
            raise OSError(f"{target} is {kind}, not overwritten")
        os.replace(tmp, target)
        tmp = None
    finally:
        if tmp is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
    return target


__all__ = ["check_input_file", "check_outputs", "not_regular", "write_atomic"]
