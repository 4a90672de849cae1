"""The report in a real browser: headless Chromium loads it offline, cleanly, and it works.

Chromium comes from the Debian package `chromium` (CI installs it). Without it
these tests FAIL with the install command; they never skip. A screenshot and the
rendered page are kept under test-artifacts/report-browser/ for a human look.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from chromium_cdp import Browser
from report_fixtures import clean_report, rich_report

from neuronprobe.report.html import render_html

pytestmark = pytest.mark.browser

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts" / "report-browser"


def _write(name: str, html: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / name
    path.write_text(html, encoding="utf-8")
    return path


def test_report_with_findings_loads_offline_without_errors(browser: Browser) -> None:
    page = browser.load(_write("report.html", render_html(rich_report())))
    assert page.foreign_requests() == [], "the report fetched something"
    assert page.errors == [], f"console errors: {page.errors}"
    assert browser.evaluate("document.querySelector('.np-report').dataset.npReady") == "1", "our script did not run (is the CSP hash right?)"
    text = browser.evaluate("document.body.innerText").lower()  # innerText applies text-transform
    for key in (
        "Will not compile on trn1 as it is",
        "Supported op calls",
        "aten::linalg_eigh",
        "/home/dev/project/models/tiny_encoder.py:57",
        "evals, evecs = torch.linalg.eigh(cov)",
        "Fix: compute the whitening matrix once on the host",
        "Legend: verdicts",
    ):
        assert key.lower() in text, key
    sizes = browser.evaluate("Array.from(document.querySelectorAll('svg.np-plot')).map(s => s.getBoundingClientRect().height)")
    assert len(sizes) == 3 and all(h > 100 for h in sizes), "plots are drawn at a readable size"
    shot = browser.screenshot(ARTIFACTS / "report.png")
    assert shot.stat().st_size > 20_000


def test_op_table_sorts_and_filters(browser: Browser) -> None:
    browser.load(_write("report.html", render_html(rich_report())))
    first_op = "document.querySelector('table.np-ops tbody tr:not([hidden]) td').textContent"
    visible = "document.querySelectorAll('table.np-ops tbody tr:not([hidden])').length"
    assert browser.evaluate(first_op) == "aten::linalg_eigh"  # server order: worst first
    browser.evaluate("document.querySelectorAll('table.np-ops th button')[2].click()")  # calls, descending
    assert browser.evaluate(first_op) == "aten::addmm"
    browser.evaluate("document.querySelectorAll('table.np-ops th button')[2].click()")  # ascending
    assert browser.evaluate("document.querySelectorAll('table.np-ops th')[2].getAttribute('aria-sort')") == "ascending"
    assert browser.evaluate("Array.from(document.querySelectorAll('table.np-ops tbody tr')).map(r => Number(r.cells[2].dataset.sort))") == [
        1,
        1,
        1,
        2,
        8,
        12,
        24,
    ]
    browser.evaluate("(() => { const i = document.querySelector('.np-filter-text'); i.value = 'nonzero'; i.dispatchEvent(new Event('input')); })()")
    assert browser.evaluate(visible) == 1
    assert browser.evaluate("document.querySelector('.np-filter-shown').textContent") == "1 of 7 ops"
    browser.evaluate(
        "(() => { const i = document.querySelector('.np-filter-text'); i.value = '';"
        " i.dispatchEvent(new Event('input')); const s = document.querySelector('.np-filter-verdict');"
        " s.value = 'lowered'; s.dispatchEvent(new Event('change')); })()"
    )
    assert browser.evaluate(visible) == 2


def test_copy_buttons_are_shown_and_copy_the_snippet(browser: Browser) -> None:
    browser.load(_write("report.html", render_html(rich_report())))
    assert browser.evaluate("Array.from(document.querySelectorAll('.np-copy')).filter(b => !b.hidden).length") == 2
    browser.evaluate("document.querySelector('.np-copy').click()")
    browser.settle(0.2)
    label = browser.evaluate("document.querySelector('.np-copy').textContent")
    assert label in ("Copied", "Select and copy by hand")  # headless may deny the clipboard; never an error


def test_injected_markup_in_paths_and_messages_does_not_run(browser: Browser) -> None:
    evil = '<script>window.__pwned=1</script>"\'<img src=x onerror="window.__pwned=2">'
    report = rich_report()
    for f in report.findings:
        f.file = f"/tmp/{evil}/model.py"
        f.source_line = f.message = evil
    report.model = evil
    page = browser.load(_write("escaping.html", render_html(report)))
    assert browser.evaluate("typeof window.__pwned") == "undefined"
    assert browser.evaluate("document.querySelectorAll('script').length") == 1
    assert browser.evaluate("document.querySelectorAll('img').length") == 0
    assert evil in browser.evaluate("document.body.innerText")
    assert page.foreign_requests() == [] and page.errors == []


def test_notebook_fragment_styles_nothing_outside_itself(browser: Browser) -> None:
    host_css = "p.host { color: rgb(1, 2, 3); font-family: serif; margin: 7px; } table { border: 3px solid red; }"
    probe = (
        "(() => { const p = getComputedStyle(document.querySelector('p.host'));"
        " const t = getComputedStyle(document.querySelector('table.host'));"
        " const b = getComputedStyle(document.body);"
        " return [p.color, p.fontFamily, p.margin, t.borderTopWidth, b.backgroundColor, b.fontSize]; })()"
    )
    bare = f"<!DOCTYPE html><html><head><style>{host_css}</style></head><body><p class=host>cell</p><table class=host><tr><td>1</td></tr></table>"
    browser.load(_write("host.html", bare + "</body></html>"))
    expected = browser.evaluate(probe)
    two_reports = rich_report()._repr_html_() + clean_report()._repr_html_()
    page = browser.load(_write("notebook.html", bare + two_reports + "</body></html>"))
    assert browser.evaluate(probe) == expected
    assert page.errors == [] and page.foreign_requests() == []
    assert browser.evaluate("document.querySelectorAll('.np-report[data-np-ready]').length") == 2
    browser.screenshot(ARTIFACTS / "notebook.png", full_page=False)


def test_notebook_table_styles_do_not_restyle_the_report(browser: Browser) -> None:
    # What Jupyter's output CSS does to tables (.rendered_html / .jp-RenderedHTMLCommon).
    jupyter_css = (
        ".out table { border: 3px solid red; margin-left: auto; margin-right: auto; table-layout: fixed; }"
        ".out tr, .out th, .out td { text-align: right; border: 2px solid red; }"
        ".out tbody tr:nth-child(odd) { background: rgb(255, 255, 0); }"
    )
    html = f"<!DOCTYPE html><html><head><style>{jupyter_css}</style></head><body><div class=out>" + rich_report()._repr_html_() + "</div></body></html>"
    browser.load(_write("jupyter-like.html", html))
    look = browser.evaluate(
        "(() => { const t = document.querySelector('table.np-ops'); const td = t.querySelector('tbody td');"
        " const tr = t.querySelector('tbody tr'); const s = getComputedStyle(t), c = getComputedStyle(td);"
        " return [s.borderTopWidth, s.tableLayout, c.textAlign, c.borderTopWidth,"
        " getComputedStyle(tr).backgroundColor]; })()"
    )
    assert look == ["0px", "auto", "left", "0px", "rgba(0, 0, 0, 0)"]
