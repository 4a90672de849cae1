"""The nightly result cache as a trust boundary (issue 34.2).

Whoever can write the cache folder must not decide what the night reports: an entry is
reused only when its HMAC verifies under a key kept outside that folder, and only while
every file its analysis read still has the content it had. The analyses here run in the
real forked worker (``nightly.analyze_model`` is replaced by a small function that reads
files, so no torch capture is needed), which is where the reads are recorded.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from pathlib import Path

import pytest
from diff_fixtures import finding, make_report
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from io_cli import bounded
from typer.testing import CliRunner

import neuronprobe.nightly.run as nightly
from neuronprobe.cli import app
from neuronprobe.file_reads import FileReads, ReadRecorder
from neuronprobe.nightly.cache import CACHE_FORMAT, DEFAULT_CACHE_DIR, KEY_ENV, ResultCache, Secret, key_file_path, load_secret, sign
from neuronprobe.nightly.run import SUMMARY_FILE, Analysed, load_config
from neuronprobe.report.model import load_report

runner = CliRunner()
N1, N2 = "2025-06-01", "2025-06-02"
KEY = "k" * 64


@pytest.fixture
def config(tmp_path: Path) -> Path:
    (tmp_path / "vocab.txt").write_text("hello world\n")
    (tmp_path / "weights.bin").write_bytes(b"\x00" * 64)
    (tmp_path / "reader.py").write_text("# stands in for a model that reads vocab.txt\n")
    path = tmp_path / "nightly.toml"
    path.write_text('[[models]]\nmodel = "reader.py"\ncache_inputs = ["weights.bin"]\n')
    return path


@pytest.fixture
def analysed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The analysis (in the real worker) reads vocab.txt and probes an optional file; its report names the vocabulary.

    Each analysis appends a line to the returned log (the worker is a forked child: a list would not come back).
    """
    log = tmp_path / "analysed.log"
    monkeypatch.setenv(KEY_ENV, KEY)

    def analyse(model, config, require_backend, command_line):
        vocab = (tmp_path / "vocab.txt").read_text().split()[0]
        with contextlib.suppress(FileNotFoundError):  # an optional file, opened if there (a probe by os.stat alone raises no audit event)
            (tmp_path / "extra.json").read_text()
        with open(log, "a") as fh:  # a write: not an input
            fh.write(model.name + "\n")
        return make_report([finding(f"aten::{vocab}", "dynamic_shape", 3)], model=model.name)

    monkeypatch.setattr(nightly, "analyze_model", analyse)
    return log


def night(config: Path, date: str, *extra: str):
    return runner.invoke(app, ["nightly", str(config), "-o", str(config.parent / "reports"), "--date", date, "--jobs", "1", *extra])


