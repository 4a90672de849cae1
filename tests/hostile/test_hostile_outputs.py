"""Hostile outputs: every way the issue found to write a report over an input, or two reports into one file.

Each case is refused before any work (exit 2, one line), and every input is byte-identical afterwards.
The per-option refusals (one per output option of every command) are in tests/test_output_safety.py.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from diff_fixtures import make_report
from helpers import MODELS, refused
from typer.testing import CliRunner

from neuronprobe.cli import app
from neuronprobe.nightly.run import SUMMARY_FILE, night_lock, write_night

runner = CliRunner()


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "sub").mkdir(parents=True)
    (repo / "train.py").write_text("import torch\nmodel = torch.nn.Linear(2, 2).cuda()\n")
    (repo / "sub" / "requirements.txt").write_text("torch==2.4.0+cu121\n")
    (repo / "sub" / ".gitignore").write_text("*.log\n")
    return repo


def test_audit_never_writes_over_a_file_it_audits(tmp_path):
    repo = _repo(tmp_path)
    files = [repo / "train.py", repo / "sub" / "requirements.txt", repo / "sub" / ".gitignore"]
    for target in files:
        for flag in ("--json", "--sarif"):
            line = refused(["audit", str(repo), flag, str(target)], *files)
            assert line == f"error: {flag} {target} is an input of this command ({target}); write the output elsewhere"


def test_audit_of_one_file_never_writes_over_it(tmp_path):
    a = tmp_path / "a.py"
    a.write_text("import torch\nx = torch.zeros(2).cuda()\n")
    assert refused(["audit", str(a), "--json", str(a)], a).startswith(f"error: --json {a} is an input")


def test_audit_json_never_overwrites_its_baseline(tmp_path):
    repo = _repo(tmp_path)
    baseline = tmp_path / "baseline.json"
    assert runner.invoke(app, ["audit", str(repo), "--json", str(baseline)]).exit_code == 0
    line = refused(["audit", str(repo), "--baseline", str(baseline), "--json", str(baseline)], baseline)
    assert line.startswith(f"error: --json {baseline} is an input of this command")


def test_audit_json_and_sarif_into_one_file_isrefused(tmp_path):
    repo = _repo(tmp_path)
    out = tmp_path / "X"
    line = refused(["audit", str(repo), "--json", str(out), "--sarif", str(out)])
    assert line == f"error: --sarif {out} is also the --json output; give each output its own file"
    assert not out.exists()


def test_audit_into_the_audited_folder_is_fine_when_the_report_is_a_new_file(tmp_path):
    repo = _repo(tmp_path)
    result = runner.invoke(app, ["audit", str(repo), "--json", str(repo / "audit.json")])
    assert result.exit_code == 0, result.output
    assert json.loads((repo / "audit.json").read_text())["findings"]


def test_analyze_never_writes_over_an_audited_file_or_its_rule_file(tmp_path):
    repo = _repo(tmp_path)
    model = MODELS / "mlp.py"
    line = refused(["analyze", str(model), "--audit", str(repo), "--json", str(repo / "train.py")], repo / "train.py")
    assert line.startswith(f"error: --json {repo / 'train.py'} is an input of this command")
    rules = tmp_path / "r.json"
    rules.write_text('{"rules": []}\n')
    line = refused(["analyze", str(model), "--rules", str(rules), "--json", str(rules)], rules)
    assert line.startswith(f"error: --json {rules} is an input of this command")
    # The HTML report beside the JSON is an output too: x.json writes x.html.
    html = tmp_path / "r.html"
    html.write_text("{}")
    line = refused(["analyze", str(model), "--rules", str(html), "--json", str(tmp_path / "r.json")], html)
    assert line.startswith(f"error: the HTML report {html} is an input of this command")


def test_an_empty_output_path_is_the_current_folder_andrefused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    lengths = tmp_path / "L.txt"
    lengths.write_text("5\n")
    assert refused(["buckets", str(lengths), "--json", ""], lengths) == "error: --json . exists and is a folder; give a file path"


# --- two nightlies, one folder and date --------------------------------------------------------


def _night(date: str, names: list[str]):
    from neuronprobe.nightly.run import ModelOutcome, NightlyResult, summary_json

    outcomes = []
    files = {}
    for n in names:
        o = ModelOutcome(name=n, report=make_report([], model=n), json_path=f"{date}/{n}.json", html_path=f"{date}/{n}.html")
        outcomes.append(o)
        files[o.json_path] = o.report.to_json()
    files[f"{date}/{SUMMARY_FILE}"] = summary_json(date, outcomes)
    return NightlyResult(date=date, outcomes=outcomes, files=files)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _summary_names(reports: Path, date: str) -> list[str]:
    return [m["name"] for m in json.loads((reports / date / SUMMARY_FILE).read_text())["models"]]


def test_two_nightlies_of_one_date_leave_a_summary_of_both(tmp_path):
    reports = tmp_path / "reports"
    write_night(_night("2026-01-02", ["beta"]), reports, _write)
    write_night(_night("2026-01-02", ["alpha", "gamma"]), reports, _write)
    assert _summary_names(reports, "2026-01-02") == ["alpha", "beta", "gamma"]
    # A rerun of a model replaces its entry, it does not add a second one.
    write_night(_night("2026-01-02", ["beta"]), reports, _write)
    assert _summary_names(reports, "2026-01-02") == ["alpha", "beta", "gamma"]


def test_a_second_nightly_waits_for_the_first_to_finish_writing(tmp_path):
    reports = tmp_path / "reports"
    write_night(_night("2026-01-02", ["alpha"]), reports, _write)
    done = threading.Event()

    def second() -> None:
        write_night(_night("2026-01-02", ["beta"]), reports, _write)
        done.set()

    with night_lock(reports):  # the first nightly is still writing
        worker = threading.Thread(target=second)
        worker.start()
        time.sleep(0.3)
        assert not done.is_set() and _summary_names(reports, "2026-01-02") == ["alpha"]
    worker.join(10)
    assert done.is_set() and _summary_names(reports, "2026-01-02") == ["alpha", "beta"]


def test_an_unreadable_summary_on_disk_is_replaced(tmp_path):
    reports = tmp_path / "reports"
    _write(reports / "2026-01-02" / SUMMARY_FILE, '{"models": [1, 2')
    write_night(_night("2026-01-02", ["alpha"]), reports, _write)
    assert _summary_names(reports, "2026-01-02") == ["alpha"]
