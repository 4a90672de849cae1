"""Bounded reading for the audit: regular files only, never more than a cap, and
lines split the way the Python tokenizer splits them.

An audited tree is input the user did not write: it may hold a FIFO (``open``
blocks forever), a symlink to ``/dev/zero`` (``read`` never ends) or a 4 GiB log
named ``requirements.txt``. Every file the audit reads goes through
:func:`read_regular`: it opens without blocking, checks on the open descriptor
that the file is a regular file, and reads at most ``cap + 1`` bytes.

Line numbers come from the syntax tree (Python) or from :func:`split_lines`
(every other scanner); both count ``\\n``, ``\\r\\n`` and ``\\r`` as line ends and
nothing else. ``str.splitlines`` would also break at a form feed, U+2028 and six
other characters, so a suppression after a form feed, a snippet after a U+2028
(and the baseline key made from it) would name the wrong line.
"""

from __future__ import annotations

import os
import re
import stat

# Files above this size are generated data, not code a person wrote: listed, not audited.
MAX_FILE_BYTES = 4 * 1024 * 1024
# The Python tokenizer's line ends (``ast`` positions count these and only these).
_LINE_END = re.compile(r"\r\n|\r|\n")


class NotRegularFile(OSError):
    """The path is a FIFO, a device, a socket or a folder: never read."""


class TooLarge(OSError):
    """The file is larger than the cap."""


def kind_of(mode: int) -> str:
    """A file type in words, for the listing of what was skipped."""
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "not a regular file"


def read_regular(path: str | os.PathLike[str], cap: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of a regular file of at most ``cap`` bytes.

    Raises NotRegularFile (FIFO, device, socket, folder: checked on the open
    descriptor, so a file swapped for a FIFO after the walk is still refused),
    TooLarge, or the OSError of the open/read. Opening with O_NONBLOCK makes the
    open of a FIFO return at once instead of waiting for a writer.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(0, f"{kind_of(st.st_mode)}: not read")
        if st.st_size > cap:
            raise TooLarge(0, f"larger than {_size(cap)}: not audited")
        chunks = []
        left = cap + 1  # one byte more than allowed tells a file that grew past the cap
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > cap:
            raise TooLarge(0, f"larger than {_size(cap)}: not audited")
        return data
    finally:
        os.close(fd)


def _size(n: int) -> str:
    return f"{n // (1024 * 1024)} MiB" if n >= 1024 * 1024 else f"{n} bytes"


def split_lines(text: str) -> list[str]:
    """The lines of ``text`` as the Python tokenizer numbers them (no line ends kept)."""
    lines = _LINE_END.split(text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines
