"""Outputs never destroy inputs: refused before any work (exit 2), inputs byte-identical, no temp files left."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from diff_fixtures import make_report
from helpers import MODELS
from typer.testing import CliRunner

from neuronprobe.cli import app
from neuronprobe.errors import InputError
from neuronprobe.files import check_outputs, write_atomic

runner = CliRunner()


def _refused(args: list[str], *inputs: Path) -> str:
    before = {p: p.read_bytes() for p in inputs}
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in result.output, result.output
    for p, data in before.items():
        assert p.read_bytes() == data, p
    return lines[0]


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_analyze_refuses_to_write_over_its_model_file(tmp_path):
    model = tmp_path / "m.py"
    model.write_bytes((MODELS / "mlp.py").read_bytes())
    line = _refused(["analyze", str(model), "--json", str(model)], model)
    assert line == f"error: --json {model} is an input of this command ({model}); write the output elsewhere"
    assert _leftovers(tmp_path) == []


def test_analyze_refuses_a_json_path_that_is_also_the_html_report(tmp_path):
    model = MODELS / "mlp.py"
    out = tmp_path / "x.html"
    line = _refused(["analyze", str(model), "--json", str(out)], model)
    assert line == f"error: the HTML report {out} is also the --json output; give each output its own file"
    assert not out.exists()


def test_buckets_refuses_to_write_over_its_lengths(tmp_path):
    lengths = tmp_path / "L.txt"
    lengths.write_text("5\n9\n12\n")
    line = _refused(["buckets", str(lengths), "--json", str(lengths)], lengths)
    assert line.startswith(f"error: --json {lengths} is an input of this command")


@pytest.mark.parametrize("flag", ["--json", "--html"])
def test_diff_refuses_to_write_over_either_report(tmp_path, flag):
    base, new = tmp_path / "base.json", tmp_path / "new.json"
    base.write_text(make_report([]).to_json())
    new.write_text(make_report([]).to_json())
    for target in (base, new):
        line = _refused(["diff", str(base), str(new), flag, str(target)], base, new)
        assert line.startswith(f"error: {flag} {target} is an input of this command")
    assert _leftovers(tmp_path) == []


def test_a_device_or_a_folder_is_never_a_target(tmp_path):
    run = tmp_path / "run.json"
    run.write_text(make_report([]).to_json())
    line = _refused(["report", str(run), "-o", os.devnull], run)
    assert line == f"error: --output {os.devnull} exists and is a device; give a file path"
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)
    folder = tmp_path / "folder.html"
    folder.mkdir()
    line = _refused(["report", str(run), "-o", str(folder)], run)
    assert line == f"error: --output {folder} exists and is a folder; give a file path"
    assert folder.is_dir() and _leftovers(tmp_path) == []


def test_another_spelling_of_an_input_is_the_same_input(tmp_path):
    lengths = tmp_path / "L.txt"
    lengths.write_text("5\n")
    (tmp_path / "link.txt").symlink_to(lengths)
    with pytest.raises(InputError, match="is an input of this command"):
        check_outputs([("--json", tmp_path / "." / "link.txt")], [lengths])


def test_the_atomic_write_never_renames_over_a_non_regular_file_and_leaves_no_temp_file(tmp_path):
    folder = tmp_path / "out.json"
    folder.mkdir()
    with pytest.raises(OSError, match="is a folder, not overwritten"):
        write_atomic(folder, "{}")
    assert folder.is_dir() and _leftovers(tmp_path) == []


def test_an_interrupted_write_removes_its_temp_file_and_keeps_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "report.json"
    target.write_text("old")

    def interrupted(fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(target, "new")
    assert target.read_text() == "old" and _leftovers(tmp_path) == []
