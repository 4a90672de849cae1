"""Notebooks: a Report shows itself inline (HTML, folded when long; Markdown; plain text), gives its
sections as pandas DataFrames, and names notebook cells as the notebook shows them (In [n], line k)."""

from __future__ import annotations

import dataclasses
import json
import linecache
import re
import sys

import pandas as pd
import pytest
from html_inspect import parse
from report_fixtures import clean_report, rich_report

from neuronprobe.cells import Cell, cell_of, is_cell_file
from neuronprobe.notebook import MagicUsageError, model_from_namespace, parse_cell_options
from neuronprobe.report.frames import BUCKETS_COLUMNS, FINDINGS_COLUMNS, OPS_COLUMNS, RECOMPILES_COLUMNS
from neuronprobe.report.html import CSS_FILE, FOLD_FINDINGS, _asset, render_html
from neuronprobe.report.markdown import TEXT_FINDINGS
from neuronprobe.report.model import Report, place_cells
from neuronprobe.vocabulary import SourceLocation, Verdict


def _report_text(html: str) -> str:
    """The visible text of the report itself (page title excluded)."""
    start = html.index('<div class="np-report')
    return parse(html[start:]).visible_text


def test_repr_html_is_a_fragment_with_the_same_content_as_the_page() -> None:
    report = rich_report()
    fragment = report._repr_html_()
    assert fragment == render_html(report, embedded=True)
    assert fragment.startswith('<div class="np-report np-embedded">')
    page = parse(fragment)
    assert page.tags["html"] == page.tags["head"] == page.tags["body"] == 0
    assert "<!DOCTYPE" not in fragment and "Content-Security-Policy" not in fragment
    assert _report_text(fragment) == _report_text(render_html(report))


def test_fragment_anchors_are_distinct_per_report_so_two_can_share_a_notebook() -> None:
    a = parse(rich_report()._repr_html_()).ids
    b = parse(clean_report()._repr_html_()).ids
    assert a and b and not set(a) & set(b)
    links = [x.get("href") for x in parse(rich_report()._repr_html_()).with_tag("a")]
    assert all((href or "").lstrip("#") in a for href in links if (href or "").startswith("#"))


def _selectors(css: str) -> list[str]:
    """Every selector of every rule, including rules nested in @media blocks."""
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    selectors = []
    for prelude in re.findall(r"([^{}]+)\{", css):
        prelude = prelude.strip()
        if prelude.startswith("@"):
            continue
        selectors += [s.strip() for s in prelude.split(",")]
    return selectors


def test_notebook_css_only_styles_the_report() -> None:
    selectors = _selectors(_asset(CSS_FILE))
    assert len(selectors) > 50
    offenders = [s for s in selectors if not s.startswith(".np-report")]
    assert not offenders, f"these rules would leak into the notebook: {offenders}"


def test_ops_df() -> None:
    df = rich_report().ops_df()
    assert list(df.columns) == OPS_COLUMNS
    assert len(df) == 7
    assert df.set_index("op").loc["aten::addmm", "count"] == 24
    assert isinstance(df["verdict"].dtype, pd.CategoricalDtype) and df["verdict"].cat.ordered
    assert list(df["verdict"].cat.categories) == list(Verdict.values())
    worst = df.sort_values("verdict", ascending=False).iloc[0]
    assert worst["op"] == "aten::linalg_eigh"
    assert df.explode("modules")["modules"].tolist().count("encoder.layers.1.ff") == 1


def test_findings_df() -> None:
    df = rich_report().findings_df()
    assert list(df.columns) == FINDINGS_COLUMNS
    assert df["line"].dtype == "Int64"
    row = df.set_index("op").loc["aten::nonzero"]
    assert (row["verdict"], row["line"], row["count"], row["ncc_code"]) == ("dynamic_shape", 42, 2, "NCC_EXTP004")
    assert row["source_line"] == "idx = torch.nonzero(mask)"
    assert df.groupby("verdict", observed=True).size()["cpu_fallback"] == 1


def test_recompiles_df() -> None:
    df = rich_report().recompiles_df()
    assert list(df.columns) == RECOMPILES_COLUMNS
    assert df.set_index("policy")["graphs"].to_dict() == {"static": 37, "bucketed": 4}


