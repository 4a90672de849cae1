"""Notebooks run in a real IPython kernel (nbclient + ipykernel), as a user runs them.

The notebooks under tests/notebooks/ (and the example under examples/) are executed
cell by cell in a fresh kernel of this environment. What is checked is what a user
sees: a finding about a model defined in a cell names that cell (``In [n], line k``)
and that cell's own line, in the report object, in the inline HTML and in the
nbconvert HTML page (read in headless Chromium with scripts off); the magics; a
training step; and a notebook run twice in one kernel leaves the kernel as it was.

ipykernel, nbclient, nbformat and nbconvert are in requirements/dev.txt; without them
these tests fail on import, they never skip.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import nbformat
import pytest
from chromium_cdp import Browser
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "tests" / "notebooks"
EXAMPLE = ROOT / "examples" / "neuron_readiness.ipynb"
ARTIFACTS = ROOT / "test-artifacts" / "notebooks"
CELL_TIMEOUT_S = 300

# A cell that prints what the good-guest rules promise to leave as it was (run before, between and after).
PROBE = """
import hashlib as _np_hashlib, json as _np_json, logging as _np_logging, os as _np_os, sys as _np_sys, threading as _np_threading
import torch as _np_torch
print("PROBE " + _np_json.dumps({
    "env_keys": sorted(_np_os.environ),
    "env_values": _np_hashlib.sha256(repr(sorted(_np_os.environ.items())).encode()).hexdigest(),
    "sys_path": list(_np_sys.path),
    "dtype": str(_np_torch.get_default_dtype()),
    "grad": _np_torch.is_grad_enabled(),
    "deterministic": _np_torch.are_deterministic_algorithms_enabled(),
    "threads": _np_torch.get_num_threads(),
    "python_threads": sorted(t.name for t in _np_threading.enumerate() if not t.daemon),
    "loggers": {n: _np_logging.getLogger(n).level for n in ("", "torch", "torch._dynamo", "torch._inductor", "transformers")},
    "recursion": _np_sys.getrecursionlimit(),
}, sort_keys=True))
"""


def _client(nb: Any) -> NotebookClient:
    return NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}})


def run_notebook(path: Path, runs: int = 1, probe: bool = False) -> list[Any]:
    """Execute the notebook ``runs`` times in one kernel; the cells of each run, with their outputs."""
    nb = nbformat.read(path, as_version=4)
    if probe:
        nb.cells.insert(1, nbformat.v4.new_code_cell(PROBE))
        nb.cells.append(nbformat.v4.new_code_cell(PROBE))
    client = _client(nb)
    client.reset_execution_trackers()
    results = []
    with client.setup_kernel():
        for _ in range(runs):
            for index, cell in enumerate(nb.cells):
                client.execute_cell(cell, index)  # the kernel numbers the cells, as in a frontend
            results.append(json.loads(json.dumps(nb.cells)))  # a copy: the next run replaces the outputs
    return results


def stdout(cell: dict[str, Any]) -> str:
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream" and o.get("name") == "stdout")


def stderr(cell: dict[str, Any]) -> str:
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream" and o.get("name") == "stderr")


def data(cell: dict[str, Any], mime: str) -> str:
    for o in cell.get("outputs", []):
        if o.get("output_type") in ("execute_result", "display_data") and mime in o.get("data", {}):
            value = o["data"][mime]
            return "".join(value) if isinstance(value, list) else value
    return ""


def json_lines(cell: dict[str, Any]) -> list[Any]:
    return [json.loads(line) for line in stdout(cell).splitlines() if line.startswith(("[", "{"))]


def expect_line(cell: dict[str, Any], marker: str) -> tuple[int, str]:
    """The 1-based line of the cell that carries ``# EXPECT <marker>``, and its text."""
    for number, text in enumerate(cell["source"].splitlines(), 1):
        if f"# EXPECT {marker}" in text:
            return number, text.strip()
    raise AssertionError(f"no '# EXPECT {marker}' in the cell")


