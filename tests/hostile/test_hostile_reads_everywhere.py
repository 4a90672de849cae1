"""Issue 34.3, re-checked: the bounded reader for every file every command reads, not only traces.

A review of every read of a user path in ``neuronprobe/`` found five that still opened a path
with a blocking ``open`` and read it to its end: ``--support-table`` (a FIFO hung the command,
a link to ``/dev/zero`` grew its worker to 11 GB before the kernel killed it), ``setup
native-table --from-dump`` (a FIFO hung; ``/dev/zero`` reached 22 GB), the xla-cpu folder's
stamp and marker (``setup xla-cpu --path`` and ``doctor`` hung on a FIFO put there), a model
file that is a FIFO (``analyze`` hung until ``--timeout``; the nightly's cache key hung its
command for ever) and the rule file (refused, but by a check before the read, not on the open
descriptor). Each case runs the real command (io_cli.run_cli): exit 2, one line naming the
file and what it is, inputs byte-identical, within the subprocess bound.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import MODELS
from io_cli import refused_line, run_cli

from neuronprobe.file_reads import file_sha256


def _hostile(tmp_path: Path, kind: str, name: str) -> Path:
    path = tmp_path / name
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    return path


def _model(tmp_path: Path) -> Path:
    target = tmp_path / "m.py"
    target.write_bytes((MODELS / "mlp.py").read_bytes())
    return target


WHAT = {"fifo": "a pipe", "zero": "a device"}


@pytest.mark.parametrize("kind", ["fifo", "zero"])
@pytest.mark.parametrize("suffix", [".md", ".json"])
def test_a_support_table_that_is_not_a_file_is_one_line(tmp_path, kind, suffix):
    model = _model(tmp_path)
    table = _hostile(tmp_path, kind, f"compat{suffix}")
    line = refused_line(["analyze", str(model), "--stack", "native", "--target", "trn2", "--support-table", str(table), "-o", str(tmp_path / "r")], [model])
    what = "support table" if suffix == ".md" else "native support table"
    assert line == f"error: {table}: is {WHAT[kind]}, not a {what} file"
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_a_registrations_dump_that_is_not_a_file_is_one_line(tmp_path, kind):
    dump = _hostile(tmp_path, kind, "dump.json")
    out = tmp_path / "table.json"
    line = refused_line(["setup", "native-table", "--from-dump", str(dump), "--path", str(out)], [])
    assert line == f"error: --from-dump {dump}: is {WHAT[kind]}, not a registrations dump file"
    assert not out.exists()


def test_a_support_table_above_the_cap_is_refused_naming_the_cap(tmp_path, monkeypatch):
    from neuronprobe.errors import InputError
    from neuronprobe.support.native import table

    big = tmp_path / "compat.md"
    big.write_text("x" * 2048)
    monkeypatch.setattr(table, "MAX_TABLE_BYTES", 1024)
    with pytest.raises(InputError, match=r"larger than 1024 bytes \(neuronprobe's cap on one input file\)"):
        table.read_support_table(big)


@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_a_model_file_that_is_not_a_file_is_refused_before_its_import(tmp_path, kind):
    model = _hostile(tmp_path, kind, "m.py")
    line = refused_line(["analyze", str(model), "-o", str(tmp_path / "r")], [])
    assert line == f"error: {model}: is {WHAT[kind]}, not a Python model file"


def test_a_nightly_whose_model_is_a_fifo_ends_instead_of_hanging_on_its_cache_key(tmp_path):
    """The cache key is computed in the command's own process: it must never open the FIFO."""
    os.mkfifo(tmp_path / "m.py")
    config = tmp_path / "nightly.toml"
    config.write_text('[[models]]\nmodel = "m.py"\n')
    before = config.read_bytes()
    ran = run_cli(["nightly", str(config), "-o", str(tmp_path / "reports"), "--date", "2026-01-02", "--jobs", "1"], env={"NEURONPROBE_CACHE_KEY": "k" * 40})
    assert ran.code == 2, ran.stderr
    assert ran.stderr.strip().splitlines()[-1] == f"error: m: {tmp_path / 'm.py'}: is a pipe, not a Python model file"
    assert "Traceback" not in ran.stderr and config.read_bytes() == before
    assert not list((tmp_path / "reports").glob(".cache/*.json"))  # nothing cached for it


