"""End to end: a real model file, analysed, rendered, and re-rendered from its JSON.

The model sits in a folder whose name is markup with quotes, the way a hostile
(or just unlucky) checkout path would look; no part of it may become markup.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from html_inspect import parse
from typer.testing import CliRunner

from neuronprobe.cli import app

MODELS = Path(__file__).resolve().parent / "models"
HOSTILE_FOLDER = 'x<script>alert("np")\'y'


@pytest.fixture()
def hostile_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / HOSTILE_FOLDER
    folder.mkdir()
    model = folder / "model.py"
    shutil.copy(MODELS / "nonzero.py", model)
    monkeypatch.chdir(tmp_path)
    return model


def test_analyze_writes_html_beside_json_and_report_re_renders_it(hostile_model: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["analyze", str(hostile_model), "-o", str(tmp_path / "reports")])
    assert result.exit_code == 0, result.output
    json_path, html_path = tmp_path / "reports" / "model.json", tmp_path / "reports" / "model.html"
    assert json_path.exists() and html_path.exists()
    html = html_path.read_text(encoding="utf-8")

    # the folder name is shown as text, never parsed as markup
    page = parse(html)
    assert page.tags["script"] == 1
    assert "<script>alert" not in html
    assert "x&lt;script&gt;alert(&#34;np&#34;)&#39;y" in html
    assert HOSTILE_FOLDER in page.visible_text
    assert "aten::nonzero" in page.visible_text and "Will not compile on trn1" in page.visible_text
    # the finding still points at the user's line inside the hostile folder
    assert f"{HOSTILE_FOLDER}/model.py:7" in page.visible_text

    # the JSON alone gives the same page
    again = tmp_path / "again.html"
    result = runner.invoke(app, ["report", str(json_path), "-o", str(again)])
    assert result.exit_code == 0, result.output
    assert again.read_text(encoding="utf-8") == html
