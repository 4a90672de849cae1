"""Where in the user's own file something happened, from a traceback or a stack dump.

A model file is arbitrary code. When it ends the analysis (``sys.exit``, an
endless loop, unbounded memory), the one line neuronprobe prints names the model
file and, where known, the line that was running. The frames come either from a
live exception or from text: the traceback a worker sent back, or the
``faulthandler`` dump taken just before the worker was killed.

Bottom layer: imports nothing from neuronprobe but the errors.
"""

from __future__ import annotations

import contextlib
import os
import re
import traceback
from collections.abc import Iterator

from neuronprobe.errors import ModelLoadError

# `  File "/x/m.py", line 7, in forward` (traceback) and `  File "/x/m.py", line 7 in forward` (faulthandler).
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)', re.MULTILINE)
# faulthandler starts the block of the thread that handled the signal (the main thread) with this.
_CURRENT_THREAD = "Current thread"


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.realpath(a) == os.path.realpath(b)
    except (OSError, ValueError):
        return False


def line_in_traceback(text: str, model_file: str | os.PathLike[str] | None) -> int | None:
    """The deepest line of ``model_file`` in a formatted traceback (most recent call last)."""
    if model_file is None or not text:
        return None
    line = None
    for m in _FRAME.finditer(text):
        if _same_file(m.group("file"), os.fspath(model_file)):
            line = int(m.group("line"))
    return line


def line_in_stack_dump(text: str, model_file: str | os.PathLike[str] | None) -> int | None:
    """The innermost line of ``model_file`` in a faulthandler dump (most recent call first).

    The main thread's block (faulthandler's "Current thread") is searched first: that
    is the analysis; other threads are the model's own, searched after it.
    """
    if model_file is None or not text:
        return None
    blocks = re.split(r"\n(?=\S)", text)
    blocks.sort(key=lambda b: not b.startswith(_CURRENT_THREAD))
    for block in blocks:
        for m in _FRAME.finditer(block):
            if _same_file(m.group("file"), os.fspath(model_file)):
                return int(m.group("line"))
    return None


def deepest_frame_file(text: str) -> str | None:
    """The file of the innermost frame of a formatted traceback."""
    files = [m.group("file") for m in _FRAME.finditer(text)]
    return files[-1] if files else None


def where(label: str, line: int | None) -> str:
    """``model.py:12`` when the line is known, else the label alone."""
    return f"{label}:{line}" if line else label


def exit_text(code: object) -> str:
    """How ``SystemExit(code)`` reads in a message: ``sys.exit(0)``, ``sys.exit('bye')``."""
    return f"sys.exit({code!r})" if code is not None else "sys.exit()"


@contextlib.contextmanager
def user_exit_guard(label: str, model_file: str | os.PathLike[str] | None) -> Iterator[None]:
    """Turn a ``SystemExit`` raised by user code into a ModelLoadError naming the file and line.

    A notebook or script calling ``neuronprobe.analyze()`` keeps running when the
    model file calls ``sys.exit()``; it gets an error it can catch instead.
    """
    try:
        yield
    except SystemExit as exc:
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        line = line_in_traceback(text, model_file)
        raise ModelLoadError(f"{where(label, line)}: the model code called {exit_text(exc.code)}; a model file must return, not exit") from None


__all__ = [
    "deepest_frame_file",
    "exit_text",
    "line_in_stack_dump",
    "line_in_traceback",
    "user_exit_guard",
    "where",
]