def test_the_cache_key_names_inputs_it_cannot_hash_and_never_reuses_them(tmp_path, monkeypatch):
    from diff_fixtures import make_report

    from neuronprobe.file_reads import FileReads
    from neuronprobe.nightly.cache import UNVERIFIABLE, ResultCache
    from neuronprobe.nightly.run import Analysed, load_config

    monkeypatch.setenv("NEURONPROBE_CACHE_KEY", "k" * 40)
    (tmp_path / "m.py").write_text("# a model\n")
    os.mkfifo(tmp_path / "vocab.txt")
    config = tmp_path / "nightly.toml"
    config.write_text('[[models]]\nmodel = "m.py"\ncache_inputs = ["vocab.txt"]\n')
    cfg = load_config(config)
    cache = ResultCache(tmp_path / "cache", cfg, None, "2026-01-02")
    model = cfg.models[0]
    assert cache.lookup(model) is None
    assert cache.inputs[model.name][UNVERIFIABLE] == [str(tmp_path / "vocab.txt")]
    cache.remember(model, Analysed(model.name, report=make_report([], model=model.name), reads=FileReads()))
    assert cache.pending == {} and cache.notes == [f"m: not cached: {tmp_path / 'vocab.txt'} is not a regular file the cache can hash"]


def test_the_cache_hash_of_a_file_is_judged_on_the_open_descriptor(tmp_path):
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="not a regular file"):
        file_sha256(str(fifo))
    assert file_sha256(str(tmp_path / "missing")) is None


def test_an_xla_cpu_folder_with_a_fifo_stamp_is_refused_not_waited_on(tmp_path):
    folder = tmp_path / "env"
    folder.mkdir()
    os.mkfifo(folder / ".neuronprobe-xla-env")
    line = refused_line(["setup", "xla-cpu", "--path", str(folder)], [])
    assert line.startswith(f"error: setup --path {folder}: the folder already holds files neuronprobe did not put there (.neuronprobe-xla-env)")


def test_doctor_with_a_fifo_marker_in_the_xla_cpu_folder_reports_it_incomplete(tmp_path):
    folder = tmp_path / "env"
    (folder / "venv").mkdir(parents=True)
    os.mkfifo(folder / "complete.json")
    os.mkfifo(folder / ".neuronprobe-xla-env")
    ran = run_cli(["doctor"], env={"NEURONPROBE_XLA_ENV": str(folder)})
    assert ran.code == 0, ran.stderr
    assert "incomplete" in " ".join(ran.stdout.split())


@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_a_rule_file_that_is_not_a_file_is_judged_on_the_open_descriptor(tmp_path, kind):
    model = _model(tmp_path)
    rules = _hostile(tmp_path, kind, "rules.json")
    line = refused_line(["analyze", str(model), "--rules", str(rules), "-o", str(tmp_path / "r")], [model])
    assert line == f"error: {rules}: is {WHAT[kind]}, not a rule file"


def test_a_jsonl_trace_is_kept_by_column_not_as_a_dict_per_row(tmp_path):
    """The JSONL reader's memory per request: a dict per row cost ~560 bytes, so a 1 GiB trace of short
    rows (24M requests, under MAX_TRACE_ROWS) needed ~14 GB before any cap fired; by column it is ~140."""
    import tracemalloc

    import pandas  # noqa: F401 - imported before the count: the reader's memory, not the import's

    from neuronprobe.shape_buckets.decode_trace import _jsonl

    rows = 50_000
    path = tmp_path / "t.jsonl"
    path.write_text("".join(f'{{"prompt_tokens": {1000 + i % 5000}, "output_tokens": {300 + i % 700}}}\n' for i in range(rows)))
    data = path.read_bytes()
    tracemalloc.start()
    try:
        frame, lines = _jsonl(path, data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(frame) == rows and lines[-1] == rows and frame["prompt_tokens"].dtype.kind == "i"
    assert peak / rows < 300, f"{peak / rows:.0f} bytes per request"


def test_a_jsonl_trace_names_its_lines_and_a_missing_key_as_before(tmp_path):
    from neuronprobe.errors import InputError
    from neuronprobe.shape_buckets.decode_trace import read_decode_trace

    path = tmp_path / "t.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"prompt_tokens": 10, "output_tokens": 5}\r\n\n{"prompt_tokens": 7, "output_tokens": 2, "t": 1}\n')
    trace = read_decode_trace(path)
    assert trace.prompts.tolist() == [10, 7] and trace.outputs.tolist() == [5, 2]
    path.write_bytes(b'{"prompt_tokens": 10, "output_tokens": 5}\n\n{"prompt_tokens": 7}\n')
    with pytest.raises(InputError, match=r"line 3"):
        read_decode_trace(path)
    path.write_bytes(b'{"prompt_tokens": 10, "output_tokens": 5}\n{"prompt_tokens": \xff}\n')
    with pytest.raises(InputError, match=r"not UTF-8 at byte 60"):
        read_decode_trace(path)
