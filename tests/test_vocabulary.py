"""Issue 15: one vocabulary, one way to print numbers and places, and a schema that rejects what it does not know."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from report_fixtures import fallback_only_report, rich_report

from neuronprobe.errors import ReportFormatError
from neuronprobe.formatting import format_bytes, format_duration, format_percent, format_signed
from neuronprobe.report.model import SCHEMA_VERSION, BackendStep, Finding, Report, load_report
from neuronprobe.vocabulary import (
    PROBLEM_VERDICTS,
    SUPPORTED_VERDICTS,
    UNKNOWN_LOCATION,
    Origin,
    Phase,
    SourceLocation,
    StepStatus,
    TopVerdict,
    Verdict,
)

OLD_REPORT = Path(__file__).parent / "data" / "report_schema_v2.json"


# -- the vocabulary -------------------------------------------------------------------------


def test_verdicts_are_their_json_strings_in_severity_order() -> None:
    assert Verdict.values() == ("lowered", "decomposed", "precision", "cpu_fallback", "dynamic_shape", "control_flow", "compile_error")
    assert [v.rank for v in Verdict] == list(range(len(Verdict)))
    assert Verdict("cpu_fallback") is Verdict.CPU_FALLBACK and Verdict.CPU_FALLBACK == "cpu_fallback"
    assert json.dumps({"verdict": Verdict.COMPILE_ERROR}) == '{"verdict": "compile_error"}'
    assert f"{Verdict.DYNAMIC_SHAPE}|{Phase.LOOP:<6}|" == "dynamic_shape|loop  |"
    # a precision note compiles into the device graph: a supported op call, but a finding (issue 23)
    assert {Verdict.LOWERED, Verdict.DECOMPOSED, Verdict.PRECISION} == SUPPORTED_VERDICTS
    assert [v for v in Verdict if v.reported] == [Verdict.PRECISION, *PROBLEM_VERDICTS]
    assert not Verdict.PRECISION.is_problem and not Verdict.PRECISION.blocks_compile and Verdict.PRECISION.is_note
    assert PROBLEM_VERDICTS[-1] is Verdict.COMPILE_ERROR and all(v.is_problem for v in PROBLEM_VERDICTS)
    assert all(v.words for v in Verdict)


def test_source_location_prints_one_way() -> None:
    assert str(SourceLocation("model.py", 12)) == "model.py:12"
    assert str(SourceLocation("model.py", None)) == "model.py"
    assert str(SourceLocation(None, 12)) == UNKNOWN_LOCATION == "unknown location"
    assert str(SourceLocation("", None)) == UNKNOWN_LOCATION


@given(st.text(min_size=1).filter(lambda s: s.strip()), st.integers(min_value=0, max_value=10**6))
def test_source_location_is_file_colon_line(file: str, line: int) -> None:
    assert str(SourceLocation(file, line)) == f"{file}:{line}"


# -- formatting -----------------------------------------------------------------------------


def test_durations_read_the_same_on_the_console_and_in_html() -> None:
    # 600 s was "10.0 min" on the console and "10 min" in HTML; both now use format_duration
    assert [format_duration(s) for s in (0.25, 95, 600, 750, 37 * 95, 4 * 3600)] == [
        "0.25 s",
        "95 s",
        "10.0 min",
        "12.5 min",
        "58.6 min",
        "4.0 h",
    ]


def test_bytes_percent_and_signed() -> None:
    assert [format_bytes(n) for n in (0, 10, 8192, 3 * 1024**3)] == ["0 B", "10 B", "8.0 KiB", "3.0 GiB"]
    assert format_percent(97.26) == "97.3%" and format_percent(1234.5) == "1,234.5%"
    assert format_signed(1.5) == "+1.5" and format_signed(-0.25, 2) == "-0.25"


@given(st.integers(min_value=0, max_value=2**60))
def test_bytes_always_have_a_unit_and_a_short_number(n: int) -> None:
    number, unit = format_bytes(n).split(" ")
    assert unit in ("B", "KiB", "MiB", "GiB", "TiB")
    if unit != "TiB":  # the largest unit takes whatever is left
        assert float(number) <= 1024  # 1023.96 KiB rounds to "1024.0 KiB", never more


@given(st.floats(min_value=0, max_value=10**7, allow_nan=False))
def test_durations_pick_one_unit(seconds: float) -> None:
    text = format_duration(seconds)
    assert text.endswith((" s", " min", " h"))
    if seconds < 120:
        assert text.endswith(" s")
    elif seconds < 7200:
        assert text.endswith(" min")
    else:
        assert text.endswith(" h")


# -- the schema -----------------------------------------------------------------------------


def _json(report: Report) -> dict:
    return json.loads(report.to_json())


@pytest.mark.parametrize(
    "where, value, message",
    [
        (("findings", 0, "verdict"), "foo", "report.findings[0].verdict: unknown verdict 'foo'; expected one of lowered, decomposed,"),
        (("findings", 0, "origin"), "guessed", "report.findings[0].origin: unknown origin 'guessed'; expected one of predicted, observed"),
        (("findings", 0, "phase"), "warmup", "report.findings[0].phase: unknown phase 'warmup'; expected one of forward, backward"),
        (("ops", 0, "verdict"), "meh", "report.ops[0].verdict: unknown verdict 'meh'"),
        (("recompiles", "causes", 0, "kind"), "cosmic_ray", "report.recompiles.causes[0].kind: unknown cause kind 'cosmic_ray'"),
        (("summary", "counts"), {"lowered": 1, "bogus": 2}, "report.summary.counts.bogus: unknown verdict 'bogus'"),
        (("verdict",), "fine", "report.verdict: unknown verdict 'fine'; expected one of runs, runs_with_fallbacks"),
        (("findings", 0, "verdict"), 3, "report.findings[0].verdict: expected verdict (a string), got int"),
        (("capture", "strategy"), "lucky", "report.capture.strategy: unknown capture strategy 'lucky'; expected one of meta, fake, cpu-shrunk"),
    ],
    ids=["verdict", "origin", "phase", "op-verdict", "cause-kind", "counts-key", "top-verdict", "not-a-string", "capture-strategy"],
)
def test_from_json_rejects_unknown_values_with_the_field_path(where: tuple, value: object, message: str) -> None:
    data = _json(rich_report())
    node = data
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = value
    with pytest.raises(ReportFormatError) as exc:
        Report.from_json(json.dumps(data))
    assert message in str(exc.value)


def test_top_line_verdict_and_its_words_are_in_the_json() -> None:
    data = _json(fallback_only_report())
    assert data["schema_version"] == SCHEMA_VERSION == 7
    assert data["verdict"] == "runs_with_fallbacks" and data["verdict_words"] == TopVerdict.RUNS_WITH_FALLBACKS.words
    assert list(data)[:4] == ["model", "target", "verdict", "verdict_words"]  # CI jobs read the top
    blocked = _json(rich_report())
    assert blocked["verdict"] == "will_not_compile" and blocked["verdict_words"] == "will not compile on Neuron as it is"


def test_a_precision_note_never_changes_the_top_line_and_round_trips() -> None:
    report = fallback_only_report()
    report.findings = [f for f in report.findings if not f.verdict.is_problem]
    report.findings.append(
        Finding("aten::mul.Tensor", Verdict.PRECISION, "m.py", 8, None, "float64 is computed in float32 on the device", "fix", "device-dtype")
    )
    assert report.verdict is TopVerdict.RUNS  # it compiles and runs; the note says the numbers differ
    again = Report.from_json(report.to_json())
    assert [f.verdict for f in again.findings] == [Verdict.PRECISION] and again.schema_version == 7


def test_a_schema_2_report_loads_and_round_trips_to_the_current_schema() -> None:
    old_data = json.loads(OLD_REPORT.read_text(encoding="utf-8"))
    assert old_data["schema_version"] == 2 and "verdict" not in old_data
    report = load_report(str(OLD_REPORT))
    assert report.schema_version == SCHEMA_VERSION == 7
    assert report.verdict is TopVerdict.WILL_NOT_COMPILE
    assert {f.verdict for f in report.findings} == {Verdict.DYNAMIC_SHAPE, Verdict.CPU_FALLBACK}
    assert all(f.origin is Origin.PREDICTED and f.phase is Phase.FORWARD for f in report.findings)
    # prose step statuses become typed steps, and print as before
    steps = report.backend.steps
    assert steps["analyze"] == BackendStep(StepStatus.OK, 2.1)
    assert steps["trace"] == BackendStep(StepStatus.FAILED, detail="neuronx-cc exited 70")
    assert steps["run"] == BackendStep(StepStatus.TIMEOUT, 600.0)
    assert [str(s) for s in steps.values()] == ["ok 2.1s", "failed: neuronx-cc exited 70", "timeout after 600s"]
    # the one-element bin_width list is an int; the holdout dict is a typed Holdout
    assert report.buckets is not None
    assert report.buckets.histogram.bin_width == old_data["buckets"]["histogram"]["bin_width"][0]
    holdout = report.buckets.holdout
    assert holdout is not None and holdout.fit_lengths == old_data["buckets"]["holdout"]["fit_lengths"]
    assert holdout.overhead is not None and holdout.overhead.tokens == old_data["buckets"]["holdout"]["overhead"]["tokens"]
    assert holdout.baselines["uniform"].attention == old_data["buckets"]["holdout"]["baselines"]["uniform"]["attention"]
    assert report.recompiles is not None and {c.kind for c in report.recompiles.causes} == {"branch", "shape"}
    # written again, it is a schema-6 report that loads to the same objects
    new_data = json.loads(report.to_json())
    assert new_data["schema_version"] == 7 and new_data["verdict"] == "will_not_compile"
    assert new_data["backend"]["steps"]["run"] == {"status": "timeout", "seconds": 600.0, "detail": ""}
    assert new_data["buckets"]["histogram"]["bin_width"] == report.buckets.histogram.bin_width
    assert Report.from_json(report.to_json()) == report


def test_a_schema_2_step_status_that_is_not_prose_of_a_known_status_is_refused() -> None:
    data = json.loads(OLD_REPORT.read_text(encoding="utf-8"))
    data["backend"]["steps"]["run"] = "exploded: boom"
    with pytest.raises(ReportFormatError, match=r"report\.backend\.steps\.run\.status: unknown step status 'exploded'"):
        Report.from_json(json.dumps(data))


def test_constructing_a_finding_with_an_unknown_verdict_fails_at_once() -> None:
    report = rich_report()
    finding = report.findings[0]
    with pytest.raises(ValueError, match="'made_up' is not a valid Verdict"):
        type(finding)(**{**finding.__dict__, "verdict": "made_up"})


def test_a_precision_note_is_shown_in_the_html_banner_and_findings() -> None:
    from neuronprobe.report.html import render_html

    report = fallback_only_report()
    report.findings = [Finding("aten::mul.Tensor", Verdict.PRECISION, "m.py", 8, None, "float64 is computed in float32 on the device", "fix", "device-dtype")]
    page = render_html(report)
    assert f"Runs on {report.target} as it is" in page and "1 precision note(s): the device computes them in a narrower dtype" in page
    assert '<article class="np-finding v-precision"' in page and '<span class="np-badge v-precision"' in page
