"""`neuronprobe nightly`: config, baselines, exit codes, atomic writes and the history page.

The analysis is replaced by hand-built reports (tests/diff_fixtures.py) so that each
night's findings are exactly what the test says; tests/test_nightly_e2e.py runs the
real analysis.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest
from diff_fixtures import finding, make_report
from typer.testing import CliRunner

import neuronprobe.nightly.run as nightly
from neuronprobe.cli import app
from neuronprobe.errors import ConfigError, ModelLoadError
from neuronprobe.nightly.run import INDEX_FILE, SUMMARY_FILE, load_config, run_nightly
from neuronprobe.report.model import Report, load_report

runner = CliRunner()
TESTS = Path(__file__).parent
REPO = TESTS.parent

CONFIG = """\
target = "trn1"

[[models]]
model = "alpha.py"

[[models]]
name = "beta"
model = "nested/beta_model.py"
lengths = "lengths.txt"
max_buckets = 4
"""


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    (tmp_path / "nested").mkdir()
    for f in ("alpha.py", "nested/beta_model.py"):
        (tmp_path / f).write_text("# stands in for a model file; the analysis is replaced in these tests\n")
    (tmp_path / "lengths.txt").write_text("12\n40\n")
    path = tmp_path / "nightly.toml"
    path.write_text(CONFIG)
    return path


def serve(monkeypatch: pytest.MonkeyPatch, tonight: dict[str, Report | Exception]) -> list[tuple[str, str | None]]:
    """Replace the analysis: each model name gets the given report (or raises the given error)."""
    calls: list[tuple[str, str | None]] = []

    def fake(model, config, require_backend, command_line):
        calls.append((model.name, require_backend))
        result = tonight[model.name]
        if isinstance(result, Exception):
            raise result
        return Report.from_json(result.to_json())  # a fresh copy, as a real analysis would return

    monkeypatch.setattr(nightly, "analyze_model", fake)
    # These tests are about the night's logic, so the fake runs in this process (the
    # workers that isolate real models are tested in test_isolation_cli.py).
    monkeypatch.setattr(nightly, "isolated_analyze", lambda config, *rest: fake)
    return calls


def night(config: Path, reports: Path, date: str, *extra: str):
    # The fake analysis changes a model's report without changing its file: no result cache (tests/test_nightly_cache.py).
    return runner.invoke(app, ["nightly", str(config), "-o", str(reports), "--date", date, "--no-cache", *extra])


def clean() -> dict[str, Report | Exception]:
    return {"alpha": make_report([], model="alpha"), "beta": make_report([finding("aten::nonzero", "dynamic_shape", 7)], model="beta", support=97.0)}


# --- configuration ------------------------------------------------------------------------


def test_config_loads_with_paths_resolved_against_its_folder(config_path):
    config = load_config(config_path)
    assert [m.name for m in config.models] == ["alpha", "beta"]
    beta = config.models[1]
    assert beta.model == str((config_path.parent / "nested/beta_model.py").resolve())
    # issue 15: the traffic keys are read into the model's TrafficOptions (paths as Path)
    assert beta.traffic.lengths == (config_path.parent / "lengths.txt").resolve()
    assert beta.traffic.max_buckets == 4 and config.target_of(beta) == "trn1" and config.backend_of(beta) == "auto"


@pytest.mark.parametrize(
    "text, message",
    [
        ("[[models]]\nmodel = 'alpha.py'\nmax_bucket = 4\n", "unknown key 'max_bucket' in models[0]"),
        ("targte = 'trn1'\n[[models]]\nmodel = 'alpha.py'\n", "unknown key 'targte' in the top level"),
        ("[[models]]\nmodel = 'alpha.py'\nmax_buckets = 'four'\n", "models[0].max_buckets: expected an integer, got str"),
        ("timeout = 'long'\n[[models]]\nmodel = 'alpha.py'\n", "timeout: expected a number, got str"),
        ("target = 'trn9'\n[[models]]\nmodel = 'alpha.py'\n", "`target` must be one of trn1, trn2, inf2, got 'trn9'"),
        ("require_backend = 'cuda'\n[[models]]\nmodel = 'alpha.py'\n", "`require_backend` must be one of static, neuron"),
        ("target = 'trn1'\n", "needs at least one [[models]] table"),
        ("[[models]]\nname = 'x'\n", "models[0] needs `model = "),
        ("[[models]]\nmodel = 'missing.py'\n", "models[0] (missing).model:"),
        ("[[models]]\nmodel = 'alpha.py'\n[[models]]\nmodel = 'alpha.py'\n", "two models are named 'alpha'"),
        ("[[models]]\nname = '../evil'\nmodel = 'alpha.py'\n", "cannot be a file name"),
        ("[[models]]\nmodel = 'alpha.py'\nbuckets = []\n", "buckets must be a non-empty list of positive integers"),
        ("[[models]\nmodel = 'alpha.py'\n", "not valid TOML"),
        ("[[models]]\nmodel = 'alpha.py'\nset = ['n_layer=2']\n", "set applies to hf: models only"),
    ],
    ids=[
        "model-key",
        "top-key",
        "int-type",
        "float-type",
        "target",
        "require",
        "no-models",
        "no-spec",
        "missing-file",
        "duplicate",
        "bad-name",
        "empty-buckets",
        "toml-syntax",
        "set-on-a-file",
    ],
)
def test_bad_config_is_one_clear_sentence_and_exit_2(config_path, tmp_path, text, message):
    config_path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(config_path)
    assert message in str(err.value) and str(config_path) in str(err.value)
    result = night(config_path, tmp_path / "reports", "2025-06-01")
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output
    assert not (tmp_path / "reports").exists()


def test_missing_config_and_bad_date_exit_2(config_path, tmp_path):
    assert night(tmp_path / "nope.toml", tmp_path / "r", "2025-06-01").exit_code == 2
    result = night(config_path, tmp_path / "r", "2025-13-01")
    assert result.exit_code == 2 and "--date must be a date written YYYY-MM-DD" in result.output


def test_hf_spec_needs_no_file_and_names_itself(tmp_path):
    path = tmp_path / "n.toml"
    path.write_text("[[models]]\nmodel = 'hf:gpt2'\nset = ['n_layer=2']\n")
    model = load_config(path).models[0]
    assert (model.name, model.model, model.set) == ("gpt2", "hf:gpt2", ["n_layer=2"])


def test_the_example_config_is_valid():
    config = load_config(REPO / "examples" / "nightly.toml")
    assert config.models and all(Path(m.model).exists() or m.model.startswith("hf:") for m in config.models)


# --- nights, baselines and the gate ---------------------------------------------------------


def test_first_night_writes_reports_summary_and_index_last(config_path, tmp_path, monkeypatch):
    serve(monkeypatch, clean())
    result = run_nightly(load_config(config_path), tmp_path / "reports", "2025-06-01")
    assert list(result.files) == [
        "2025-06-01/alpha.json",
        "2025-06-01/alpha.html",
        "2025-06-01/beta.json",
        "2025-06-01/beta.html",
        f"2025-06-01/{SUMMARY_FILE}",
        INDEX_FILE,
    ]
    assert [o.status for o in result.outcomes] == ["first_run", "first_run"]
    assert result.regressions == [] and not (tmp_path / "reports").exists()  # the library writes nothing


def test_identical_second_night_exits_0(config_path, tmp_path, monkeypatch):
    serve(monkeypatch, clean())
    reports = tmp_path / "reports"
    assert night(config_path, reports, "2025-06-01").exit_code == 0
    result = night(config_path, reports, "2025-06-02")
    assert result.exit_code == 0, result.output
    beta = load_report(str(reports / "2025-06-02" / "beta.json"))
    assert beta.baseline_diff is not None and beta.baseline_diff.comparable
    assert beta.baseline_diff.new_findings == [] and beta.baseline_diff.regressions == []
    assert beta.baseline_diff.base_label.startswith("2025-06-01 ")
    summary = json.loads((reports / "2025-06-02" / SUMMARY_FILE).read_text())
    assert [(m["name"], m["status"], m["baseline"]) for m in summary["models"]] == [
        ("alpha", "ok", "2025-06-01"),
        ("beta", "ok", "2025-06-01"),
    ]


def test_a_new_cpu_fallback_exits_1_and_is_on_the_index(config_path, tmp_path, monkeypatch):
    reports = tmp_path / "reports"
    serve(monkeypatch, clean())
    night(config_path, reports, "2025-06-01")
    worse = clean()
    worse["alpha"] = make_report([finding("aten::_unique2", "cpu_fallback", 33)], model="alpha")
    serve(monkeypatch, worse)
    result = night(config_path, reports, "2025-06-02")
    assert result.exit_code == 1, result.output
    assert "new cpu_fallback: aten::_unique2 at models/tiny_gpt.py:33" in result.output
    index = (reports / INDEX_FILE).read_text()
    assert "new cpu_fallback: aten::_unique2 at models/tiny_gpt.py:33" in index
    summary = json.loads((reports / "2025-06-02" / SUMMARY_FILE).read_text())
    assert summary["models"][0]["status"] == "regression"


def test_baseline_is_the_latest_earlier_night_on_the_same_backend_and_target(config_path, tmp_path, monkeypatch):
    reports = tmp_path / "reports"
    fallback = [finding("aten::_unique2", "cpu_fallback", 33)]
    plan = [
        ("2025-06-01", make_report([], model="alpha", backend="neuron", compiler="2.21")),
        ("2025-06-02", make_report(fallback, model="alpha", backend="static")),  # a night without the SDK
        ("2025-06-03", make_report(fallback, model="alpha", target="inf2", backend="neuron", compiler="2.21")),
    ]
    for date, report in plan:
        serve(monkeypatch, {**clean(), "alpha": report})
        night(config_path, reports, date)
    serve(monkeypatch, {**clean(), "alpha": make_report(fallback, model="alpha", backend="neuron", compiler="2.21")})
    result = night(config_path, reports, "2025-06-04")
    assert result.exit_code == 1  # against 06-01 (neuron, trn1), not the static or inf2 nights
    diff = load_report(str(reports / "2025-06-04" / "alpha.json")).baseline_diff
    assert diff is not None and diff.base_label.startswith("2025-06-01 alpha neuron/trn1")


def test_a_rerun_of_the_same_night_compares_with_the_night_before(config_path, tmp_path, monkeypatch):
    reports = tmp_path / "reports"
    serve(monkeypatch, clean())
    night(config_path, reports, "2025-06-01")
    night(config_path, reports, "2025-06-02")
    result = night(config_path, reports, "2025-06-02")
    assert result.exit_code == 0
    diff = load_report(str(reports / "2025-06-02" / "alpha.json")).baseline_diff
    assert diff is not None and diff.base_label.startswith("2025-06-01")


def test_a_compiler_upgrade_is_reported_and_not_gated(config_path, tmp_path, monkeypatch):
    reports = tmp_path / "reports"
    serve(monkeypatch, {**clean(), "alpha": make_report([], model="alpha", backend="neuron", compiler="2.20")})
    night(config_path, reports, "2025-06-01")
    upgraded = make_report([finding()], model="alpha", backend="neuron", compiler="2.21", support=90.0)
    serve(monkeypatch, {**clean(), "alpha": upgraded})
    result = night(config_path, reports, "2025-06-02")
    assert result.exit_code == 0, result.output
    assert "different neuronx-cc (2.20 vs 2.21)" in result.output
    assert "not comparable" in (reports / INDEX_FILE).read_text()


def test_require_backend_neuron_in_the_config_without_the_stack_exits_2(config_path, tmp_path, monkeypatch):
    config_path.write_text('require_backend = "neuron"\n' + CONFIG)
    calls = serve(monkeypatch, {"alpha": make_report([]), "beta": make_report([])})
    result = night(config_path, tmp_path / "reports", "2025-06-01")
    assert result.exit_code == 2
    assert "--require-backend neuron" in result.output
    assert calls == []  # checked before the first model: the night stops at once
    assert not (tmp_path / "reports").exists()


def test_require_backend_flag_overrides_the_config(config_path, tmp_path, monkeypatch):
    calls = serve(monkeypatch, clean())
    assert night(config_path, tmp_path / "r", "2025-06-01", "--require-backend", "static").exit_code == 0
    assert calls == [("alpha", "static"), ("beta", "static")]


def test_a_model_that_fails_to_load_is_reported_the_others_still_run_exit_2(config_path, tmp_path, monkeypatch):
    reports = tmp_path / "reports"
    serve(monkeypatch, {**clean(), "alpha": ModelLoadError("alpha.py: get_model() raised ValueError: bad width")})
    result = night(config_path, reports, "2025-06-01")
    assert result.exit_code == 2
    assert "alpha: alpha.py: get_model() raised ValueError: bad width" in result.output
    assert not (reports / "2025-06-01" / "alpha.json").exists()
    assert load_report(str(reports / "2025-06-01" / "beta.json")).model == "beta"
    index = (reports / INDEX_FILE).read_text()
    assert "Tonight's analysis failed: alpha.py: get_model() raised ValueError: bad width" in index


def test_an_unreadable_past_report_is_skipped_with_a_warning(config_path, tmp_path, monkeypatch):
    reports = tmp_path / "reports"
    serve(monkeypatch, clean())
    night(config_path, reports, "2025-06-01")
    night(config_path, reports, "2025-06-02")
    (reports / "2025-06-02" / "alpha.json").write_text('{"model": "alpha", "tar')  # damaged by hand
    result = night(config_path, reports, "2025-06-03")
    assert result.exit_code == 0, result.output
    assert "skipped an unreadable past report" in result.output and "2025-06-02/alpha.json" in result.output
    diff = load_report(str(reports / "2025-06-03" / "alpha.json")).baseline_diff
    assert diff is not None and diff.base_label.startswith("2025-06-01")


# --- atomic writes ----------------------------------------------------------------------------

KILLED_RUN = """\
import sys, time
sys.path.insert(0, {tests!r})
from diff_fixtures import finding, make_report
import neuronprobe.nightly.run as nightly
from neuronprobe.cli import main

