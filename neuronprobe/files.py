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
import select
import stat
import tempfile
import time
from collections.abc import Iterable, Iterator
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


def _short(path: object, most: int = 80) -> str:
    text = str(path)
    return text if len(text) <= most else f"{text[: most // 2]}...{text[-most // 2 :]} ({len(text)} characters)"


def unusable_path(exc: BaseException) -> str | None:
    """The sentence for an OSError that says the path itself cannot be used (too long, a loop of links), else None.

    Any command may meet such a path wherever it touches the file system (``Path.exists``
    raises on a name longer than the file system allows): it is the user's input, exit 2.
    """
    import errno

    if isinstance(exc, OSError) and exc.errno in (errno.EACCES, errno.EPERM) and exc.filename is not None:
        return f"{_short(exc.filename)}: permission denied ({exc.strerror or 'not readable'}); give neuronprobe access or another path"
    if isinstance(exc, OSError) and exc.errno in (errno.ENAMETOOLONG, errno.ELOOP):
        where = _short(exc.filename) if exc.filename is not None else "a path"
        if exc.errno == errno.ENAMETOOLONG:
            return f"{where}: the path is too long for the file system; give a shorter path"
        return f"{where}: the path is a loop of symbolic links"
    return None


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


def strict_json_text(text: str) -> str:
    """``text`` when it is strict JSON; JSON text with ``NaN``/``Infinity`` re-encoded with them as strings.

    The last guard before a ``.json`` file reaches the disk: whatever encoder made the text,
    the file never holds a constant that ``jq`` or ``JSON.parse`` rejects. Text that is not
    JSON at all (an HTML page named ``.json``) is left alone: not this guard's business.
    """
    import json

    from neuronprobe.jsonio import dumps, loads_strict

    try:
        loads_strict(text)
        return text
    except RecursionError:
        return text
    except ValueError:
        pass
    try:
        value = json.loads(text, parse_constant=lambda name: name)
    except (ValueError, RecursionError):
        return text
    return dumps(value, indent=2, ensure_ascii=False) + "\n"


def write_atomic(path: str | os.PathLike[str], data: str | bytes) -> Path:
    """Write to a temporary file in the target folder, fsync, then rename over ``path``.

    Never renames over something that is not a regular file (raises IsADirectoryError
    or OSError instead), and removes the temporary file whatever happens.
    """
    target = Path(path)
    if target.suffix.lower() == ".json" and isinstance(data, str):
        data = strict_json_text(data)
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


# --- bounded reading: every file a command reads that is not the audit's ------------------------

# The largest input file a command reads whole (a serving trace of 10^7 requests is ~300 MB of CSV).
MAX_INPUT_BYTES = 1 << 30
# How long a pipe the user gave on purpose (``<(cut -f2 log.tsv)``) may stay silent: its writer
# starts with the command, so a minute without a byte is a FIFO nobody writes to.
PIPE_WAIT_S = 60.0
_PIPE_WAIT_ENV = "NEURONPROBE_PIPE_WAIT_S"  # tests and slow producers: the wait in seconds
_CHUNK = 1 << 20


def pipe_wait_seconds() -> float:
    """:data:`PIPE_WAIT_S`, or the finite positive seconds in ``$NEURONPROBE_PIPE_WAIT_S``."""
    raw = os.environ.get(_PIPE_WAIT_ENV, "")
    try:
        value = float(raw)
    except ValueError:
        return PIPE_WAIT_S
    return value if 0 < value <= PIPE_WAIT_S * 60 else PIPE_WAIT_S


def _size_words(n: int) -> str:
    if n >= 1 << 30:
        return f"{n / (1 << 30):g} GiB"
    if n >= 1 << 20:
        return f"{n / (1 << 20):g} MiB"
    return f"{n} bytes"


