"""The audit reads Jupyter notebooks: each code cell is Python, findings name the cell and its line.

The fixture notebook (tests/data/audit_notebook/train.ipynb) mixes code cells with
IPython syntax (``%pip``, ``!nvidia-smi``, ``files = !ls``), a ``%%bash`` cell, a
markdown cell, a suppression and a cell that does not parse.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from neuronprobe.audit.engine import audit_paths
from neuronprobe.audit.sarif import to_sarif

NOTEBOOK = Path(__file__).resolve().parent / "data" / "audit_notebook" / "train.ipynb"


def _expected() -> list[tuple[str, int, int, int]]:
    """(rule, cell, line in the cell, line of the .ipynb) for every `# EXPECT rule` in the notebook's code."""
    nb = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    raw = NOTEBOOK.read_text(encoding="utf-8").splitlines()
    out = []
    for index, cell in enumerate(nb["cells"], 1):
        for number, text in enumerate("".join(cell["source"]).splitlines(), 1):
            if "# EXPECT " in text:
                raw_line = next(i for i, r in enumerate(raw, 1) if json.dumps(text)[1:-1] in r)
                out.append((text.split("# EXPECT ")[1].strip(), index, number, raw_line))
    return out


def test_findings_in_a_notebook_name_the_cell_and_line() -> None:
    section = audit_paths([NOTEBOOK], jobs=1)
    got = [(f.rule, f.cell, f.line, f.raw_line) for f in section.findings]
    assert got == _expected()
    assert [f.place for f in section.findings] == [f"{NOTEBOOK.as_posix()} cell 3, line 2", f"{NOTEBOOK.as_posix()} cell 6, line 1"]
    assert section.findings[0].snippet == "model = model.cuda()  # EXPECT dot-cuda"
    assert section.suppressed == 1  # the ignore[dot-cuda] in cell 6
    # the cell that does not parse is listed, the others are still audited; the %%bash cell is not Python
    assert [(p.kind, p.detail.split(":")[0]) for p in section.problems] == [("syntax", "cell 7 does not parse")]


def test_sarif_points_into_the_stored_notebook_and_says_the_cell() -> None:
    section = audit_paths([NOTEBOOK], jobs=1)
    results = to_sarif(section, "0")["runs"][0]["results"]
    regions = [r["locations"][0]["physicalLocation"]["region"]["startLine"] for r in results]
    assert regions == [raw for _, _, _, raw in _expected()]
    assert results[0]["message"]["text"].startswith("Cell 3, line 2: ")


def test_the_cli_prints_cells() -> None:
    out = subprocess.run([sys.executable, "-m", "neuronprobe", "audit", str(NOTEBOOK)], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert "cell 3, line 2:" in out.stdout and "cell 6, line 1:" in out.stdout
