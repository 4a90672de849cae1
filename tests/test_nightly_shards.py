"""`nightly --shard i/n` and `nightly merge`: a sharded night writes what a serial night writes.

The analysis is replaced by hand-built reports (tests/diff_fixtures.py), one per model
name, so that a serial night and a sharded one see exactly the same findings and
the comparison is about sharding and merging alone (tests/test_nightly_jobs.py runs
real workers).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from diff_fixtures import finding, make_report
from typer.testing import CliRunner

import neuronprobe.nightly.run as nightly
from neuronprobe.cli import app
from neuronprobe.errors import ConfigError
from neuronprobe.nightly.run import INDEX_FILE, SUMMARY_FILE
from neuronprobe.nightly.shards import MANIFEST_FILE, assign_shards, last_durations, parse_shard
from neuronprobe.report.model import Report

runner = CliRunner()
NAMES = [f"m{i:02d}" for i in range(10)]
NIGHT1, NIGHT2 = "2025-06-01", "2025-06-02"


def write_config(folder: Path, names: list[str], extra: str = "") -> Path:
    """A config of one stand-in model file per name (the analysis is replaced)."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = [extra]
    for name in names:
        (folder / f"{name}.py").write_text(f"# stands in for the model file of {name}\n")
        lines.append(f'[[models]]\nmodel = "{name}.py"\n')
    path = folder / "nightly.toml"
    path.write_text("\n".join(lines))
    return path


def report_of(name: str, night: str) -> Report:
    """Each model's own findings; on the second night m03 gains a CPU fallback (a regression)."""
    index = int(name[1:])
    findings = [finding("aten::nonzero", "dynamic_shape", 10 + k) for k in range(index % 3)]
    if night == NIGHT2 and name == "m03":
        findings.append(finding("aten::_unique2", "cpu_fallback", 40))
    return make_report(findings, model=name, support=100.0 - len(findings))


