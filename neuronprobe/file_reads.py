"""The files an analysis reads, recorded in its worker (for the nightly's result cache).

A model reads more than its imports: a vocabulary, a config, a checkpoint, a data
file. A cached report is only right while those files are unchanged, and a user
names them nowhere. So the analysis worker records every file that Python code
opens for reading (the ``open`` audit event of :pep:`578`, raised by ``open()``,
``io.open()``, ``os.open()`` and by the import system's ``io.open_code``), and
hashes each by content when the analysis ends. The cache stores those hashes and
checks them again before it reuses the report.

What it cannot see, said plainly: a file read by native code that opens it
itself (a Rust or C++ reader such as ``safetensors``, ``torch.from_file``, a
library's own ``fopen``) raises no audit event. Those files are named by the
model's ``cache_inputs`` in the nightly config. The snapshot lists the known
native readers (:data:`NATIVE_READERS`) the analysis loaded, so that the cache
stays off for a model file that may have read files it could not see, until the
config names them. Files of the Python
installation (the standard library, site-packages, neuronprobe itself) are not
recorded: their versions are in the cache key already. Kernel files (``/proc``,
``/sys``, ``/dev``) and the worker's own temporary folder are not inputs.

A recorded path that is not a regular file (a pipe, a device) cannot be vouched
for by content, so it is listed in :attr:`FileReads.unverifiable`; the cache
stays off for that model and says which file.

Stdlib only: it runs in the worker before anything else is imported.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import site
import stat
import sys
import sysconfig
from dataclasses import dataclass, field

# Reading a file to hash it: 1 MiB at a time, so a checkpoint of many GB needs no memory.
_CHUNK = 1 << 20
_KERNEL_DIRS = ("/proc/", "/sys/", "/dev/")
# Modules that open files by path in native code (no audit event): safetensors and tokenizers (Rust),
# sentencepiece, pyarrow, h5py, PyTables, lmdb, soundfile, OpenCV, decord, PyAV (C/C++).
# None of them is loaded by torch or by neuronprobe's own analysis of a plain model file.
NATIVE_READERS = ("safetensors", "tokenizers", "sentencepiece", "pyarrow", "h5py", "tables", "lmdb", "soundfile", "cv2", "decord", "av")


@dataclass
class FileReads:
    """Files read during an analysis: path -> sha256 of its content, or None when it did not exist."""

    files: dict[str, str | None] = field(default_factory=dict)
    unverifiable: list[str] = field(default_factory=list)  # read, but not a regular file: no content to hash
    native_readers: list[str] = field(default_factory=list)  # NATIVE_READERS loaded: files they opened were not seen

    def to_json(self) -> dict[str, object]:
        return {"files": dict(sorted(self.files.items())), "unverifiable": sorted(self.unverifiable), "native_readers": self.native_readers}


def file_sha256(path: str) -> str | None:
    """The sha256 of a regular file's content; None when it does not exist. OSError for anything else unreadable.

    Opened without blocking and judged on the open descriptor (a FIFO put in the file's
    place after a check would otherwise block the open for ever).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    with open(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        digest = hashlib.sha256()
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _installation_dirs() -> tuple[str, ...]:
    """Folders of the Python installation and of neuronprobe: versioned by the cache key, not inputs."""
    dirs = {sys.prefix, sys.base_prefix, sys.exec_prefix}
    dirs |= {p for p in sysconfig.get_paths().values() if p}
    dirs.add(os.path.dirname(os.path.abspath(__file__)))
    with contextlib.suppress(AttributeError):  # a virtualenv's old site module
        dirs |= set(site.getsitepackages())
    dirs.add(site.getusersitepackages() if hasattr(site, "getusersitepackages") else "")
    # A venv that borrows another environment's packages through a .pth file: its folders are on sys.path.
    dirs |= {p for p in sys.path if os.path.basename(p.rstrip(os.sep)) in ("site-packages", "dist-packages")}
    return tuple(sorted(os.path.join(os.path.realpath(d), "") for d in dirs if d))


def _is_read(mode: object, flags: object) -> bool:
    """Whether an open can read the file's earlier content: ``r``, ``r+``, ``a+`` (``np.memmap(mode="r+")``), ``O_RDWR``.

    Not a read: ``w``/``w+`` and ``O_TRUNC`` (the content is discarded), ``x`` and ``O_EXCL`` (a new file), ``a`` and ``O_WRONLY``.
    """
    if isinstance(mode, str):
        return "r" in mode or ("a" in mode and "+" in mode)
    if not isinstance(flags, int) or flags & (os.O_TRUNC | os.O_EXCL):
        return False
    return flags & os.O_ACCMODE in (os.O_RDONLY, os.O_RDWR)


class ReadRecorder:
    """Records the paths opened for reading, from the moment :meth:`start` installs the audit hook.

    An audit hook cannot be removed: start it only in a process that ends with the
    analysis (the forked worker).
    """

    def __init__(self, private_tmp: str | None = None) -> None:
        """``private_tmp``: the worker's own temporary folder (removed after it), whose files are not inputs."""
        self.paths: set[str] = set()
        own = (os.path.join(os.path.realpath(private_tmp), ""),) if private_tmp else ()
        self._skip = (*_installation_dirs(), *own, *_KERNEL_DIRS)
        self.active = False
        self._loaded: set[str] = set()

    def start(self) -> ReadRecorder:
        self._loaded = set(sys.modules)  # a native reader imported after this is the analysis's
        sys.addaudithook(self._hook)
        self.active = True
        return self

    def _hook(self, event: str, args: tuple[object, ...]) -> None:
        if event != "open" or not self.active:
            return
        path, mode, flags = (*args, None, None, None)[:3]
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str) or not _is_read(mode, flags):
            return  # a file descriptor (already opened, and seen then) or a write
        self.paths.add(os.path.abspath(path))

    def snapshot(self) -> FileReads:
        """Stop recording; hash every recorded file outside the installation by content."""
        self.active = False
        out = FileReads()
        for path in sorted(self.paths):
            real = os.path.realpath(path)
            if real.startswith(self._skip) or path.startswith(self._skip) or real.endswith(".pyc"):
                continue
            if os.path.isdir(real):
                continue  # a folder opened to list it: its files are recorded as they are opened
            try:
                out.files[path] = file_sha256(path)
            except OSError:
                out.unverifiable.append(path)
        out.native_readers = [name for name in NATIVE_READERS if name in sys.modules and name not in self._loaded]
        return out


__all__ = ["NATIVE_READERS", "FileReads", "ReadRecorder", "file_sha256"]
