"""Whose code a frame is, and where in the user's own file something happened.

The one place that decides whether a file belongs to the user, to the torch stack
(torch, torch-xla, the Neuron SDK), to a model library's shared helpers
(transformers' utilities, torchvision's op library) or to neuronprobe itself:
capture, training, recompiles, the Neuron backend, the xla-cpu worker and the HLO
checks all ask :func:`owner` (or :func:`is_library`, :func:`user_frame`). Standard
library only: the xla-cpu worker imports it inside torch-xla's interpreter, where
the torch found by :func:`importlib.util.find_spec` is torch 2.9, not this one.

A model file is arbitrary code. When it ends the analysis (``sys.exit``, an
endless loop, unbounded memory), the one line neuronprobe prints names the model
file and, where known, the line that was running. The frames come either from a
live exception or from text: the traceback a worker sent back, or the
``faulthandler`` dump taken just before the worker was killed.

Bottom layer: imports nothing from neuronprobe but the errors and the notebook cell names.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import importlib.util
import os
import re
import sysconfig
import traceback
from collections.abc import Iterator
from typing import Any

from neuronprobe.cells import is_cell_file
from neuronprobe.errors import ModelLoadError

# --- whose code a file is ------------------------------------------------------------------


class Owner(enum.Enum):
    """Whose code a source file is."""

    USER = "user"  # the model file, the user's packages, a notebook cell
    STACK = "stack"  # torch, torch-xla, the Neuron SDK (torch_neuronx, neuronxcc, libneuronxla)
    HELPER = "helper"  # a model library's shared code: transformers' utilities, torchvision's op library
    NEURONPROBE = "neuronprobe"
    PYTHON = "python"  # <string>, <frozen ...>, contextlib: the interpreter's plumbing


# The packages of the stack, located (never imported) in the running interpreter.
STACK_PACKAGES = ("torch", "torch_xla", "torch_neuronx", "neuronxcc", "libneuronxla")
# The same packages in paths printed by another interpreter (a Neuron host's traceback, the xla-cpu
# worker's torch 2.9), where find_spec cannot locate them.
_STACK_TEXT = re.compile(r"[\\/](torch_neuronx|torch_xla|neuronxcc|libneuronxla)[\\/]|[\\/](site|dist)-packages[\\/]torch[\\/]")
# transformers' shared helpers (masks, caches, rotary tables, activations): a line there is transformers'
# plumbing, the model's own modeling_<type>.py is the place. torchvision's op library (nms, roi_align) is
# library code like torch: a custom op belongs at the line that called into it.
_HELPERS = re.compile(
    r"[\\/]transformers[\\/](utils|integrations|generation)[\\/]|"
    r"[\\/]transformers[\\/](masking_utils|modeling_utils|pytorch_utils|activations|modeling_layers|"
    r"modeling_rope_utils|modeling_attn_mask_utils|cache_utils|modeling_flash_attention_utils)\.py$|"
    r"[\\/]torchvision[\\/]ops[\\/]"
)
_NEURONPROBE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_CONTEXTLIB = os.sep + "contextlib.py"
# Python's standard library (functools, threading, importlib), in this interpreter's layout or another's
# (``.../lib/python3.11/functools.py``); installed packages under it (site-packages) are not the stdlib.
_STDLIB_TEXT = re.compile(r"[\\/]lib[\\/]python3\.\d+[\\/]")
_INSTALLED = re.compile(r"[\\/](site|dist)-packages[\\/]")


@functools.lru_cache(maxsize=1)
def _stdlib_dirs() -> tuple[str, ...]:
    """This interpreter's standard-library folders (a venv's interpreter keeps them outside the venv)."""
    paths = sysconfig.get_paths()
    return tuple({os.path.abspath(paths[k]) + os.sep for k in ("stdlib", "platstdlib") if paths.get(k)})


@functools.lru_cache(maxsize=1)
def _stack_dirs() -> tuple[str, ...]:
    """The folders of the stack's packages in this interpreter (located, not imported)."""
    dirs: list[str] = []
    for name in STACK_PACKAGES:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.submodule_search_locations:
            dirs.extend(os.path.abspath(p) + os.sep for p in spec.submodule_search_locations)
    return tuple(dirs)


