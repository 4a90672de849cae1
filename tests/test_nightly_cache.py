"""The nightly's result cache: unchanged inputs reuse the last report; any change, or a killed run, does not."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from diff_fixtures import finding, make_report
from typer.testing import CliRunner

import neuronprobe.nightly.run as nightly
import neuronprobe.nightly.shards as nightly_shards
import neuronprobe.version
from neuronprobe.cli import app
from neuronprobe.file_reads import FileReads
from neuronprobe.nightly.cache import DEFAULT_CACHE_DIR, local_imports
from neuronprobe.nightly.run import SUMMARY_FILE
from neuronprobe.report.model import Report, load_report

runner = CliRunner()
TESTS = Path(__file__).parent
N1, N2 = "2025-06-01", "2025-06-02"


@pytest.fixture
def config(tmp_path: Path) -> Path:
    (tmp_path / "shared_util.py").write_text("def scale(x):\n    return x * 2\n")
    (tmp_path / "alpha.py").write_text("from shared_util import scale\n# stands in for a model file\n")
    (tmp_path / "beta.py").write_text("# stands in for a model file\n")
    path = tmp_path / "nightly.toml"
    path.write_text('[[models]]\nmodel = "alpha.py"\n\n[[models]]\nmodel = "beta.py"\n')
    return path


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The fake analysis records each model it analyses."""
    seen: list[str] = []

    def fake(model, cfg, require_backend, command_line):
        seen.append(model.name)
        report = make_report([finding("aten::nonzero", "dynamic_shape", 3)], model=model.name)
        return nightly.Observed(report, FileReads())  # as the recording worker returns it: this fake read no file

    monkeypatch.setattr(nightly, "isolated_analyze", lambda config, *rest: fake)
    return seen


def night(config: Path, date: str, *extra: str):
    return runner.invoke(app, ["nightly", str(config), "-o", str(config.parent / "reports"), "--date", date, "--jobs", "1", *extra])  # calls in order


def summary(config: Path, date: str) -> dict[str, str | None]:
    data = json.loads((config.parent / "reports" / date / SUMMARY_FILE).read_text())
    return {m["name"]: m["reused_from"] for m in data["models"]}


def test_an_unchanged_model_reuses_its_last_report_and_says_from_which_night(config, calls):
    assert night(config, N1).exit_code == 0
    assert calls == ["alpha", "beta"]
    assert len(list((config.parent / "reports" / DEFAULT_CACHE_DIR).glob("*.json"))) == 2
    second = night(config, N2)
    assert second.exit_code == 0, second.output
    assert calls == ["alpha", "beta"]  # nothing analysed on the second night
    assert summary(config, N2) == {"alpha": N1, "beta": N1}
    assert "[1/2] alpha: reused the report of 2025-06-01 (inputs unchanged)" in second.output
    report = load_report(str(config.parent / "reports" / N2 / "alpha.json"))
    assert [f.op for f in report.findings] == ["aten::nonzero"]
    assert report.baseline_diff is not None and report.baseline_diff.base_label.startswith(f"{N1} ")  # still diffed against the last night
    assert night(config, "2025-06-03", "--no-cache").exit_code == 0
    assert calls == ["alpha", "beta", "alpha", "beta"]
    assert summary(config, "2025-06-03") == {"alpha": None, "beta": None}


def test_an_edit_in_an_imported_helper_file_invalidates_only_its_model(config, calls):
    assert local_imports(config.parent / "alpha.py") == sorted([(config.parent / "alpha.py").resolve(), (config.parent / "shared_util.py").resolve()])
    assert night(config, N1).exit_code == 0
    (config.parent / "shared_util.py").write_text("def scale(x):\n    return x * 3\n")
    assert night(config, N2).exit_code == 0
    assert calls == ["alpha", "beta", "alpha"]
    assert summary(config, N2) == {"alpha": None, "beta": N1}


@pytest.mark.parametrize("change", ["neuronprobe", "rules", "option"])
def test_a_version_or_option_change_invalidates_every_model(config, calls, monkeypatch, change):
    assert night(config, N1).exit_code == 0
    if change == "neuronprobe":
        monkeypatch.setattr(neuronprobe.version, "__version__", "99.0.0")  # where every module reads the version
    elif change == "rules":
        monkeypatch.setattr(nightly_shards, "rules_version", lambda: "2099.1.1")
    else:
        config.write_text("timeout = 900\n" + config.read_text())
    assert night(config, N2).exit_code == 0
    assert calls == ["alpha", "beta", "alpha", "beta"]


def test_a_damaged_entry_is_never_used(config, calls):
    assert night(config, N1).exit_code == 0
    entries = sorted((config.parent / "reports" / DEFAULT_CACHE_DIR).glob("*.json"))
    data = entries[0].read_text()
    entries[0].write_text(data[: len(data) // 2])  # what a writer without atomic writes would leave when killed
    assert night(config, N2).exit_code == 0
    assert len(calls) == 3  # the damaged one analysed again, the other reused


KILLED_RUN = """\
import sys, time
sys.path.insert(0, {tests!r})
from diff_fixtures import make_report
import neuronprobe.nightly.run as nightly
from neuronprobe.cli import main

def analyse(model, config, require_backend, command_line):
    if model.name == "beta":  # the second model: signal the test, then wait to be killed
        open({marker!r}, "w").close()
        time.sleep(120)
    return make_report([], model=model.name)

nightly.analyze_model = analyse
sys.argv = ["neuronprobe", "nightly", {config!r}, "-o", {reports!r}, "--date", "2025-06-01", "--jobs", "1"]
main()
"""


def test_a_killed_run_leaves_no_cache_entry(config, calls, tmp_path):
    reports = config.parent / "reports"
    marker = tmp_path / "second-model-started"
    script = KILLED_RUN.format(tests=str(TESTS), marker=str(marker), config=str(config), reports=str(reports))
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the nightly never reached the second model"
            time.sleep(0.05)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert list(reports.rglob("*.json")) == []  # alpha was analysed, but neither its report nor its cache entry was written
    assert night(config, N1).exit_code == 0
    assert calls == ["alpha", "beta"]
    assert summary(config, N1) == {"alpha": None, "beta": None}


def test_a_cached_report_is_the_report_as_analysed(config, calls):
    """The entry holds the analysis before its baseline diff: a third night diffs against the second, not the first."""
    assert night(config, N1).exit_code == 0
    assert night(config, N2).exit_code == 0
    assert night(config, "2025-06-03").exit_code == 0
    assert calls == ["alpha", "beta"]
    third = load_report(str(config.parent / "reports" / "2025-06-03" / "beta.json"))
    assert third.baseline_diff is not None and third.baseline_diff.base_label.startswith(f"{N2} ")
    entry = json.loads(json.loads(next((config.parent / "reports" / DEFAULT_CACHE_DIR).glob("*.json")).read_text())["body"])
    assert Report.from_json(entry["report"]).baseline_diff is None and entry["date"] == N1
