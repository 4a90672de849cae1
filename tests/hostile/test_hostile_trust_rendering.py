"""Everything rendered is escaped (issue 34.5): hostile names in every field of every section, in every format.

The report is generated from the schema itself (:func:`hostile`): every ``str`` field of
every dataclass under :class:`Report` (findings, ops, parity, the frozen reference and the
training step, recompiles, buckets, decode, serving, the diffs, the audit) holds :data:`EVIL`, which
is HTML, Markdown, Rich markup and a terminal escape at once. A section added to the schema
is filled here without editing this file. Each renderer must show the text as text: no tag,
link or emphasis from the data survives, Rich does not parse it (a ``MarkupError`` was exit
3), and no raw control character reaches a terminal.
"""

from __future__ import annotations

import dataclasses
import enum
import io
import json
import types
import typing
from html.parser import HTMLParser
from typing import Any

import pytest
from markdown_it import MarkdownIt

from neuronprobe.audit.console import render_audit
from neuronprobe.audit.model import AuditFinding, AuditSection
from neuronprobe.audit.sarif import sarif_json
from neuronprobe.console_io import make_console
from neuronprobe.report.console import render_summary
from neuronprobe.report.diff import diff_reports
from neuronprobe.report.diff_console import render_diff
from neuronprobe.report.html import render_html
from neuronprobe.report.markdown import md_code, md_text, render_text
from neuronprobe.report.model import Report
from neuronprobe.report.nightly_html import NightReport, render_index
from neuronprobe.report.reference_console import render_frozen, render_train
from neuronprobe.report.schema.reference import ReferenceComparison, TrainParity

EVIL = "<img src=x onerror=alert(1)><script>alert(2)</script>[/bold][red]**b**_i_`|[l](javascript:x)&amp;\x1b[31m\u202e"
# Fields whose value is a choice from a closed set (a renderer looks them up): a hostile value there is a report
# file's error, tested with the readers; here they hold a valid choice and every other string is hostile.
CHOICES: dict[tuple[str, str], str] = {("AuditFinding", "severity"): "warning", ("AuditFinding", "rule"): "silent-cpu-fallback"}


def hostile(tp: Any) -> Any:
    """A value of type ``tp`` with :data:`EVIL` in every string, one element in every list and dict."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return hostile(next(a for a in args if a is not type(None)))
    if origin is list:
        return [hostile(args[0]), hostile(args[0])]  # two: a (base, new) pair is a list too
    if origin is tuple:
        return tuple(hostile(a) for a in args if a is not Ellipsis)
    if origin is dict:
        return {hostile(args[0]): hostile(args[1])}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return next(iter(tp))
    if tp is bool:
        return True
    if tp is int:
        return 2
    if tp is float:
        return 0.5
    if tp in (str, Any):
        return EVIL
    if dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        values = {f.name: CHOICES.get((tp.__name__, f.name)) or hostile(hints[f.name]) for f in dataclasses.fields(tp) if f.init}
        return tp(**values)
    raise TypeError(f"no hostile value for {tp!r}")


@pytest.fixture(scope="module")
def report() -> Report:
    r = hostile(Report)
    assert r.parity is not None and r.parity.frozen is not None and r.parity.train and r.audit is not None  # every section is there
    assert r.baseline_diff is not None and r.recompiles is not None and r.buckets is not None
    return r


class Tags(HTMLParser):
    """Every start tag and its attributes, as a browser would build them."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def assert_inert_html(html: str, own_scripts: int = 0) -> None:
    tags = Tags(html).tags
    assert not [t for t, a in tags if "onerror" in a], "an attribute from the data became a real attribute"
    assert not [t for t, a in tags if t == "img"], "an image tag from the data"
    assert not [a for t, a in tags if t == "a" and str(a.get("href", "")).startswith("javascript:")]
    assert len([t for t, _ in tags if t == "script"]) == own_scripts


def console_text(renderable: Any) -> str:
    console = make_console()
    console.file = io.StringIO()  # not a terminal: no colour codes of rich's own, so any escape would be the data's
    console.print(renderable)
    return console.file.getvalue()


def assert_inert_console(out: str) -> None:
    assert "[/bold][red]**b**" in out  # shown as written: rich did not read it as markup
    assert "\x1b" not in out and "\u202e" not in out  # the escape and the bidi override are shown escaped
    assert "\\x1b[31m" in out


def test_console_summary_and_every_section(report):
    out = console_text(render_summary(report))
    assert_inert_console(out)
    parts = ("training step:", "findings:", "recompile", "numerical parity", "buckets:", "prediction vs observed", "not analysed:")
    assert [p for p in parts if p not in out] == []  # every section the summary prints was rendered


def test_console_parity_reference_and_training_tables(report):
    assert_inert_console(console_text(render_frozen(hostile(ReferenceComparison))))
    for train in (hostile(TrainParity),):
        assert_inert_console(console_text(render_train(train)))


@pytest.mark.parametrize("config", ["nxd_inference", "all"])
def test_console_bucket_and_decode_sections_as_the_buckets_command_prints_them(report, config):
    """``buckets`` and ``buckets --decode`` print their sections as tables: a name with ``[/bold]`` was a MarkupError (exit 3)."""
    from rich.console import Group

    from neuronprobe.shape_buckets.console import render_proposal
    from neuronprobe.shape_buckets.decode_console import render_decode

    assert_inert_console(console_text(Group(*render_proposal(report.buckets, config))))
    assert_inert_console(console_text(Group(*render_decode(report.decode, config))))


def test_console_serving_plan_as_the_buckets_command_prints_it(report):
    """``buckets --runtime vllm-neuron`` prints the plan's lines as text (never markup), one by one."""
    from neuronprobe.shape_buckets.serving_console import render_serving

    console = make_console()
    console.file = io.StringIO()
    for line in render_serving(report.serving):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    assert_inert_console(console.file.getvalue())