@functools.lru_cache(maxsize=8192)
def owner(path: str) -> Owner:
    """Whose code the file ``path`` is (a frame's ``co_filename``, a traceback's ``File "..."``)."""
    if is_cell_file(path):  # <ipython-input-...>, ipykernel's temporary cell files: the user's code
        return Owner.USER
    if path.startswith("<") or path.endswith(_CONTEXTLIB):
        return Owner.PYTHON
    full = os.path.abspath(path)
    if full.startswith(_NEURONPROBE_DIR):
        return Owner.NEURONPROBE
    if full.startswith(_stack_dirs()) or _STACK_TEXT.search(path):
        return Owner.STACK
    if _HELPERS.search(path):
        return Owner.HELPER
    if not _INSTALLED.search(full) and (full.startswith(_stdlib_dirs()) or _STDLIB_TEXT.search(path)):
        return Owner.PYTHON
    return Owner.USER


def is_library(path: str) -> bool:
    """Not the user's code: the innermost frame for which this is False is the user's line."""
    return owner(path) is not Owner.USER


def is_neuronprobe(path: str) -> bool:
    return owner(path) is Owner.NEURONPROBE


def is_installed(path: str) -> bool:
    """A file of an installed package, in any interpreter (the worker's torch is not this process's torch)."""
    return "site-packages" in path or "dist-packages" in path


def user_frame(start: Any) -> tuple[str | None, int | None]:
    """The innermost live frame of the user's code, walking out from the frame ``start``; failing
    that, the innermost model-library helper (a host read inside transformers' masking_utils is
    still worth a line); else ``(None, None)``."""
    frame = start
    helper: tuple[str | None, int | None] = (None, None)
    while frame is not None:
        name = frame.f_code.co_filename
        whose = owner(name)
        if whose is Owner.USER:
            return name, frame.f_lineno
        if whose is Owner.HELPER and helper[0] is None:
            helper = (name, frame.f_lineno)
        frame = frame.f_back
    return helper


# --- the chain of model code that led to an op -------------------------------------------------

# One frame of the chain: (file, line, function).
ChainFrame = tuple[str, int, str]


def model_frames(frames: list[Any]) -> list[Any]:
    """The frames of model code (the user's files and the model packages they import) among ``frames``
    (``traceback.FrameSummary``-like: ``filename``, ``lineno``, ``name``; outermost first), after the
    innermost neuronprobe frame: what ran from the user's entry point (``forward``, ``train_step``)
    down to the op. Torch, neuronprobe, Python's own modules and a model library's shared helpers
    are left out; the last frame kept is the line that runs the op."""
    start = 0
    for i, frame in enumerate(frames):
        if owner(frame.filename) is Owner.NEURONPROBE:
            start = i + 1
    return [f for f in frames[start:] if owner(f.filename) is Owner.USER]


# `  File "/x/m.py", line 7, in forward` with its function name.
_CHAIN_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<name>\S+)', re.MULTILINE)


def chain_in_stack_trace(text: str | None) -> list[ChainFrame]:
    """The model-code frames of a recorded stack trace (outermost first, most recent call last)."""
    if not text:
        return []
    start = 0
    found = [(m.group("file"), int(m.group("line")), m.group("name")) for m in _CHAIN_FRAME.finditer(text)]
    for i, (file, _, _) in enumerate(found):
        if owner(file) is Owner.NEURONPROBE:
            start = i + 1
    return [f for f in found[start:] if owner(f[0]) is Owner.USER]


# --- lines of the model file in tracebacks and stack dumps -----------------------------------

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
    "STACK_PACKAGES",
    "ChainFrame",
    "Owner",
    "chain_in_stack_trace",
    "deepest_frame_file",
    "exit_text",
    "is_installed",
    "is_library",
    "is_neuronprobe",
    "line_in_stack_dump",
    "line_in_traceback",
    "model_frames",
    "owner",
    "user_exit_guard",
    "user_frame",
    "where",
]
