"""Notebooks: a Report shows itself inline and gives its sections as pandas DataFrames."""

from __future__ import annotations

import re

import pandas as pd
from html_inspect import parse
from report_fixtures import clean_report, rich_report

from neuronprobe.report.frames import BUCKETS_COLUMNS, FINDINGS_COLUMNS, OPS_COLUMNS, RECOMPILES_COLUMNS
from neuronprobe.report.html import CSS_FILE, _asset, render_html
from neuronprobe.vocabulary import Verdict


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