def no_errors(cells: list[Any]) -> None:
    errors = [o for c in cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, [f"{e['ename']}: {e['evalue']}" for e in errors]


@pytest.fixture(scope="module")
def model_in_a_cell() -> list[Any]:
    return run_notebook(NOTEBOOKS / "model_in_a_cell.ipynb", runs=2, probe=True)


def test_a_finding_in_a_cell_names_the_cell_and_its_line(model_in_a_cell: list[Any]) -> None:
    cells = model_in_a_cell[0]
    no_errors(cells)
    model_cell, report_cell, dump_cell = cells[3], cells[4], cells[5]
    line, text = expect_line(model_cell, "dynamic_shape aten::nonzero")
    n = model_cell["execution_count"]
    (findings,) = json_lines(dump_cell)
    nonzero = [f for f in findings if f["op"] == "aten::nonzero"]
    assert nonzero, findings
    assert nonzero[0]["verdict"] == "dynamic_shape"
    assert nonzero[0]["where"] == f"In [{n}], line {line}"
    assert (nonzero[0]["cell"], nonzero[0]["line"], nonzero[0]["source_line"]) == (n, line, text)
    # the inline HTML and the Markdown fallback say the same; the kernel's temporary file is not shown as the place
    html, markdown = data(report_cell, "text/html"), data(report_cell, "text/markdown")
    # Markdown escapes its own punctuation in every cell (issue 34.5): the brackets read [ ] once rendered
    assert f"In [{n}], line {line}" in html and f"In \\[{n}\\], line {line}" in markdown
    assert not re.search(r">[^<]*ipykernel_\d+[^<]*<", html), "a kernel temp file is printed as a place"
    assert "aten::nonzero" in data(report_cell, "text/plain")


def test_a_training_step_in_a_cell_is_placed_in_the_cell(model_in_a_cell: list[Any]) -> None:
    cell = model_in_a_cell[0][6]
    line, text = expect_line(cell, "cpu_fallback train")
    (findings,) = json_lines(cell)
    pooled = [f for f in findings if f["verdict"] == "cpu_fallback" and f["phase"] == "forward"]
    assert pooled, findings
    assert pooled[0]["where"] == f"In [{cell['execution_count']}], line {line}" and pooled[0]["source_line"] == text


def test_running_the_notebook_twice_in_one_kernel_leaves_no_state_behind(model_in_a_cell: list[Any]) -> None:
    first, second = model_in_a_cell
    no_errors(second)
    probes = [stdout(c) for run in (first, second) for c in (run[1], run[-1])]
    states = [json.loads(p.split("PROBE ", 1)[1]) for p in probes]
    assert states[0] == states[1] == states[2] == states[3]
    # the second run's findings name the second run's cells
    n2 = second[3]["execution_count"]
    assert n2 > first[3]["execution_count"]
    (findings,) = json_lines(second[5])
    assert any(f["where"].startswith(f"In [{n2}], line ") for f in findings)


def test_the_magics(tmp_path: Path) -> None:
    (cells,) = run_notebook(NOTEBOOKS / "magic.ipynb")
    no_errors(cells[:-1])
    magic_cell, check_cell = cells[2], cells[3]
    line, text = expect_line(magic_cell, "dynamic_shape aten::_unique2")
    n = magic_cell["execution_count"]
    assert f"In [{n}], line {line}" in data(magic_cell, "text/html")
    leaked, findings = json_lines(check_cell)
    assert leaked == {"leaked": []}, "the cell magic left the cell's names in the user's namespace"
    unique = [f for f in findings if f["op"] == "aten::_unique2"]
    assert unique and unique[0]["where"] == f"In [{n}], line {line}" and unique[0]["source_line"] == text
    # %%neuronprobe --train with `model` and `inputs` left by the cell
    assert json_lines(cells[5]) == [{"train": True, "model_leaked": False}]
    # the line magic: the command line in a child process, its report back as an object
    (cli_findings,) = json_lines(cells[6])
    assert [f["where"].endswith("models/unique.py:7") for f in cli_findings if f["op"] == "aten::_unique2"] == [True]
    # a bad argument: one line, no traceback, nothing displayed
    bad = cells[7]
    assert not [o for o in bad["outputs"] if o["output_type"] == "error"]
    assert "does_not_exist.py" in stderr(bad) and "Traceback" not in stderr(bad)
    assert not data(bad, "text/html")


@pytest.mark.browser
def test_the_nbconvert_page_shows_the_findings_with_scripts_off(model_in_a_cell: list[Any], browser: Browser) -> None:
    from nbconvert import HTMLExporter

    nb = nbformat.read(NOTEBOOKS / "model_in_a_cell.ipynb", as_version=4)
    nb.cells = [nbformat.from_dict(c) for c in model_in_a_cell[0]]
    body, _ = HTMLExporter().from_notebook_node(nb)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page = ARTIFACTS / "model_in_a_cell.html"
    page.write_text(body, encoding="utf-8")
    browser.page("Emulation.setScriptExecutionDisabled", {"value": True})
    try:
        browser.load(page)
        text = browser.evaluate("document.body.innerText")
    finally:
        browser.page("Emulation.setScriptExecutionDisabled", {"value": False})
    line, _ = expect_line(model_in_a_cell[0][3], "dynamic_shape aten::nonzero")
    n = model_in_a_cell[0][3]["execution_count"]
    assert "aten::nonzero" in text and f"In [{n}], line {line}" in text
    assert "dynamic_shape" in text
    browser.screenshot(ARTIFACTS / "model_in_a_cell.png")


def test_the_example_notebook_walks_from_the_problem_to_the_fix() -> None:
    (cells,) = run_notebook(EXAMPLE)
    no_errors(cells)
    verdicts = [json.loads(line.split("VERDICT ", 1)[1]) for c in cells for line in stdout(c).splitlines() if line.startswith("VERDICT ")]
    assert [v["verdict"] for v in verdicts] == ["will_not_compile", "runs"], verdicts
    assert verdicts[0]["findings"] and not verdicts[1]["findings"]