def analyse(model, config, require_backend, command_line):
    if model.name == "beta":  # the second model: signal the test, then wait to be killed
        open({marker!r}, "w").close()
        time.sleep(120)
    return make_report([finding()], model=model.name)

nightly.analyze_model = analyse
sys.argv = ["neuronprobe", "nightly", {config!r}, "-o", {reports!r}, "--date", "2025-06-02"]
main()
"""


def test_a_run_killed_during_the_second_model_leaves_the_previous_index(config_path, tmp_path, monkeypatch):
    reports = tmp_path / "reports"
    serve(monkeypatch, clean())
    assert night(config_path, reports, "2025-06-01").exit_code == 0
    before = {p: p.read_bytes() for p in reports.rglob("*") if p.is_file()}
    marker = tmp_path / "second-model-started"
    script = KILLED_RUN.format(tests=str(TESTS), marker=str(marker), config=str(config_path), reports=str(reports))
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the nightly never reached the second model"
            time.sleep(0.05)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    after = {p: p.read_bytes() for p in reports.rglob("*") if p.is_file()}
    assert after == before  # nothing of the killed night, the previous index byte for byte
    assert_index_is_whole(reports)


def test_a_write_failing_halfway_leaves_no_partial_file_and_the_previous_index(config_path, tmp_path, monkeypatch):
    reports = tmp_path / "reports"
    serve(monkeypatch, clean())
    assert night(config_path, reports, "2025-06-01").exit_code == 0
    old_index = (reports / INDEX_FILE).read_bytes()
    import neuronprobe.files as files

    real_fsync, synced = os.fsync, []

    def dying_fsync(fd):  # the third file (beta.json) dies after its bytes went to the temp file
        synced.append(fd)
        if len(synced) == 3:
            raise OSError(28, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(files.os, "fsync", dying_fsync)
    worse = {**clean(), "alpha": make_report([finding()], model="alpha")}
    serve(monkeypatch, worse)
    result = night(config_path, reports, "2025-06-02")
    assert result.exit_code == 2 and "No space left on device" in result.output
    assert (reports / INDEX_FILE).read_bytes() == old_index
    new_night = sorted(p.name for p in (reports / "2025-06-02").iterdir())
    assert new_night == ["alpha.html", "alpha.json"]  # complete files only; no temp file, no beta.json
    assert load_report(str(reports / "2025-06-02" / "alpha.json")).findings
    assert_index_is_whole(reports)
    monkeypatch.setattr(files.os, "fsync", real_fsync)  # the disk is fixed: the rerun completes the night
    assert night(config_path, reports, "2025-06-02").exit_code == 1
    assert (reports / INDEX_FILE).read_bytes() != old_index


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.hrefs += [v for k, v in attrs if k == "href" and v and not v.startswith(("#", "data:"))]


def assert_index_is_whole(reports: Path) -> None:
    """The index ends properly and every report it links exists and is complete."""
    text = (reports / INDEX_FILE).read_text()
    assert text.rstrip().endswith("</html>")
    parser = _Links()
    parser.feed(text)
    assert parser.hrefs
    for href in parser.hrefs:
        target = reports / href
        assert target.is_file(), href
        if href.endswith(".json"):
            load_report(str(target))
        else:
            assert target.read_text().rstrip().endswith("</html>")


# --- the history page ---------------------------------------------------------------------------


def test_history_page_renders_trends_from_the_second_night(config_path, tmp_path, monkeypatch):
    reports = tmp_path / "reports"
    serve(monkeypatch, clean())
    night(config_path, reports, "2025-06-01")
    page = (reports / INDEX_FILE).read_text()
    assert "<svg" not in page and "trend plots appear from the second night" in page
    nights = [
        ("2025-06-02", make_report([], model="beta", support=98.0, static_graphs=4, padding=21.5)),
        ("2025-06-04", make_report([finding()], model="beta", support=96.0, static_graphs=6, padding=18.0)),
    ]
    for date, beta in nights:
        serve(monkeypatch, {**clean(), "beta": beta})
        night(config_path, reports, date)
    page = (reports / INDEX_FILE).read_text()
    assert page.count('<svg class="np-plot"') == 2  # one trend figure per model
    beta = page[page.index('id="m-beta"') :]
    for panel in ("support %", "CPU fallbacks", "compiled graphs", "padding overhead %"):
        assert panel in beta[: beta.index("</svg>")]
    assert "2025-06-04/beta.html" in page and "2025-06-01/beta.json" in page
    rows = re.findall(r'<td class="nowrap">(\d{4}-\d{2}-\d{2})</td><td>static/trn1</td>', beta)
    assert rows == ["2025-06-04", "2025-06-02", "2025-06-01"]  # newest first
    assert "more graphs under the static-shape policy: 4 -&gt; 6" in beta
    ids = re.findall(r'\sid="([^"]+)"', page)
    assert len(ids) == len(set(ids))  # two plots on one page share no ids
    assert_index_is_whole(reports)


def test_history_page_escapes_what_came_from_the_models(config_path, tmp_path, monkeypatch):
    evil = finding()
    evil.message = "<script>alert(1)</script>"
    serve(monkeypatch, {**clean(), "alpha": make_report([], model="alpha")})
    night(config_path, tmp_path / "r", "2025-06-01")
    serve(monkeypatch, {**clean(), "alpha": make_report([evil], model="alpha")})
    night(config_path, tmp_path / "r", "2025-06-02")
    page = (tmp_path / "r" / INDEX_FILE).read_text()
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_history_page_keeps_models_no_longer_in_the_config(config_path, tmp_path, monkeypatch):
    reports = tmp_path / "reports"
    serve(monkeypatch, clean())
    night(config_path, reports, "2025-06-01")
    config_path.write_text(CONFIG.split("[[models]]\nname")[0])  # beta removed from the config
    night(config_path, reports, "2025-06-02")
    page = (reports / INDEX_FILE).read_text()
    assert 'id="m-beta"' in page and "not run tonight" in page


# --- the example CI workflow -------------------------------------------------------------------


def test_ci_workflow_installs_neuron_requires_it_uploads_reports_and_fails_on_regression():
    import yaml

    workflow = yaml.safe_load((REPO / "examples" / "ci" / "trn1-nightly.yml").read_text())
    job = workflow["jobs"]["nightly"]
    assert "self-hosted" in job["runs-on"] and "trn1" in job["runs-on"]
    steps = {s.get("name", s.get("uses")): s for s in job["steps"]}
    install = steps["Install the Neuron stack and neuronprobe"]["run"]
    assert "-r requirements/neuron.txt" in install and "pip.repos.neuron.amazonaws.com" in workflow["env"]["NEURON_PIP_INDEX"]
    run = steps["Run the nightly (Neuron backend required)"]
    assert "neuronprobe nightly examples/nightly.toml" in run["run"] and "--require-backend neuron" in run["run"]
    assert not run.get("continue-on-error")  # exit 1 (regression) or 2 (no Neuron) fails the job
    upload = steps["Upload the reports"]
    assert upload["uses"].startswith("actions/upload-artifact@") and upload["if"] == "always()"
    assert upload["with"]["path"] == "${{ env.REPORTS_DIR }}"
    for path in ("requirements/neuron.txt", "examples/nightly.toml"):
        assert (REPO / path).is_file()
