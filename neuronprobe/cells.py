"""Notebook cells: recognise the file name a cell's code runs under, and say which cell it is.

Code defined in a notebook runs under a file name that is not the user's: ipykernel
compiles each cell as ``<tmp>/ipykernel_<pid>/<hash>.py``, plain IPython as
``<ipython-input-<n>-<hash>>``, VS Code's notebooks (through ipykernel) as the same
temporary files, and VS Code's interactive window as ``vscode-notebook-cell:...#W<i>...``
URIs. A report that prints those names tells the user nothing, so a location in a
cell is given as ``In [n], line k``: ``n`` is the execution count the kernel showed
next to the cell.

How the execution count is found, checked on IPython 9.18 / ipykernel 7.4:
``IPython.core.compilerop.CachingCompiler.cache`` records every cell it compiles in
``shell.compile._filename_map`` (file name -> execution count), the same map IPython's
own tracebacks use to print ``Cell In[n], line k``; ``<ipython-input-n-...>`` carries
it in the name. The cell's text is in ``linecache`` under the same name (IPython puts
it there), so the source line comes from the cell, never from a file on disk.

Bottom layer: standard library only. IPython is looked up in ``sys.modules``, never
imported: outside a kernel nothing here costs anything.
"""

from __future__ import annotations

import linecache
import re
import sys
from dataclasses import dataclass
from typing import Any

# ipykernel's temporary cell files (ipykernel/compiler.py get_file_name): <tmp>/ipykernel_<pid>/<murmur hash>.py
_IPYKERNEL_CELL = re.compile(r"[\\/]ipykernel_\d+[\\/]\d+\.py$")
# plain IPython before 8 and the terminal shell's cells: <ipython-input-<execution count>-<hash>>
_IPYTHON_INPUT = re.compile(r"^<ipython-input-(?P<count>\d+)-[0-9a-fA-F]+>$")
# VS Code's cell URIs: vscode-notebook-cell:<notebook path>#W<cell index>s<base64 of the scheme>
_VSCODE_CELL = re.compile(r"^vscode-notebook-cell:(?P<notebook>[^#]*)#W(?P<index>\d+)")
# A notebook file itself (the audit reads its code cells).
NOTEBOOK_SUFFIX = ".ipynb"


@dataclass(frozen=True)
class Cell:
    """Which cell a file name is: its execution count, or its position when the count is unknown."""

    number: int | None  # In [n]: the execution count; None when the kernel does not know it
    position: int | None = None  # 1-based position of the cell in its notebook, when that is what is known
    notebook: str | None = None  # the notebook's own path, when the cell's name carries it (VS Code)


def is_cell_file(path: str | None) -> bool:
    """Whether ``path`` is the name a notebook cell's code runs under (not a file of the user's)."""
    if not path:
        return False
    return bool(_IPYKERNEL_CELL.search(path) or _IPYTHON_INPUT.match(path) or _VSCODE_CELL.match(path))


def _shell() -> Any:
    """The running IPython shell, if this process is a kernel; never imports IPython."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return None
    get = getattr(ipython, "get_ipython", None)
    try:
        return get() if callable(get) else None
    except Exception:  # a half-initialised IPython: no shell to ask
        return None


def execution_count(path: str) -> int | None:
    """The execution count IPython compiled ``path`` under (``In [n]``), or None when it is not known."""
    m = _IPYTHON_INPUT.match(path)
    if m:
        return int(m.group("count"))
    shell = _shell()
    names = getattr(getattr(shell, "compile", None), "_filename_map", None)  # IPython >= 8: name -> count
    if isinstance(names, dict):
        count = names.get(path)
        if isinstance(count, int) and not isinstance(count, bool) and count > 0:
            return count
    return None


def cell_of(path: str | None) -> Cell | None:
    """The cell ``path`` names, or None when it is an ordinary file."""
    if not path or not is_cell_file(path):
        return None
    m = _VSCODE_CELL.match(path)
    if m:
        return Cell(number=execution_count(path), position=int(m.group("index")) + 1, notebook=m.group("notebook") or None)
    return Cell(number=execution_count(path))


def cell_source_line(path: str, line: int | None) -> str | None:
    """The text of line ``line`` of the cell ``path``, from the kernel's own copy of the cell."""
    if not line:
        return None
    text = linecache.getline(path, line).strip()
    return text or None


def cell_label(number: int | None, position: int | None = None) -> str:
    """``In [5]`` for a known execution count, ``cell 3`` for a position, ``a notebook cell`` otherwise."""
    if number is not None:
        return f"In [{number}]"
    if position is not None:
        return f"cell {position}"
    return "a notebook cell"