def count(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def reused(config: Path, date: str) -> str | None:
    data = json.loads((config.parent / "reports" / date / SUMMARY_FILE).read_text())
    return data["models"][0]["reused_from"]


def entry_file(config: Path) -> Path:
    (entry,) = (config.parent / "reports" / DEFAULT_CACHE_DIR).glob("*.json")
    return entry


def test_an_unchanged_night_is_reused_and_the_reads_are_recorded(config, analysed):
    assert night(config, N1).exit_code == 0
    body = json.loads(json.loads(entry_file(config).read_text())["body"])
    vocab = str(config.parent / "vocab.txt")
    assert body["reads"][vocab] == hashlib.sha256(b"hello world\n").hexdigest()
    assert body["reads"][str(config.parent / "extra.json")] is None  # probed, absent: its creation changes the result
    assert str(config.parent / "analysed.log") not in body["reads"]  # written, not read
    second = night(config, N2)
    assert second.exit_code == 0, second.output
    assert count(analysed) == 1 and reused(config, N2) == N1


def test_a_changed_data_file_the_model_reads_is_analysed_again(config, analysed):
    assert night(config, N1).exit_code == 0
    (config.parent / "vocab.txt").write_text("changed words\n")
    assert night(config, N2).exit_code == 1  # the new data's finding is a regression against the last night
    assert count(analysed) == 2 and reused(config, N2) is None
    report = load_report(str(config.parent / "reports" / N2 / "reader.json"))
    assert [f.op for f in report.findings] == ["aten::changed"]  # tonight's data, not the cached night's


def test_a_file_the_model_probed_that_now_exists_is_analysed_again(config, analysed):
    assert night(config, N1).exit_code == 0
    (config.parent / "extra.json").write_text("{}")
    assert night(config, N2).exit_code == 0
    assert count(analysed) == 2 and reused(config, N2) is None


def test_a_changed_declared_cache_input_is_analysed_again(config, analysed):
    assert night(config, N1).exit_code == 0
    (config.parent / "weights.bin").write_bytes(b"\x01" * 64)  # read by native code: named in cache_inputs
    assert night(config, N2).exit_code == 0
    assert count(analysed) == 2 and reused(config, N2) is None


def test_an_edited_report_with_its_hash_recomputed_is_not_reused(config, analysed):
    assert night(config, N1).exit_code == 0
    file = entry_file(config)
    entry = json.loads(file.read_text())
    body = json.loads(entry["body"])
    body["report"] = body["report"].replace("aten::hello", "aten::forged")
    entry["body"] = json.dumps(body)
    entry["sha256"] = hashlib.sha256(body["report"].encode()).hexdigest()  # what defeated the old cache
    file.write_text(json.dumps(entry))
    assert night(config, N2).exit_code == 0
    assert count(analysed) == 2 and reused(config, N2) is None
    report = load_report(str(config.parent / "reports" / N2 / "reader.json"))
    assert [f.op for f in report.findings] == ["aten::hello"]


def test_an_entry_signed_with_another_key_or_an_old_format_is_not_reused(config, analysed, monkeypatch):
    assert night(config, N1).exit_code == 0
    file = entry_file(config)
    entry = json.loads(file.read_text())
    entry["hmac"] = sign(b"x" * 64, entry["body"])  # an attacker's own key
    file.write_text(json.dumps(entry))
    assert night(config, N2).exit_code == 0
    assert count(analysed) == 2
    old = json.loads(entry["body"])  # the format-1 layout: the body's fields at the top with a plain sha256
    old.update(format=1, sha256=hashlib.sha256(old["report"].encode()).hexdigest())
    entry_file(config).write_text(json.dumps(old))
    assert night(config, "2025-06-03").exit_code == 0
    assert count(analysed) == 3


def test_an_entry_of_the_format_before_the_native_reader_check_is_not_reused(config, analysed, monkeypatch):
    """Format 2 cached model files that loaded safetensors: such an entry, validly signed, must not outlive the upgrade."""
    import neuronprobe.nightly.cache as cache_module

    now = (cache_module.CACHE_FORMAT, cache_module._MAC_CONTEXT)
    monkeypatch.setattr(cache_module, "CACHE_FORMAT", 2)
    monkeypatch.setattr(cache_module, "_MAC_CONTEXT", b"neuronprobe result cache entry v2\0")
    assert night(config, N1).exit_code == 0
    assert json.loads(entry_file(config).read_text())["format"] == 2
    monkeypatch.setattr(cache_module, "CACHE_FORMAT", now[0])
    monkeypatch.setattr(cache_module, "_MAC_CONTEXT", now[1])
    assert night(config, N2).exit_code == 0
    assert count(analysed) == 2 and reused(config, N2) is None


def test_another_key_misses_every_entry(config, analysed, monkeypatch):
    assert night(config, N1).exit_code == 0
    monkeypatch.setenv(KEY_ENV, "z" * 64)  # a CI cache restored where another secret is configured
    assert night(config, N2).exit_code == 0
    assert count(analysed) == 2


def test_without_an_env_key_a_private_key_file_is_made_once(config, analysed, monkeypatch, tmp_path):
    monkeypatch.delenv(KEY_ENV)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home-config"))
    assert night(config, N1).exit_code == 0
    key = key_file_path()
    assert key == tmp_path / "home-config" / "neuronprobe" / "cache.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and len(key.read_text().strip()) == 64
    first = key.read_bytes()
    assert night(config, N2).exit_code == 0
    assert key.read_bytes() == first and count(analysed) == 1  # the same key: the entry verifies


@pytest.mark.parametrize("problem", ["shared", "short", "inside", "short-env"])
def test_an_untrustworthy_key_turns_the_cache_off_and_says_why(config, analysed, monkeypatch, tmp_path, problem):
    monkeypatch.delenv(KEY_ENV)
    home = tmp_path / "home-config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    key = home / "neuronprobe" / "cache.key"
    key.parent.mkdir(parents=True)
    extra: tuple[str, ...] = ()
    if problem == "shared":
        key.write_text("a" * 64)
        key.chmod(0o644)
        why = "readable or writable by others"
    elif problem == "short":
        key.write_text("abc")
        key.chmod(0o600)
        why = "fewer than 32 characters"
    elif problem == "inside":
        extra = ("--cache", str(home))
        why = "inside the cache folder"
    else:
        monkeypatch.setenv(KEY_ENV, "short")
        why = "shorter than 32 characters"
    for date in (N1, N2):
        result = night(config, date, *extra)
        assert result.exit_code == 0, result.output
        assert "note: the result cache is off: " in result.output and why in result.output
    assert count(analysed) == 2
    cache = home if problem == "inside" else config.parent / "reports" / DEFAULT_CACHE_DIR
    assert not list(cache.glob("*.json"))


def test_an_analysis_not_recorded_by_the_worker_is_not_cached_and_the_night_says_so(config, monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    monkeypatch.setattr(nightly, "isolated_analyze", lambda cfg, *rest: lambda model, *a: make_report([], model=model.name))
    result = night(config, N1)
    assert result.exit_code == 0
    assert "note: reader: not cached: its analysis did not run in a worker that records the files it reads" in result.output
    assert not (config.parent / "reports" / DEFAULT_CACHE_DIR).exists() or not list((config.parent / "reports" / DEFAULT_CACHE_DIR).glob("*.json"))


def test_a_pipe_the_model_read_keeps_it_out_of_the_cache(tmp_path):
    fifo = tmp_path / "feed"
    os.mkfifo(fifo)
    (tmp_path / "data.txt").write_text("x")
    recorder = ReadRecorder(private_tmp=str(tmp_path / "private")).start()
    try:
        os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
        (tmp_path / "data.txt").read_text()
        with open(tmp_path / "written.txt", "w") as fh:
            fh.write("y")
    finally:
        reads = recorder.snapshot()  # stops recording (an audit hook cannot be removed)
    assert reads.unverifiable == [str(fifo)]
    assert reads.files == {str(tmp_path / "data.txt"): hashlib.sha256(b"x").hexdigest()}


@pytest.mark.parametrize(
    ("how", "read"),
    [("r+b", True), ("a+", True), (os.O_RDWR, True), (os.O_RDONLY, True), ("w", False), ("a", False), ("xb", False), (os.O_RDWR | os.O_TRUNC, False)],
)
def test_a_file_opened_to_read_and_write_is_a_read(tmp_path, how, read):
    """`np.memmap(path, mode="r+")` opens with "r+b" and reads the data: it was not recorded, so its change reused a stale night."""
    data = tmp_path / "table.bin"
    if how != "xb":
        data.write_bytes(b"rows")
    recorder = ReadRecorder(private_tmp=str(tmp_path / "private")).start()
    try:
        if isinstance(how, str):
            with open(data, how):
                pass
        else:
            os.close(os.open(data, how))
    finally:
        reads = recorder.snapshot()
    assert (str(data) in reads.files) is read, reads.files


def _native_night(folder: Path, date: str) -> tuple[int, str, list[Path]]:
    """A real `neuronprobe nightly` process: its exit code, its output and the cache entries after it."""
    from io_cli import run_cli

    ran = run_cli(["nightly", str(folder / "nightly.toml"), "-o", str(folder / "reports"), "--date", date, "--jobs", "1"], env={KEY_ENV: KEY}, bound_s=300)
    return ran.code, ran.stdout + ran.stderr, sorted((folder / "reports" / DEFAULT_CACHE_DIR).glob("*.json"))


def _checkpoint(folder: Path, rows: int) -> None:
    import torch
    from safetensors.torch import save_file

    save_file({"w": torch.ones(rows, 4)}, str(folder / "w.safetensors"))


def test_a_model_whose_code_loaded_a_native_reader_is_cached_only_once_its_files_are_named(tmp_path):
    """A checkpoint read by safetensors (Rust opens it, no audit event) changed after a cached night: the stale report
    was reused. Now the cache stays off for that model and says why, until `cache_inputs` names the files it reads."""
    from io_cli import IO_MODELS

    (tmp_path / "ckpt.py").write_bytes((IO_MODELS / "native_checkpoint.py").read_bytes())
    _checkpoint(tmp_path, 4)
    (tmp_path / "nightly.toml").write_text('[[models]]\nmodel = "ckpt.py"\n')
    code, output, entries = _native_night(tmp_path, N1)
    assert code == 0, output
    assert "note: ckpt: not cached: its code loaded safetensors, which open files in native code where the cache cannot see them" in output
    assert entries == []
    (tmp_path / "nightly.toml").write_text('[[models]]\nmodel = "ckpt.py"\ncache_inputs = ["w.safetensors"]\n')
    code, output, entries = _native_night(tmp_path, N2)
    assert code == 0 and "not cached" not in output and len(entries) == 1, output
    _checkpoint(tmp_path, 8)  # another checkpoint: another model
    code, output, _ = _native_night(tmp_path, "2025-06-03")
    assert "reused the report" not in output, output
    summary = json.loads((tmp_path / "reports" / "2025-06-03" / SUMMARY_FILE).read_text())
    assert summary["models"][0]["reused_from"] is None


def test_cache_inputs_must_exist(tmp_path):
    (tmp_path / "m.py").write_text("")
    path = tmp_path / "n.toml"
    path.write_text('[[models]]\nmodel = "m.py"\ncache_inputs = ["missing.bin"]\n')
    result = runner.invoke(app, ["nightly", str(path), "-o", str(tmp_path / "r"), "--date", N1])
    assert result.exit_code == 2
    assert "cache_inputs" in result.output and "missing.bin" in result.output and "Traceback" not in result.output


# --- fuzzing the entry reader ------------------------------------------------------------

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _cache(tmp_path: Path) -> tuple[ResultCache, object, Path]:
    (tmp_path / "m.py").write_text("# model\n")
    (tmp_path / "n.toml").write_text('[[models]]\nmodel = "m.py"\n')
    cfg = load_config(tmp_path / "n.toml")
    cache = ResultCache(tmp_path / "cache", cfg, None, N2, secret=Secret(KEY.encode(), "test"))
    model = cfg.models[0]
    return cache, model, cache.folder / f"{cache.key_of(model)}.json"


def _genuine(tmp_path: Path) -> tuple[ResultCache, object, Path, str]:
    cache, model, file = _cache(tmp_path)
    writer = ResultCache(tmp_path / "cache", cache.config, None, N1, secret=Secret(KEY.encode(), "test"))
    writer.remember(model, Analysed(model.name, report=make_report([finding("aten::nonzero", "dynamic_shape", 3)], model="m"), reads=FileReads()))
    file.parent.mkdir(exist_ok=True)
    (content,) = writer.pending.values()
    file.write_text(content)
    assert cache.lookup(model) is not None  # the genuine entry verifies
    return cache, model, file, content


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@FUZZ
@given(data=st.binary(max_size=400) | json_values.map(lambda v: json.dumps(v).encode()))
def test_fuzz_any_bytes_as_an_entry_are_a_miss(tmp_path_factory, data):
    cache, model, file = _cache(tmp_path_factory.mktemp("c"))
    file.parent.mkdir(exist_ok=True)
    file.write_bytes(data)
    with bounded(cpu_s=2):  # CPU seconds: a loaded machine stretches the wall clock, not these
        assert cache.lookup(model) is None
    assert file.read_bytes() == data


@FUZZ
@given(position=st.integers(min_value=0), byte=st.integers(min_value=0, max_value=255))
def test_fuzz_one_changed_byte_of_a_genuine_entry_is_never_trusted_as_different(tmp_path_factory, position, byte):
    cache, model, file, content = _genuine(tmp_path_factory.mktemp("g"))
    raw = bytearray(content.encode())
    position %= len(raw)
    raw[position] = byte
    file.write_bytes(bytes(raw))
    with bounded(cpu_s=2):
        found = cache.lookup(model)  # a miss, or (a change JSON parses back to the same body and HMAC) the genuine report
    assert file.read_bytes() == bytes(raw)
    if found is not None:
        entry = json.loads(bytes(raw))
        assert entry["body"] == json.loads(content)["body"] and entry["hmac"] == json.loads(content)["hmac"]
        assert [f.op for f in found.report.findings] == ["aten::nonzero"] and found.reused_from == N1


@FUZZ
@given(fields=st.dictionaries(st.sampled_from(["format", "body", "hmac", "extra"]), json_values, max_size=4))
def test_fuzz_entries_with_hostile_fields_are_a_miss(tmp_path_factory, fields):
    cache, model, file, content = _genuine(tmp_path_factory.mktemp("f"))
    entry = json.loads(content)
    entry.update(fields)
    file.write_text(json.dumps(entry))
    with bounded(cpu_s=2):
        found = cache.lookup(model)
    assert file.read_text() == json.dumps(entry)
    if found is not None:  # only an entry whose body and hmac are unchanged may verify
        assert entry["body"] == json.loads(content)["body"] and entry["hmac"] == json.loads(content)["hmac"] and entry["format"] == CACHE_FORMAT


def test_the_env_key_wins_over_the_key_file(monkeypatch, tmp_path):
    monkeypatch.setenv(KEY_ENV, KEY)
    assert load_secret(tmp_path) == Secret(KEY.encode(), f"${KEY_ENV}")