def test_buckets_df_puts_the_curve_and_the_baselines_side_by_side() -> None:
    df = rich_report().buckets_df()
    assert list(df.columns) == BUCKETS_COLUMNS
    assert df["kind"].value_counts().to_dict() == {"curve": 6, "baseline": 2}
    chosen = df[df["chosen"]]
    assert len(chosen) == 1 and chosen.iloc[0]["edges"] == [96, 192, 320, 512]
    assert chosen.iloc[0]["overhead_tokens_pct"] == 11.5
    best_baseline = df[df["kind"] == "baseline"].sort_values("overhead_tokens_pct").iloc[0]
    assert best_baseline["name"] == "powers of two"


def test_sections_not_analysed_give_empty_frames_with_the_same_columns() -> None:
    report = clean_report()
    assert list(report.recompiles_df().columns) == RECOMPILES_COLUMNS and report.recompiles_df().empty
    assert list(report.buckets_df().columns) == BUCKETS_COLUMNS and report.buckets_df().empty
    assert list(report.findings_df().columns) == FINDINGS_COLUMNS and report.findings_df().empty
    assert len(report.ops_df()) == 2


# --- notebook cells (issue 28) ---------------------------------------------------------


class _FakeCompiler:
    def __init__(self, names: dict[str, int]) -> None:
        self._filename_map = names


class _FakeShell:
    def __init__(self, names: dict[str, int]) -> None:
        self.compile = _FakeCompiler(names)


def _fake_ipython(monkeypatch: pytest.MonkeyPatch, names: dict[str, int]) -> None:
    import types

    module = types.ModuleType("IPython")
    shell = _FakeShell(names)
    module.get_ipython = lambda: shell  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "IPython", module)


@pytest.mark.parametrize(
    ("path", "is_cell"),
    [
        ("/tmp/ipykernel_4242/2415736.py", True),
        ("C:\\Users\\me\\AppData\\Local\\Temp\\ipykernel_17\\99.py", True),
        ("<ipython-input-12-5f3a9c0b1d2e>", True),
        ("vscode-notebook-cell:/home/me/nb.ipynb#W3sZmlsZQ%3D%3D", True),
        ("/home/me/model.py", False),
        ("/tmp/ipykernel_4242/helpers.py", False),  # not a cell name: a file the user wrote there
        ("<string>", False),
        (None, False),
    ],
)
def test_cell_file_names_are_recognised(path: str | None, is_cell: bool) -> None:
    assert is_cell_file(path) is is_cell


def test_a_cell_is_named_by_its_execution_count(monkeypatch: pytest.MonkeyPatch) -> None:
    kernel_file = "/tmp/ipykernel_4242/2415736.py"
    _fake_ipython(monkeypatch, {kernel_file: 7})
    assert cell_of(kernel_file) == Cell(number=7)
    assert cell_of("<ipython-input-12-5f3a9c0b1d2e>") == Cell(number=12)
    assert cell_of("vscode-notebook-cell:/home/me/nb.ipynb#W3sZmlsZQ%3D%3D") == Cell(number=None, position=4, notebook="/home/me/nb.ipynb")
    assert cell_of("/home/me/model.py") is None


def test_outside_a_kernel_a_cell_file_has_no_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "IPython", raising=False)
    assert cell_of("/tmp/ipykernel_4242/2415736.py") == Cell(number=None)
    assert str(SourceLocation("/tmp/ipykernel_4242/2415736.py", 5)) == "a notebook cell, line 5"


def test_locations_in_cells_read_as_the_notebook_shows_them() -> None:
    assert str(SourceLocation("/tmp/ipykernel_4242/2415736.py", 5, cell=3)) == "In [3], line 5"
    assert str(SourceLocation("train.ipynb", 2, cell=4)) == "train.ipynb cell 4, line 2"
    assert str(SourceLocation("model.py", 9)) == "model.py:9"


def test_place_cells_fills_the_cell_and_its_source_line(monkeypatch: pytest.MonkeyPatch) -> None:
    kernel_file = "/tmp/ipykernel_4242/2415736.py"
    _fake_ipython(monkeypatch, {kernel_file: 7})
    monkeypatch.setitem(linecache.cache, kernel_file, (40, None, ["import torch\n", "keep = torch.nonzero(x)\n"], kernel_file))
    report = rich_report()
    finding = report.findings[0]
    finding.file, finding.line, finding.source_line, finding.cell = kernel_file, 2, None, None
    others = [(f.file, f.line, f.cell) for f in report.findings[1:]]
    place_cells(report)
    assert (finding.cell, finding.source_line, str(finding.location)) == (7, "keep = torch.nonzero(x)", "In [7], line 2")
    assert [(f.file, f.line, f.cell) for f in report.findings[1:]] == others  # ordinary files are left alone
    again = Report.from_json(report.to_json())
    assert again.findings[0].cell == 7 and str(again.findings[0].location) == "In [7], line 2"
    assert report.findings_df().set_index("op").loc[finding.op, "cell"] == 7


