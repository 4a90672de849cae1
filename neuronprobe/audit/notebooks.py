"""Jupyter notebooks in the audit: the code cells are scanned as the Python program they make.

A notebook (``.ipynb``, nbformat 4) is JSON whose code cells hold Python, interleaved
with IPython syntax that is not Python (``%pip install``, ``!nvidia-smi``,
``%%time``). The code cells are scanned together, in order, as the kernel runs them
(``import torch`` in one cell, ``torch.cuda...`` in the next), and each finding names
its cell and its line in the cell, ``train.ipynb cell 3, line 2``: ``cell`` counts every cell of
the notebook from 1 (markdown included), as VS Code and JupyterLab number them
when asked to show cell numbers.

For SARIF, a finding also carries ``raw_line``: the line of the ``.ipynb`` file on
disk that holds the code line. GitHub's code scanning shows an alert against the
file as stored (a notebook is one JSON text there), so the region points into it.
Notebooks written by Jupyter (nbformat's writer, ``indent=1``) keep one source line
per JSON line; for a notebook stored another way (one long line), ``raw_line`` is
the cell's ``"source"`` line, the closest place that exists.

Lines of IPython syntax become blank lines before parsing, so line numbers stay
those of the cell; a cell that starts with a cell magic (``%%bash``) is not Python
and is skipped.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass

from neuronprobe.audit.python_scan import scan_python
from neuronprobe.audit.reading import split_lines
from neuronprobe.audit.suppress import suppressions

NOTEBOOK_SUFFIX = ".ipynb"
# Lines that IPython runs but Python cannot parse: magics, shell escapes, help requests.
_IPYTHON_LINE = re.compile(r"^\s*(%|!|\?|[A-Za-z_][\w.]*\?\s*$)")
# `files = !ls` and `t = %timeit -o f()`: an assignment from IPython syntax.
_IPYTHON_ASSIGN = re.compile(r"^\s*[\w.,\s]+=\s*[!%]")
# Where a cell's source list starts in the stored JSON.
_SOURCE_KEY = re.compile(r'^\s*"source":\s*(\[|")')


@dataclass(frozen=True)
class NotebookHit:
    """One finding in one code cell."""

    rule: str
    cell: int  # 1-based position of the cell in the notebook
    line: int  # 1-based line in the cell
    column: int
    snippet: str
    raw_line: int  # 1-based line of the .ipynb file that holds the code line


@dataclass
class NotebookScan:
    hits: list[NotebookHit]
    problems: list[tuple[int | None, str, str]]  # cell-line, kind, detail (as FileResult.problems)
    suppressed: int = 0
    unknown_suppressions: list[tuple[int, str]] | None = None


def _python_of(lines: list[str]) -> str:
    """The cell with IPython-only lines blanked, so positions stay the cell's."""
    return "".join("\n" if _IPYTHON_LINE.match(x) or _IPYTHON_ASSIGN.match(x) else (x if x.endswith("\n") else x + "\n") for x in lines)


def _source_lines(cell: dict[str, object]) -> list[str]:
    source = cell.get("source", "")
    if isinstance(source, list):
        text = "".join(s for s in source if isinstance(s, str))
    elif isinstance(source, str):
        text = source
    else:
        text = ""
    return [line + "\n" for line in split_lines(text)]  # numbered as the syntax tree numbers them (not str.splitlines)


def _source_starts(raw: str) -> list[int]:
    """1-based line of the ``"source":`` key of each cell, in order."""
    return [i for i, line in enumerate(raw.splitlines(), 1) if _SOURCE_KEY.match(line)]


def scan_notebook(data: bytes, known_rules: set[str]) -> NotebookScan:
    """Scan the code cells of a notebook as one program, in order (names imported in one cell are
    used in the next, as the kernel runs them); a notebook that is not valid JSON is one problem."""
    text = data.decode("utf-8", errors="replace")
    try:
        nb = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        return NotebookScan([], [(None, "syntax", f"not a notebook (not valid JSON: {exc}); not audited")])
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list):
        return NotebookScan([], [(None, "syntax", "not a notebook (no cells list); not audited")])
    starts = _source_starts(text)
    one_line_per_source = len(starts) == len(cells)
    scan = NotebookScan([], [], 0, [])
    program: list[str] = []
    places: list[tuple[int, int]] = []  # program line (0-based) -> (cell, line in the cell)
    cell_lines: dict[int, list[str]] = {}
    for index, cell in enumerate(cells, 1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        lines = _source_lines(cell)
        if lines and lines[0].lstrip().startswith("%%"):
            continue  # a cell magic: the body is another language or IPython's
        python = _python_of(lines)
        try:
            compile(python, f"cell {index}", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
        except SyntaxError as exc:
            scan.problems.append((exc.lineno, "syntax", f"cell {index} does not parse: {exc.msg}; that cell not audited"))
            continue
        except (ValueError, RecursionError, MemoryError) as exc:
            scan.problems.append((None, "syntax", f"cell {index} cannot be parsed ({type(exc).__name__}); that cell not audited"))
            continue
        cell_lines[index] = lines
        program.append(python)
        places.extend((index, n) for n in range(1, python.count("\n") + 1))
        silenced = suppressions([x.rstrip("\n") for x in lines])
        for line, ids in silenced.items():
            for rule_id in sorted(ids - known_rules):
                assert scan.unknown_suppressions is not None
                scan.unknown_suppressions.append((line, f"cell {index}: suppression names an unknown rule {rule_id!r}"))
    try:
        hits = scan_python("".join(program), "notebook")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:  # each cell parsed alone; together they still may not
        scan.problems.append((None, "syntax", f"the code cells together cannot be parsed ({type(exc).__name__}); not audited"))
        return scan
    silenced_by_cell = {i: suppressions([x.rstrip("\n") for x in lines]) for i, lines in cell_lines.items()}
    for rule, program_line, col in hits:
        if not 0 < program_line <= len(places):
            continue
        index, line = places[program_line - 1]
        if rule in silenced_by_cell[index].get(line, ()):
            scan.suppressed += 1
            continue
        lines = cell_lines[index]
        snippet = lines[line - 1].strip() if 0 < line <= len(lines) else ""
        start = starts[index - 1] if one_line_per_source else None
        # nbformat writes "source": [ on one line and each source line on the next ones
        raw_line = start + line if start is not None and isinstance(cells[index - 1].get("source"), list) else (start or 1)
        scan.hits.append(NotebookHit(rule, index, line, col, snippet, raw_line))
    return scan