@pytest.fixture
def serve(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Replace the analysis in this process; ``state["night"]`` picks the night's reports."""
    state = {"night": NIGHT1}

    def fake(model, config, require_backend, command_line):
        return Report.from_json(report_of(model.name, state["night"]).to_json())

    monkeypatch.setattr(nightly, "isolated_analyze", lambda config, *rest: fake)
    return state


def invoke(*args: str):
    if args[0] != "merge" and "--shard" not in args:
        args = (*args, "--no-cache")  # the fake analysis changes reports, not files: no result cache
    return runner.invoke(app, ["nightly", *args])


def files_of(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` by relative path, the summary without its timings (``seconds``)."""
    out = {}
    for file in sorted(folder.rglob("*")):
        if not file.is_file() or file.name == nightly.LOCK_FILE:
            continue
        data = file.read_bytes()
        if file.name == SUMMARY_FILE:
            summary = json.loads(data)
            for entry in summary["models"]:
                assert isinstance(entry.pop("seconds"), float)
            data = json.dumps(summary).encode()
        out[str(file.relative_to(folder))] = data
    return out


def run_shards(config: Path, where: Path, count: int, *extra: str) -> list[Path]:
    folders = []
    for index in range(1, count + 1):
        folder = where / f"shard-{index}"
        result = invoke(str(config), "--shard", f"{index}/{count}", "-o", str(folder), "--date", NIGHT2, *extra)
        assert result.exit_code == 0, result.output
        folders.append(folder)
    return folders


@pytest.mark.parametrize("count", [1, 3, 7])
def test_sharded_then_merged_writes_what_the_serial_night_writes(tmp_path, serve, count):
    config = write_config(tmp_path / "cfg", NAMES)
    serial, merged = tmp_path / "serial", tmp_path / "merged"
    assert invoke(str(config), "-o", str(serial), "--date", NIGHT1, "--jobs", "1").exit_code == 0
    shutil.copytree(serial, merged)  # both continue from the same history
    serve["night"] = NIGHT2
    alone = invoke(str(config), "-o", str(serial), "--date", NIGHT2, "--jobs", "1")
    assert alone.exit_code == 1, alone.output  # m03 regressed
    shards = run_shards(config, tmp_path / "shards", count)
    for folder in shards:  # a shard writes its reports and manifest: no index, no history
        assert {p.name for p in folder.iterdir()} <= {*(f"{n}.json" for n in NAMES), MANIFEST_FILE}
    together = invoke("merge", *map(str, shards), "--history", str(merged))
    assert together.exit_code == 1, together.output
    assert "regression: m03: " in together.output
    expected = files_of(serial)
    assert f"{NIGHT2}/m03.json" in expected and INDEX_FILE in expected
    assert files_of(merged) == expected


def test_merging_the_same_shards_twice_changes_nothing(tmp_path, serve):
    config = write_config(tmp_path / "cfg", NAMES)
    history = tmp_path / "history"
    assert invoke(str(config), "-o", str(history), "--date", NIGHT1).exit_code == 0
    serve["night"] = NIGHT2
    shards = run_shards(config, tmp_path / "shards", 3)
    first = invoke("merge", *map(str, shards), "--history", str(history))
    once = {k: v for k, v in files_of(history).items()}
    raw = (history / NIGHT2 / SUMMARY_FILE).read_bytes()
    second = invoke("merge", *map(str, shards), "--history", str(history))
    assert (first.exit_code, second.exit_code) == (1, 1)
    assert files_of(history) == once
    assert (history / NIGHT2 / SUMMARY_FILE).read_bytes() == raw  # timings come from the shards: same bytes


def test_a_model_added_at_the_end_moves_no_other_model():
    for count in (1, 3, 7, 256):
        before = assign_shards(NAMES, count)
        after = assign_shards([*NAMES, "zz-new"], count)
        assert {n: after[n] for n in NAMES} == before
        assert set(before.values()) <= set(range(count))
    spread = assign_shards(NAMES, 3)
    assert len(set(spread.values())) == 3  # ten names by hash do use all three shards


def test_durations_balance_shards_by_the_longest_processing_time_rule():
    durations = {"a": 10.0, "b": 9.0, "c": 6.0, "d": 5.0, "e": 4.0}
    shards = assign_shards(list(durations), 2, durations)
    # LPT: a->0, b->1, c->1 (9 < 10), d->0 (10 < 15), e->0 (15 == 15, lowest index)
    assert shards == {"a": 0, "b": 1, "c": 1, "d": 0, "e": 0}
    with_new = assign_shards([*durations, "new"], 2, durations)
    assert {n: with_new[n] for n in durations} == shards  # an untimed model goes by hash and moves none


def test_a_shard_with_history_reads_the_last_durations(tmp_path, serve):
    config = write_config(tmp_path / "cfg", NAMES)
    history = tmp_path / "history"
    assert invoke(str(config), "-o", str(history), "--date", NIGHT1).exit_code == 0
    durations = last_durations(history)
    assert sorted(durations) == NAMES
    expected = assign_shards(NAMES, 2, durations)
    folder = tmp_path / "shard-1"
    assert invoke(str(config), "--shard", "1/2", "-o", str(folder), "--history", str(history), "--date", NIGHT2).exit_code == 0
    manifest = json.loads((folder / MANIFEST_FILE).read_text())
    assert [m["name"] for m in manifest["models"]] == [n for n in NAMES if expected[n] == 0]


@pytest.mark.parametrize(
    ("text", "message"),
    [("0/3", "1-based"), ("4/3", "1-based"), ("1/257", "1 to 256"), ("1/0", "1 to 256"), ("two/3", "INDEX/COUNT")],
)
def test_a_bad_shard_is_one_sentence_and_exit_2(tmp_path, serve, text, message):
    config = write_config(tmp_path / "cfg", NAMES)
    with pytest.raises(ConfigError, match=message):
        parse_shard(text)
    result = invoke(str(config), "--shard", text, "-o", str(tmp_path / "out"))
    assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


def _refused(result, *names: str) -> str:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    for name in names:
        assert name in result.output, result.output
    return result.output


def test_a_missing_duplicated_or_foreign_shard_is_refused_naming_it(tmp_path, serve):
    config = write_config(tmp_path / "cfg", NAMES)
    one, two, three = run_shards(config, tmp_path / "shards", 3)
    history = tmp_path / "history"
    _refused(invoke("merge", str(one), str(three), "--history", str(history)), "shard 2/3 is missing")
    _refused(invoke("merge", str(one), str(two), str(three), str(two), "--history", str(history)), "shard 2/3 is given twice", str(two))
    other = write_config(tmp_path / "other", [*NAMES, "m10"])  # another config: another hash
    (foreign,) = [f for f in run_shards(other, tmp_path / "foreign", 3) if f.name == "shard-2"]
    _refused(invoke("merge", str(one), str(foreign), str(three), "--history", str(history)), str(foreign), "is foreign: its config")
    (two / MANIFEST_FILE).unlink()  # a shard killed before its manifest was written
    _refused(invoke("merge", str(one), str(two), str(three), "--history", str(history)), str(two), "not a shard folder")
    assert not history.exists()  # nothing written on a refusal


def test_a_shard_from_another_neuronprobe_version_is_foreign(tmp_path, serve):
    config = write_config(tmp_path / "cfg", NAMES)
    one, two = run_shards(config, tmp_path / "shards", 2)
    manifest = json.loads((two / MANIFEST_FILE).read_text())
    manifest["neuronprobe"] = "0.0.1"
    (two / MANIFEST_FILE).write_text(json.dumps(manifest))
    _refused(invoke("merge", str(one), str(two), "--history", str(tmp_path / "h")), str(two), "neuronprobe version is '0.0.1'")


def test_a_failed_model_in_a_shard_fails_the_merged_night(tmp_path, serve, monkeypatch):
    from neuronprobe.errors import ModelLoadError

    def broken(model, config, require_backend, command_line):
        if model.name == "m05":
            raise ModelLoadError(f"{model.model}:3: the model code raised ValueError: no weights")
        return Report.from_json(report_of(model.name, NIGHT1).to_json())

    monkeypatch.setattr(nightly, "isolated_analyze", lambda config, *rest: broken)
    config = write_config(tmp_path / "cfg", NAMES)
    shards = run_shards(config, tmp_path / "shards", 2)
    result = invoke("merge", *map(str, shards), "--history", str(tmp_path / "h"))
    assert result.exit_code == 2, result.output
    assert "error: m05: " in result.output and "no weights" in result.output
    summary = json.loads((tmp_path / "h" / NIGHT2 / SUMMARY_FILE).read_text())
    assert [m["name"] for m in summary["models"] if m["status"] == "failed"] == ["m05"]