def test_a_schema_3_report_loads_with_no_cells() -> None:
    data = json.loads(rich_report().to_json())
    data["schema_version"] = 3
    for f in data["findings"]:
        del f["cell"]
    report = Report.from_json(json.dumps(data))
    assert all(f.cell is None for f in report.findings)


def _long_report() -> Report:
    report = rich_report()
    template = report.findings[0]
    report.findings = [dataclasses.replace(template, line=100 + i) for i in range(FOLD_FINDINGS + 7)]
    return report


def test_a_long_report_is_folded_behind_a_static_table_of_its_worst_findings() -> None:
    report = _long_report()
    html = report._repr_html_()
    page = parse(html)
    assert page.tags["details"] >= 1 and 'class="np-fold"' in html and '<details class="np-fold" open' not in html
    glance = html[html.index('<div class="np-glance">') : html.index('<details class="np-fold">')]
    assert glance.count("<tr>") == 1 + TEXT_FINDINGS  # the header and the worst findings
    assert f"and {len(report.findings) - TEXT_FINDINGS} more finding(s)" in glance
    # what a sanitising viewer (GitHub) keeps: without <style> and <script> the table still reads
    stripped = re.sub(r"<(style|script)>.*?</\1>", "", html, flags=re.S)
    assert "<table" in stripped and report.findings[0].op in stripped and str(report.findings[0].location) in stripped


def test_a_short_report_is_shown_open() -> None:
    html = clean_report()._repr_html_()
    assert 'class="np-fold"' not in html and 'class="np-glance"' not in html


def test_markdown_and_plain_text_fallbacks_say_what_the_html_says() -> None:
    report = _long_report()
    markdown = report._repr_markdown_()
    assert markdown.startswith(f"**neuronprobe: {report.model} on {report.target}**: {report.verdict.words}")
    rows = [line for line in markdown.splitlines() if line.startswith("| ") and not line.startswith("| verdict")]
    assert len(rows) == TEXT_FINDINGS
    assert f"| {report.findings[0].verdict} | `{report.findings[0].op}` | {report.findings[0].location} |" in markdown
    assert f"and {len(report.findings) - TEXT_FINDINGS} more finding(s)" in markdown

    class Printer:
        def __init__(self) -> None:
            self.out = ""

        def text(self, s: str) -> None:
            self.out += s

    p = Printer()
    report._repr_pretty_(p, False)
    assert p.out.splitlines()[0] == f"neuronprobe: {report.model} on {report.target}: {report.verdict.words}"
    assert str(report.findings[0].location) in p.out


def test_magic_cell_options_and_namespace() -> None:
    assert parse_cell_options("--target trn2 --train")["target"] == "trn2"
    assert parse_cell_options("")["train"] is False
    with pytest.raises(MagicUsageError, match="does not take --json"):
        parse_cell_options("--json x.json")
    with pytest.raises(MagicUsageError, match="get_model\\(\\) but not get_example_inputs"):
        model_from_namespace({"get_model": lambda: None})
    with pytest.raises(MagicUsageError, match="must define get_model"):
        model_from_namespace({"x": 1})
    assert model_from_namespace({"model": "m", "inputs": (1,)}) == ("m", (1,))


def test_import_neuronprobe_offers_the_extension_without_importing_torch() -> None:
    import subprocess

    code = "import sys, neuronprobe; assert callable(neuronprobe.load_ipython_extension); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_report_read_back_shows_itself_as_the_one_it_was_read_from(tmp_path) -> None:
    """The notebook display lives on ``Report`` above the renderers, the data below them in ``report/schema``:
    a report read from JSON (``load_report``, ``Report.from_json``) is that ``Report``, display included."""
    from neuronprobe.report.model import load_report
    from neuronprobe.report.schema.report import ReportData

    report = rich_report()
    path = tmp_path / "r.json"
    path.write_text(report.to_json())
    for loaded in (load_report(str(path)), Report.from_json(report.to_json())):
        assert type(loaded) is Report and isinstance(loaded, ReportData) and loaded == report
        assert loaded._repr_html_() == report._repr_html_()
        assert loaded._repr_markdown_() == report._repr_markdown_()
        pd.testing.assert_frame_equal(loaded.findings_df(), report.findings_df())
    assert not hasattr(ReportData, "_repr_html_"), "the schema must not reach up to the renderers"
