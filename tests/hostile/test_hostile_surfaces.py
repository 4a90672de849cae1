"""Issue 34, point 10: the surfaces of the corpus that had no case asserting all four things.

Frozen references given to ``parity --reference``, the precision and training options of
``parity``, ``nightly --jobs/--shard/--cache``, the folders given to ``nightly merge``, rule files
that are not files, and ``doctor``. Each case is a real command run in this process
(io_cli.refused_here): the exit code, one ``error:`` line and no traceback, every input
byte-identical afterwards, and the time bound (CPU seconds, and a watchdog that turns a hang
into a failure). None of these is about the process, so none starts an interpreter.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from helpers import MODELS
from io_cli import refused_here

BIG = "1" + "0" * 24


def _copy(tmp_path: Path, source: Path, name: str = "m.py") -> Path:
    target = tmp_path / name
    target.write_bytes(source.read_bytes())
    return target


# --- parity --reference: folders that are not what a saved reference is ------------------------


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A model file and the reference `parity --save-reference` froze for it."""
    from typer.testing import CliRunner

    from neuronprobe.cli import app

    folder = tmp_path_factory.mktemp("saved")
    model = _copy(folder, MODELS / "parity_reference.py")
    result = CliRunner().invoke(app, ["parity", str(model), "--save-reference", str(folder / "ref"), "-o", str(folder / "r"), "--no-html"])
    assert result.exit_code == 0, result.output
    return model, folder / "ref"


def _reference_copy(tmp_path: Path, saved: tuple[Path, Path]) -> tuple[Path, Path]:
    model, ref = saved
    copy = tmp_path / "ref"
    copy.mkdir()
    for f in ref.iterdir():
        (copy / f.name).write_bytes(f.read_bytes())
    return _copy(tmp_path, model), copy


def _fifo(path: Path) -> Path:
    path.unlink()
    os.mkfifo(path)
    return path


def _zero(path: Path) -> Path:
    path.unlink()
    path.symlink_to("/dev/zero")
    return path


def _truncated(path: Path) -> Path:
    path.write_bytes(path.read_bytes()[:40])
    return path


@pytest.mark.parametrize(
    ("name", "spoil", "words"),
    [
        ("manifest.json", _fifo, "manifest.json: is a pipe, not a reference manifest file"),
        ("manifest.json", _zero, "manifest.json: is a device, not a reference manifest file"),
        ("outputs.safetensors", _fifo, "outputs.safetensors: is a pipe, not a reference tensors file"),
        ("outputs.safetensors", _zero, "outputs.safetensors: is a device, not a reference tensors file"),
        ("outputs.safetensors", _truncated, "outputs.safetensors is not the file manifest.json describes (its sha256 differs)"),
    ],
    ids=["manifest-fifo", "manifest-dev-zero", "tensors-fifo", "tensors-dev-zero", "tensors-truncated"],
)
def test_parity_reference_folder_with_a_hostile_file_is_one_line(tmp_path, saved, name, spoil, words):
    model, ref = _reference_copy(tmp_path, saved)
    spoil(ref / name)
    regular = [model] + [p for p in ref.iterdir() if p.is_file() and not p.is_symlink()]
    line = refused_here(["parity", str(model), "--reference", str(ref), "-o", str(tmp_path / "r"), "--no-html"], regular)
    assert words in line, line
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("kind", ["file", "fifo", "missing"])
def test_parity_reference_that_is_no_folder_says_what_it_is(tmp_path, saved, kind):
    model, _ = _reference_copy(tmp_path, saved)
    given = tmp_path / "given"
    if kind == "file":
        given.write_text("not a reference\n")
    elif kind == "fifo":
        os.mkfifo(given)
    line = refused_here(["parity", str(model), "--reference", str(given), "-o", str(tmp_path / "r"), "--no-html"], [model, given])
    what = {"file": "exists and is not a folder", "fifo": "exists and is not a folder", "missing": "no such folder"}[kind]
    assert line.startswith(f"error: --reference {given}: {what}; a frozen reference is never recomputed"), line


# --- parity --precision, --sdk, --train ----------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "line"),
    [
        (["--precision", ""], "error: --precision '': give e.g. matmult:bf16 or dtype=bf16"),
        (["--precision", "matmult:bf4"], "error: --precision 'matmult:bf4' 'bf4': expected one of bf16, fp16, tf32, fp8_e4m3"),
        (["--auto-cast", "everything"], "error: --auto-cast 'everything': expected one of none, matmult, all"),
        (["--sdk", "2.x"], "error: --sdk '2.x': expected a Neuron SDK release such as 2.26 or 2.27.0"),
        (["--tolerance", "-1"], "error: --tolerance -1: give a relative tolerance above 0, e.g. 0.05"),
        (["--train", "--train-tolerance", "nan"], "error: --train-tolerance nan: use a finite number"),
        (["--train", "--seed", BIG], None),
    ],
)
def test_parity_precision_and_train_options_out_of_range_are_one_line(tmp_path, extra, line):
    model = _copy(tmp_path, MODELS / "mlp.py")
    got = refused_here(["parity", str(model), *extra, "-o", str(tmp_path / "r"), "--no-html"], [model])
    if line is None:
        assert got.startswith(f"error: --seed {BIG[:10]}...") and "a 64-bit integer" in got, got
    else:
        assert got == line
    assert not (tmp_path / "r").exists()