def test_console_risky_constructs_as_parity_prints_them(report):
    """``parity`` prints the findings of the risky-construct rules in a block of their own."""
    from neuronprobe.report.console_risky import render_risky
    from neuronprobe.rules import RuleKind, bundled_registry

    rule = sorted(bundled_registry().ids([RuleKind.PRECISION]))[0]
    risky = dataclasses.replace(report, findings=[dataclasses.replace(f, rule=rule) for f in report.findings])
    out = console_text(render_risky(risky))
    assert_inert_console(out)
    assert "risky low-precision constructs: 2" in out


def test_console_diff(report):
    assert_inert_console(console_text(render_diff(report.baseline_diff)))
    assert_inert_console(console_text(render_diff(diff_reports(report, hostile(Report), base_label=EVIL, new_label=EVIL))))


def test_json_is_data_and_round_trips(report):
    text = report.to_json()

    def no_constants(name: str) -> None:
        raise AssertionError(f"{name} is not JSON")

    json.loads(text, parse_constant=no_constants)
    again = Report.from_json(text)
    assert again.model == EVIL and again.findings[0].op == EVIL  # the data kept exactly: escaping is the renderer's job


def test_html_report(report):
    html = render_html(report)
    assert_inert_html(html, own_scripts=html.count("<script nonce=") + html.count("<script>"))
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    sections = ("Findings", "Recompiles", "Buckets", "Decode buckets", "Serving on vLLM Neuron", "Numerical parity")
    sections += ("Predicted vs observed", "Changes since baseline", "CUDA assumptions in the repository", "Environment and provenance")
    assert [s for s in sections if f">{s}<" not in html] == []  # every section was rendered, so every one was checked


def test_html_report_embedded_in_a_notebook(report):
    html = report._repr_html_()
    assert_inert_html(html, own_scripts=html.count("<script"))
    assert "<script>alert(2)" not in html


def render_md(markdown: str) -> str:
    return MarkdownIt("commonmark").enable("table").render(markdown)


def test_markdown_renders_no_markup_of_the_data(report):
    markdown = report._repr_markdown_()
    html = render_md(markdown)
    assert_inert_html(html)
    tags = [t for t, _ in Tags(html).tags]
    assert tags.count("strong") == 1 and "em" not in tags  # the title's own bold; no emphasis from **b** or _i_
    assert "\x1b" not in markdown and "\u202e" not in markdown
    assert tags.count("tr") == 1 + len(report.findings)  # a pipe in a name split no row into more cells
    assert tags.count("td") == 4 * len(report.findings)


@pytest.mark.parametrize("text", [EVIL, "`", "``x``", "a|b", " ", "[x](y)", "\\", "<", "&lt;", "_x_", "snake_case_name", "*x*", "# h"])
def test_markdown_escapes_show_the_text_itself(text):
    """What a reader sees is the original text (not an entity, not a backslash): escape, do not mangle."""
    shown_text = text_of(render_md(md_text(text)))
    shown_code = text_of(render_md(f"| c |\n|---|\n| {md_code(text)} |")).removeprefix("c")  # the cell, after its header
    plain = " ".join(text.replace("\x1b", "\\x1b").replace("\u202e", "\\u202e").split())
    assert shown_text == plain
    assert shown_code.strip() == plain.strip() or (not plain.strip() and not shown_code.strip())


def text_of(html: str) -> str:
    class Collect(HTMLParser):
        def __init__(self) -> None:
            super().__init__(convert_charrefs=True)
            self.parts: list[str] = []

        def handle_data(self, data: str) -> None:
            self.parts.append(data)

    c = Collect()
    c.feed(html)
    return "".join(c.parts).strip()


def test_plain_text_has_no_terminal_control(report):
    text = render_text(report)
    assert "\x1b" not in text and "\u202e" not in text and EVIL.split("\x1b")[0] in text


@pytest.mark.parametrize("frame", ["ops_df", "findings_df", "recompiles_df", "buckets_df"])
def test_frames_render_as_escaped_html(report, frame):
    df = getattr(report, frame)()
    assert EVIL in df.to_string() or EVIL in json.dumps(df.astype(str).values.tolist(), ensure_ascii=False)  # the data itself
    assert_inert_html(df._repr_html_())


def test_nightly_index(report):
    night = NightReport("2025-06-01", "m", report, "2025-06-01/m.json", "2025-06-01/m.html")
    html = render_index([night], "2025-06-01", ["m", "other"], {"other": EVIL}, [EVIL])
    assert_inert_html(html, own_scripts=html.count("<script"))
    assert "<script>alert(2)" not in html


def test_audit_sarif_keeps_data_out_of_markdown_and_the_console_inert(report):
    section = AuditSection(findings=[AuditFinding(**{**dataclasses.asdict(report.audit.findings[0])})], stack=report.audit.stack)
    log = json.loads(sarif_json(section, "1.0"))

    def markdown_fields(node: Any) -> list[str]:
        if isinstance(node, dict):
            return [v for k, v in node.items() if k == "markdown" and isinstance(v, str)] + [x for v in node.values() for x in markdown_fields(v)]
        if isinstance(node, list):
            return [x for v in node for x in markdown_fields(v)]
        return []

    assert "onerror" not in json.dumps(markdown_fields(log))  # GitHub renders `markdown`; user text only in `text`
    assert "onerror=alert(1)" in json.dumps(log)  # kept as plain text (the `text` fields), which GitHub does not render
    for part in render_audit(report.audit):
        out = console_text(part)
        assert "\x1b" not in out