def read_input(path: str | os.PathLike[str], what: str, *, cap: int = MAX_INPUT_BYTES, pipes: bool = False, wait_s: float | None = None) -> bytes:
    """The bytes of an input file, read with bounds; an :class:`InputError` (exit 2) naming the bound otherwise.

    Like the audit's reader: opened without blocking (a FIFO without a writer does not
    hang the open), judged on the open descriptor (a symlink to ``/dev/zero`` is a
    device: refused), at most ``cap`` bytes (one more byte read tells a file that
    grew). ``pipes``: a pipe is read too, and each wait for its writer is bounded by
    ``wait_s`` (default :func:`pipe_wait_seconds`); the error says it waited.
    Reusable by every reader of user files (traces, step times, scrapes, manifests).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a folder, not a {what} file") from None
    except OSError as exc:
        raise InputError(unusable_path(exc) or f"{path}: cannot open the {what} file ({exc.strerror or type(exc).__name__})") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISFIFO(mode) and pipes:
            return _read_pipe(fd, path, what, cap, pipe_wait_seconds() if wait_s is None else wait_s)
        if not stat.S_ISREG(mode):
            raise InputError(f"{path}: is {_kind(mode)}, not a {what} file")
        if os.fstat(fd).st_size > cap:
            raise InputError(f"{path}: the {what} file is larger than {_size_words(cap)} (neuronprobe's cap on one input file)")
        os.set_blocking(fd, True)
        chunks: list[bytes] = []
        left = cap + 1
        while left > 0:
            try:
                chunk = os.read(fd, min(left, _CHUNK))
            except OSError as exc:
                raise InputError(f"{path}: cannot read the {what} file ({exc.strerror or type(exc).__name__})") from None
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > cap:
            raise InputError(f"{path}: the {what} file is larger than {_size_words(cap)} (neuronprobe's cap on one input file)")
        return data
    finally:
        os.close(fd)


def _read_pipe(fd: int, path: str | os.PathLike[str], what: str, cap: int, wait_s: float) -> bytes:
    """A pipe to its end: every wait for the writer at most ``wait_s`` seconds, at most ``cap`` bytes."""
    chunks: list[bytes] = []
    total = 0
    writer_seen = False
    while True:
        ready, _, _ = select.select([fd], [], [], wait_s)
        if not ready:
            state = "stopped writing" if writer_seen else "never wrote"
            raise InputError(
                f"{path}: the {what} pipe's writer {state} for {wait_s:g} s; neuronprobe waits at most that long for a pipe (NEURONPROBE_PIPE_WAIT_S)"
            )
        try:
            chunk = os.read(fd, _CHUNK)
        except BlockingIOError:
            continue
        if not chunk:
            if writer_seen or chunks:
                break
            # Linux: a FIFO opened before any writer reads as at its end; wait for the writer to come.
            time.sleep(0.05)
            wait_s -= 0.05
            if wait_s <= 0:
                raise InputError(f"{path}: nobody wrote to the {what} pipe; neuronprobe waits at most {pipe_wait_seconds():g} s for a pipe")
            continue
        writer_seen = True
        chunks.append(chunk)
        total += len(chunk)
        if total > cap:
            raise InputError(f"{path}: the {what} pipe sent more than {_size_words(cap)} (neuronprobe's cap on one input file)")
    return b"".join(chunks)


def read_input_text(path: str | os.PathLike[str], what: str, *, cap: int = MAX_INPUT_BYTES, pipes: bool = False) -> str:
    """:func:`read_input` decoded as UTF-8 (a byte-order mark is dropped); one sentence for bytes that are not text."""
    data = read_input(path, what, cap=cap, pipes=pipes)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: the {what} file is not UTF-8 text (byte {exc.start})") from None


# --- exclusive writes: a folder one run fills, never two ---------------------------------------

# How long a run waits for another run that is writing into the same folder (writing takes seconds).
LOCK_WAIT_S = 120.0


@contextlib.contextmanager
def folder_lock(folder: str | os.PathLike[str], what: str, wait_s: float = LOCK_WAIT_S) -> Iterator[Path]:
    """Hold ``folder`` (created if missing) for one writer: an advisory ``flock`` on the folder itself.

    No lock file is left behind; the kernel drops the lock when the process dies, so a
    killed run never blocks the next one. A second writer waits up to ``wait_s``.
    """
    import fcntl

    base = Path(folder)
    try:
        base.mkdir(parents=True, exist_ok=True)
        fd = os.open(base, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InputError(f"{what} {folder}: cannot use the folder ({exc.strerror or type(exc).__name__})") from None
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise InputError(
                        f"{what} {folder}: another neuronprobe run has been writing there for {wait_s:g} s; wait for it or choose another folder"
                    ) from None
                time.sleep(0.1)
        yield base
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def write_new(path: str | os.PathLike[str], data: bytes) -> Path:
    """Create ``path`` with ``data``, complete or absent, and never over an existing file (FileExistsError).

    The bytes go to a temporary file that is then hard-linked to its name: ``link``
    creates or fails, so two writers can never both win (a rename would replace).
    """
    target = Path(path)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.link(tmp, target)
    finally:
        if tmp is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
    return target


def write_folder_exclusive(folder: str | os.PathLike[str], files: list[tuple[str, bytes]], what: str, taken: str) -> list[Path]:
    """Write ``files`` (name, bytes; the last one marks the folder complete) into ``folder`` for this run only.

    Under :func:`folder_lock`; refused (InputError, exit 2) when the folder already holds
    any of the files (``taken`` says why in the user's words): a second run into the same
    folder at the same moment finds the first one's files and writes nothing.
    """
    written: list[Path] = []
    with folder_lock(folder, what) as base:
        present = [name for name, _ in files if os.path.lexists(base / name)]
        if present:
            raise InputError(f"{what} {folder}: {taken} ({present[-1]} exists); nothing was written")
        try:
            for name, data in files:
                written.append(write_new(base / name, data))
        except FileExistsError:
            raise InputError(f"{what} {folder}: {taken}; nothing more was written") from None
        except OSError as exc:
            for path in reversed(written):  # complete or absent: take back what this run wrote
                with contextlib.suppress(OSError):
                    path.unlink()
            raise InputError(f"{what} {folder}: cannot write ({exc.strerror or type(exc).__name__})") from None
    return written


__all__ = [
    "MAX_INPUT_BYTES",
    "PIPE_WAIT_S",
    "check_input_file",
    "check_outputs",
    "folder_lock",
    "not_regular",
    "pipe_wait_seconds",
    "read_input",
    "read_input_text",
    "strict_json_text",
    "unusable_path",
    "write_atomic",
    "write_folder_exclusive",
    "write_new",
]