# --- nightly --jobs, --shard, --cache --------------------------------------------------------------


@pytest.fixture
def night(tmp_path: Path) -> list[Path]:
    model = _copy(tmp_path, MODELS / "mlp.py")
    config = tmp_path / "n.toml"
    config.write_text(f'[[models]]\nmodel = "{model.name}"\n')
    return [config, model]


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--jobs", "0"], "error: --jobs 0: use 1 to 256"),
        (["--jobs", BIG], "error: --jobs 1000000000...000000 (25 digits): use a whole number of at most"),
        (["--shard", "0/3"], "error: --shard 0/3: the index is 1-based and at most the count (3)"),
        (["--shard", "4/3"], "error: --shard 4/3: the index is 1-based and at most the count (3)"),
        (["--shard", f"1/{BIG}"], f"error: --shard 1/{BIG}: the count must be 1 to 256"),
        (["--shard", "1/2/3"], "error: --shard '1/2/3': write it INDEX/COUNT, e.g. 1/4"),
    ],
)
def test_nightly_jobs_and_shard_out_of_range_are_one_line(tmp_path, night, extra, words):
    config = night[0]
    line = refused_here(["nightly", str(config), "-o", str(tmp_path / "r"), "--date", "2026-01-02", *extra], night)
    assert line.startswith(words), line
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(("kind", "what"), [("file", "a file"), ("fifo", "a pipe"), ("dev-zero", "a device")])
def test_nightly_cache_that_is_not_a_folder_is_one_line(tmp_path, night, kind, what):
    cache = tmp_path / "cache"
    if kind == "file":
        cache.write_text("entries\n")
    elif kind == "fifo":
        os.mkfifo(cache)
    else:
        cache.symlink_to("/dev/zero")
    line = refused_here(["nightly", str(night[0]), "-o", str(tmp_path / "r"), "--date", "2026-01-02", "--cache", str(cache)], [*night, cache])
    assert line == f"error: --cache {cache} exists and is {what}; give a folder"
    assert not (tmp_path / "r").exists()


# --- nightly merge: shard folders that are not ---------------------------------------------------


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda t: ((t / "shard").write_text("a file\n"), t / "shard")[1], "shard: not a shard folder (it is not a folder)"),
        (lambda t: (os.mkfifo(t / "shard"), t / "shard")[1], "shard: not a shard folder (it is not a folder)"),
        (lambda t: ((t / "shard").mkdir(), os.mkfifo(t / "shard" / "_shard.json"), t / "shard")[2], "_shard.json: is a pipe, not a shard manifest file"),
        (lambda t: ((t / "shard").mkdir(), (t / "shard" / "_shard.json").symlink_to("/dev/zero"), t / "shard")[2], "is a device, not a shard manifest file"),
        (
            lambda t: ((t / "shard").mkdir(), (t / "shard" / "_shard.json").write_text("[" * 100_000 + "]" * 100_000), t / "shard")[2],
            "JSON nested too deep to be a shard manifest",
        ),
    ],
    ids=["a-file", "a-fifo", "manifest-fifo", "manifest-dev-zero", "manifest-deep"],
)
def test_nightly_merge_of_a_hostile_shard_folder_is_one_line(tmp_path, make, words):
    shard = make(tmp_path)
    inputs = [shard, shard / "_shard.json"] if shard.is_dir() else [shard]
    line = refused_here(["nightly", "merge", str(shard), "--history", str(tmp_path / "h")], inputs)
    assert words in line, line
    assert not (tmp_path / "h").exists()


# --- rule files that are not files ------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "folder"])
def test_a_rule_file_that_is_not_a_file_is_one_line(tmp_path, kind):
    model = _copy(tmp_path, MODELS / "mlp.py")
    rules = tmp_path / "rules.json"
    if kind == "fifo":
        os.mkfifo(rules)
    elif kind == "dev-zero":
        rules.symlink_to("/dev/zero")
    else:
        rules.mkdir()
    line = refused_here(["analyze", str(model), "--backend", "static", "--rules", str(rules), "-o", str(tmp_path / "r")], [model])
    assert line.startswith(f"error: {rules}: ") and ("not a regular file" in line or "is a" in line), line
    assert not (tmp_path / "r").exists()


# --- doctor -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "words"),
    [
        (PermissionError(errno.EACCES, "Permission denied", "/home/u/.cache/neuronprobe/xla-cpu"), "permission denied (Permission denied)"),
        (OSError(errno.ENAMETOOLONG, "File name too long", "/home/u/" + "a" * 5000), "(5008 characters): the path is too long for the file system"),
    ],
    ids=["unreadable", "name-too-long"],
)
def test_doctor_with_an_unusable_environment_folder_is_one_line(monkeypatch, error, words):
    from neuronprobe.backends import xla_env

    def unusable(*args: object, **kwargs: object) -> object:
        raise error

    monkeypatch.setattr(xla_env, "inspect_managed", unusable)
    line = refused_here(["doctor"], [])
    assert words in line, line
