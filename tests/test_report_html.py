"""The HTML report: one self-contained file that answers "will it run on Neuron, and what do I fix".

These tests render hand-built Reports (tests/report_fixtures.py) and read the
result with an HTML parser, so they assert on real elements and visible text.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import re

import pytest
from html_inspect import parse
from report_fixtures import MODEL_FILE, clean_report, fallback_only_report, rich_report

from neuronprobe.errors import ReportFormatError
from neuronprobe.formatting import format_bytes, format_duration
from neuronprobe.report.html import render_html
from neuronprobe.report.model import Holdout, HoldoutScore, Overhead, Report
from neuronprobe.vocabulary import Verdict


@pytest.fixture(scope="module")
def rich_html() -> str:
    return render_html(rich_report())


@pytest.fixture(scope="module")
def clean_html() -> str:
    return render_html(clean_report())


# -- self-contained -------------------------------------------------------------------


def test_page_is_one_self_contained_document(rich_html: str) -> None:
    page = parse(rich_html)
    assert rich_html.startswith("<!DOCTYPE html>")
    assert page.tags["html"] == page.tags["head"] == page.tags["body"] == 1
    assert page.tags["style"] == 1 and page.tags["script"] == 1
    # Nothing that could fetch: no external scripts, stylesheets, images, frames, fonts or imports.
    assert not [a for a in page.with_tag("script") if a.get("src")]
    assert not page.with_tag("img") and not page.with_tag("iframe") and not page.with_tag("object")
    assert [a.get("href") for a in page.with_tag("link")] == ["data:,"]  # only the empty favicon
    assert "@import" not in rich_html and "@font-face" not in rich_html
    assert not re.search(r"url\(\s*['\"]?(?!#)", rich_html), "CSS/SVG url() may only point inside the page"
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", rich_html)


def test_content_security_policy_forbids_fetches_and_pins_our_script(rich_html: str) -> None:
    page = parse(rich_html)
    (meta,) = [a for a in page.with_tag("meta") if a.get("http-equiv") == "Content-Security-Policy"]
    policy = meta["content"] or ""
    assert "default-src 'none'" in policy
    (script,) = page.scripts
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in policy
    assert "unsafe-inline" not in policy.split("script-src", 1)[1].split(";")[0]


def test_plots_are_inline_svg_without_global_styles_or_clashing_ids(rich_html: str) -> None:
    page = parse(rich_html)
    plots = [a for a in page.with_tag("svg") if a.get("class") == "np-plot"]
    assert len(plots) == 3  # compiles timeline, length histogram, overhead curve
    assert all(a.get("aria-label") for a in plots)
    assert "<?xml" not in rich_html and "<!DOCTYPE svg" not in rich_html
    assert page.tags["style"] == 1, "matplotlib's <style>*{...}</style> would restyle the whole page"
    assert len(page.ids) == len(set(page.ids)), "duplicate ids across the page"


def test_same_report_renders_to_the_same_bytes() -> None:
    assert render_html(rich_report()) == render_html(rich_report())


def test_the_json_alone_re_renders_the_same_page(rich_html: str) -> None:
    assert render_html(Report.from_json(rich_report().to_json())) == rich_html


# -- sections ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("report", "title", "level"),
    [
        (clean_report(), "Runs on inf2 as it is", "np-ok"),
        (fallback_only_report(), "Runs on inf2, with CPU fallbacks", "np-warn"),
        (rich_report(), "Will not compile on trn1 as it is", "np-bad"),
    ],
)
def test_verdict_banner_says_whether_it_runs(report: Report, title: str, level: str) -> None:
    page = parse(render_html(report))
    (banner,) = [a for a in page.with_tag("div") if "np-banner" in (a.get("class") or "")]
    assert level in (banner.get("class") or "")
    assert title in page.visible_text


def test_fallback_banner_names_the_cost() -> None:
    text = parse(render_html(fallback_only_report())).visible_text
    assert "1 op(s) run on the host" in text


def test_summary_cards(rich_html: str) -> None:
    text = parse(rich_html).visible_text
    assert "Supported op calls 89.8% 49 op calls, 7 distinct ops; 5 not supported" in text
    assert "Findings 4 1 compile_error, 1 control_flow, 1 dynamic_shape, 1 cpu_fallback" in text
    assert "Device graphs 2" in text
    assert "Fallback copies per call 8.0 KiB" in text
    assert "Predicted compiles 4–37 graphs for 200 calls; static: 37, bucketed: 4" in text
    # op calls per verdict, with shares
    assert "lowered 36 op calls (73.5%)" in text
    assert "compile_error 1 op call (2.0%)" in text


def test_findings_grouped_worst_first_with_place_source_fix_and_code(rich_html: str) -> None:
    text = parse(rich_html).visible_text
    order = [text.index(f"{v} 1 finding,") for v in ("compile_error", "control_flow", "dynamic_shape", "cpu_fallback")]
    assert order == sorted(order)
    assert f"{MODEL_FILE}:57 in module whitening" in text
    assert "57evals, evecs = torch.linalg.eigh(cov)" in text  # the source line itself, after its number
    assert "Fix: compute the whitening matrix once on the host" in text
    assert "predicted NCC code NCC_EVRF007" in text
    assert "origin observed" in text and "copies per call 8.0 KiB" in text
    assert Verdict.DYNAMIC_SHAPE.words in text  # each group explains its verdict


def test_op_inventory_is_complete_without_js(rich_html: str) -> None:
    page = parse(rich_html)
    rows = [a for a in page.with_tag("tr") if a.get("data-verdict")]
    verdicts = [a["data-verdict"] for a in rows]
    assert len(rows) == len(rich_report().ops)
    # worst first, then by call count
    assert verdicts == ["compile_error", "control_flow", "dynamic_shape", "cpu_fallback", "decomposed", "lowered", "lowered"]
    # the filter controls stay hidden until the script shows them
    (bar,) = [a for a in page.with_tag("div") if a.get("class") == "np-filter"]
    assert "hidden" in bar


def test_op_inventory_folds_long_module_lists() -> None:
    report = clean_report()
    report.ops[0].modules = [f"h.{i}.mlp" for i in range(12)]
    text = parse(render_html(report)).visible_text
    assert "h.0.mlp, h.1.mlp, h.2.mlp +9 more h.3.mlp" in text


def test_graph_breaks_recompiles_and_buckets(rich_html: str) -> None:
    text = parse(rich_html).visible_text
    assert "Tensor.item() called on a traced tensor" in text
    assert "torch.export failed first: torch.export failed: data-dependent branch" in text
    assert "200 calls with 37 distinct input signatures" in text
    assert "static 37 58.6 min one graph per distinct shape" in text  # issue 15: was "59 min", now as on the console
    assert "sequence length changes the input shape (dim 1 of input_ids) shape 36 not checked" in text
    assert "no: buckets fix it" in text
    assert "Proposed edges (k = 4): 96, 192, 320, 512" in text
    assert "powers of two 128, 256, 512 3 31.0% 52.0% 0" in text
    assert "context_encoding_buckets=[96, 192, 320, 512]" in text


def test_config_snippets_have_copy_buttons(rich_html: str) -> None:
    page = parse(rich_html)
    buttons = [a for a in page.with_tag("button") if a.get("class") == "np-copy"]
    assert len(buttons) == len(rich_report().buckets.configs) == 2


def test_prediction_and_baseline_diffs(rich_html: str) -> None:
    text = parse(rich_html).visible_text
    assert "Predicted to work, failed on the device op predicted observed where detail aten::_unique2 lowered cpu_fallback" in text
    assert "nightly 2026-01-15 compared with nightly 2026-01-14" in text
    assert "Regressions new cpu_fallback finding aten::_unique2" in text
    assert "support -1.5 percentage points" in text
    assert "Resolved findings" in text and "neuronx-cc 2.20 2.21" in text


def test_environment_and_provenance(rich_html: str) -> None:
    text = parse(rich_html).visible_text
    for fact in (
        "target trn1",
        "backend static (static): no Neuron SDK found",
        "torch 2.13.0",
        "support table 2.9.0-1 for trn1, built from: torch-xla 2.9.0 xla_native_functions.yaml",
        "git commit 0123456789abcdef0123456789abcdef01234567",
        "time 2026-01-15T09:30:00+00:00",
        "command line neuronprobe analyze models/tiny_encoder.py --lengths traffic.jsonl",
        "neuronprobe 0.1.0 (report schema 7)",  # issue 15: schema 3; issue 23: 4; issue 25: 5; issues 33, 36, 37: 6; issue 36.6: 7
    ):
        assert fact in text


def test_legend_explains_every_verdict(clean_html: str) -> None:
    text = parse(clean_html).visible_text
    for verdict in Verdict:
        assert f"{verdict} {verdict.words}" in text


def test_not_analysed_box_lists_what_was_skipped(rich_html: str, clean_html: str) -> None:
    assert "Not analysed These parts of the model were not checked" in parse(rich_html).visible_text
    assert "tokenizer_head.forward after the graph break: dynamo could not trace past" in parse(rich_html).visible_text
    assert "not-analysed" not in parse(clean_html).ids  # omitted when everything was analysed ...
    assert "not analysed nothing: every captured op was classified" in parse(clean_html).visible_text  # ... and said so


def test_sections_without_data_say_so_or_are_omitted(clean_html: str) -> None:
    page = parse(clean_html)
    text = page.visible_text
    assert "No findings: every captured op lowers" in text
    assert "No graph breaks" in text
    assert "Recompiles Not analysed: no traffic was given" in text
    assert "Buckets Not analysed: no length distribution was given" in text
    # diffs only exist for live-backend and baseline runs: omitted entirely
    assert "prediction-diff" not in page.ids and "baseline-diff" not in page.ids
    assert "Predicted vs observed" not in text and "Changes since baseline" not in text
    assert not [a for a in page.with_tag("svg") if a.get("class") == "np-plot"]


def test_traffic_without_first_seen_has_no_timeline_but_keeps_the_table() -> None:
    report = rich_report()
    assert report.recompiles is not None
    for policy in report.recompiles.predicted.values():
        policy.first_seen = []
    page = parse(render_html(report))
    labels = [a.get("aria-label") or "" for a in page.with_tag("svg")]
    assert not [x for x in labels if "compiled over the traffic" in x]
    assert "static 37" in page.visible_text


def test_empty_report_renders() -> None:
    text = parse(render_html(Report(model="empty", target="trn2"))).visible_text
    assert "Runs on trn2 as it is" in text and "No ops were captured." in text


def test_unknown_verdict_from_a_hand_edited_json_is_refused_before_rendering() -> None:
    # issue 15: the schema rejects unknown verdicts, so the renderer no longer carries a "v-other" fallback
    data = json.loads(fallback_only_report().to_json())
    data["ops"][0]["verdict"] = "made_up"
    with pytest.raises(ReportFormatError, match=r"report\.ops\[0\]\.verdict: unknown verdict 'made_up'"):
        Report.from_json(json.dumps(data))


# -- escaping and privacy -------------------------------------------------------------------

INJECTION = "<script>alert(1)</script>\"'<img src=x onerror=alert(2)>"


def _poisoned() -> Report:
    """Every string a model, compiler or file system can put into a report, carrying markup."""
    report = rich_report()
    report.model = INJECTION
    report.target = INJECTION
    for f in report.findings:
        f.file, f.module, f.source_line, f.message, f.fix = (f"/tmp/{INJECTION}/m.py",) + (INJECTION,) * 4
        f.op = f.ncc_code = f.shapes = f.rule = INJECTION
    for o in report.ops:
        o.op, o.reason, o.rule = INJECTION, INJECTION, INJECTION
        o.modules, o.dtypes, o.example_shapes = [INJECTION] * 5, [INJECTION], [INJECTION]
        # (verdicts are a closed set since issue 15: a report cannot carry markup there)
    report.graph_breaks[0].reason = report.graph_breaks[0].source_line = INJECTION
    report.capture.export_error = INJECTION
    report.metadata.command_line = report.metadata.model_source = report.metadata.host = INJECTION
    report.backend.detail = INJECTION
    report.backend.versions = {INJECTION: INJECTION}
    report.not_analysed[0].what = report.not_analysed[0].why = INJECTION
    assert report.recompiles is not None and report.buckets is not None
    report.recompiles.predicted = {INJECTION: report.recompiles.predicted["static"]}
    report.recompiles.causes[0].reason = INJECTION
    report.buckets.configs = {INJECTION: INJECTION}
    report.buckets.baselines[0].name = INJECTION
    report.buckets.notes = [INJECTION]
    return report


@pytest.mark.parametrize("embedded", [False, True])
def test_strings_from_models_compiler_and_paths_are_escaped(embedded: bool) -> None:
    html = render_html(_poisoned(), embedded=embedded)
    page = parse(html)
    assert page.tags["script"] == 1, "only our own script"
    assert page.tags["img"] == 0
    assert not [a for t, a in page.attrs if any(k.startswith("on") for k in a)], "no event-handler attributes"
    assert "<script>alert" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert INJECTION in page.visible_text  # shown to the reader as text, unchanged


def test_report_never_contains_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "SENTINEL123")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "SENTINELKEYID")
    monkeypatch.setenv("HF_TOKEN", "SENTINELHF")
    for embedded in (False, True):
        html = render_html(rich_report(), embedded=embedded)
        assert "SENTINEL" not in html


def test_size_of_a_full_report_stays_small(rich_html: str) -> None:
    assert len(rich_html.encode()) < 200_000  # three plots and every section


def test_formatters() -> None:
    assert format_bytes(0) == "0 B"
    assert format_bytes(8192) == "8.0 KiB"
    assert format_bytes(3 * 1024**3) == "3.0 GiB"
    # issue 15: one duration format for the console and HTML; 37 x 95 s reads "58.6 min" in both (was "59 min" here)
    assert format_duration(95) == "95 s"
    assert format_duration(37 * 95) == "58.6 min"
    assert format_duration(10 * 3600) == "10.0 h"


def test_rendering_does_not_change_the_report() -> None:
    report = rich_report()
    before = copy.deepcopy(report)
    render_html(report)
    render_html(report, embedded=True)
    assert report == before


def test_held_out_check_lists_the_split_and_each_ladder() -> None:
    # issue 15: the holdout is a typed object (was a free-form dict listed as flattened keys)
    report = rich_report()
    assert report.buckets is not None
    report.buckets.holdout = Holdout(
        fraction=0.2,
        order="time order",
        fit_lengths=800,
        test_lengths=200,
        overhead=Overhead(24.1416, 40.0),
        baselines={"nxd": HoldoutScore(tokens=42.5, attention=80.0)},
    )
    text = parse(render_html(report)).visible_text
    assert "held out 0.2 of the items (time order) fitted on 800 lengths scored on 200 lengths" in text
    assert "proposed 24.1% tokens, 40.0% attention, 0 beyond last nxd 42.5% tokens, 80.0% attention" in text
