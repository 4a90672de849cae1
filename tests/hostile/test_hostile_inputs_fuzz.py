"""Issue 34, point 10: hypothesis fuzzing of the readers of traces, step times, and manifests (shards, references).

Each reader runs in-process on generated input and either parses or raises the typed user error
(InputError, ConfigError: exit 2); never another exception (exit 3). The file is byte-identical
afterwards, and each example runs within the time bound (io_cli.bounded: CPU seconds, and a
watchdog for a hang). Example counts stay modest: the suite must stay fast.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from io_cli import bounded

from neuronprobe.errors import ConfigError, InputError
from neuronprobe.files import read_input
from neuronprobe.jsonio import dumps, loads_strict
from neuronprobe.shape_buckets.decode_trace import DecodeTrace, read_decode_trace
from neuronprobe.shape_buckets.reading import LengthData, read_lengths, read_step_times

FUZZ = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

# Numbers as a hostile file spells them: huge, negative, fractional, non-finite, exotic notation.
NUMBER_TEXT = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["nan", "NaN", "inf", "-inf", "Infinity", "1e999", "0x10", "1_000", "", " ", "٣", "1e-400", "9" * 400, "true", "null"]),
)
CELL = st.one_of(NUMBER_TEXT, st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=8))
JSON_VALUE = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(min_value=-(10**40), max_value=10**40), st.floats(), st.text(max_size=6)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=8,
)


@contextlib.contextmanager
def read_only(*paths: Path) -> Iterator[None]:
    """What runs inside reads ``paths`` within the time bound and leaves each byte-identical."""
    before = [p.read_bytes() for p in paths]
    with bounded():
        yield
    assert [p.read_bytes() for p in paths] == before


def _write(folder: Path, name: str, data: bytes) -> Path:
    path = folder / name
    path.write_bytes(data)
    return path


def _check_trace(trace: DecodeTrace) -> None:
    assert trace.prompts.dtype == np.int64 and trace.outputs.dtype == np.int64
    assert len(trace) >= 1 and (trace.prompts >= 1).all() and (trace.outputs >= 1).all()
    if trace.arrivals is not None:
        assert np.isfinite(trace.arrivals).all()


@FUZZ
@given(
    rows=st.lists(st.tuples(CELL, CELL, CELL), max_size=6),
    header=st.sampled_from(["prompt_tokens,output_tokens,time", "a,b,c", "ContextTokens,GeneratedTokens,TIMESTAMP"]),
)
def test_a_fuzzed_csv_trace_parses_or_is_one_input_error(tmp_path, rows, header):
    text = header + "\n" + "".join(",".join(r) + "\n" for r in rows)
    path = _write(tmp_path, "t.csv", text.encode("utf-8", "surrogatepass"))
    with read_only(path):
        try:
            _check_trace(read_decode_trace(path))
        except InputError as exc:
            assert str(exc).startswith(str(path)) and "\n" not in str(exc)


@FUZZ
@given(
    lines=st.lists(st.one_of(st.dictionaries(st.sampled_from(["prompt_tokens", "output_tokens", "time", "x"]), JSON_VALUE, max_size=4), JSON_VALUE), max_size=6)
)
def test_a_fuzzed_jsonl_trace_parses_or_is_one_input_error(tmp_path, lines):
    text = "".join(json.dumps(line) + "\n" for line in lines)  # json.dumps writes NaN/Infinity too: hostile on purpose
    path = _write(tmp_path, "t.jsonl", text.encode())
    with read_only(path):
        try:
            _check_trace(read_decode_trace(path))
        except InputError as exc:
            assert str(exc).startswith(str(path)) and "\n" not in str(exc)


@FUZZ
@given(data=st.binary(max_size=300), suffix=st.sampled_from([".csv", ".tsv", ".jsonl", ".parquet", ".txt"]))
def test_fuzzed_bytes_as_a_trace_or_lengths_parse_or_are_one_input_error(tmp_path, data, suffix):
    path = _write(tmp_path, "t" + suffix, data)
    with read_only(path):
        with contextlib.suppress(InputError):
            _check_trace(read_decode_trace(path))
        try:
            got = read_lengths(path)
            assert isinstance(got, LengthData) and (got.lengths >= 1).all()
        except InputError:
            pass


@FUZZ
@given(lines=st.lists(NUMBER_TEXT, max_size=8), bom=st.booleans())
def test_a_fuzzed_lengths_file_parses_or_is_one_input_error(tmp_path, lines, bom):
    path = _write(tmp_path, "L.txt", (b"\xef\xbb\xbf" if bom else b"") + "".join(line + "\n" for line in lines).encode())
    with read_only(path):
        try:
            got = read_lengths(path)
            assert got.lengths.dtype == np.int64 and (got.lengths >= 1).all()
        except InputError as exc:
            assert str(exc).startswith(str(path)) and "\n" not in str(exc)


@FUZZ
@given(rows=st.lists(st.tuples(NUMBER_TEXT, NUMBER_TEXT), max_size=6))
def test_fuzzed_step_times_parse_or_are_one_input_error(tmp_path, rows):
    path = _write(tmp_path, "steps.csv", ("length,seconds\n" + "".join(f"{a},{b}\n" for a, b in rows)).encode())
    with read_only(path):
        try:
            lengths, seconds = read_step_times(path)
            assert np.isfinite(lengths).all() and np.isfinite(seconds).all()
        except InputError as exc:
            assert str(exc).startswith(str(path)) and "\n" not in str(exc)


def _shard_manifest() -> st.SearchStrategy[dict]:
    entry = st.fixed_dictionaries(
        {"name": st.sampled_from(["m", "n", "zz"])},
        optional={"error": JSON_VALUE, "internal": JSON_VALUE, "seconds": JSON_VALUE, "reused_from": JSON_VALUE},
    )
    return st.fixed_dictionaries(
        {
            "format": st.one_of(st.just(1), JSON_VALUE),
            "config_sha256": st.one_of(st.just("0" * 64), JSON_VALUE),
            "neuronprobe": st.just("0.1.0"),
            "rules": st.just("1"),
            "backend": st.one_of(st.just("static"), JSON_VALUE),
            "date": st.one_of(st.just("2026-01-02"), st.text(max_size=12)),
            "history": st.one_of(st.just(30), JSON_VALUE),
            "shard": st.one_of(st.just([1, 1]), st.lists(st.integers(min_value=-(10**20), max_value=10**20), max_size=3), JSON_VALUE),
            "config_models": st.one_of(st.just(["m", "n"]), st.lists(JSON_VALUE, max_size=3)),
            "models": st.lists(st.one_of(entry, JSON_VALUE), max_size=3),
        }
    )


@FUZZ
@given(manifest=_shard_manifest(), constant=st.booleans())
def test_a_fuzzed_shard_manifest_is_read_or_one_config_error(tmp_path, manifest, constant):
    from neuronprobe.nightly.shards import _analysed, read_shard

    folder = tmp_path / "shard"
    folder.mkdir(exist_ok=True)
    text = json.dumps(manifest) if constant else dumps(manifest)  # with and without bare NaN/Infinity
    path = _write(folder, "_shard.json", text.encode())
    with read_only(path):
        try:
            shard = read_shard(folder)
        except ConfigError as exc:
            assert str(exc).startswith(str(folder)) and "\n" not in str(exc)
            return
        for entry in shard.manifest.models:
            try:
                out = _analysed(shard, entry)  # what merge does with each entry: never a ValueError on 'seconds'
                assert math.isfinite(out.seconds) and out.seconds >= 0
            except ConfigError as exc:
                assert "\n" not in str(exc)  # the report of a model without an error is missing here: one sentence


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    field=st.sampled_from(["tensors", "shape", "tolerances", "files", "format_version", "model", "backend"]),
    value=JSON_VALUE,
)
def test_a_fuzzed_reference_manifest_is_loaded_or_one_input_error(tmp_path, field, value):
    from neuronprobe.parity.reference import load_reference

    folder = tmp_path / "ref"
    folder.mkdir(exist_ok=True)
    manifest = {
        "format": "neuronprobe-reference",
        "format_version": 1,
        "backend": "cpu",
        "model": {"spec": "m.py", "hash": "sha256:0", "of": "the model file"},
        "inputs": {"hash": "0"},
        "versions": {},
        "tolerances": {"float32": {"rtol": 1e-5, "atol": 1e-7}},
        "tensors": [{"name": "output", "kind": "output", "key": "output", "dtype": "float32", "shape": [2]}],
        "files": {"outputs.safetensors": "0"},
    }
    if field == "shape":
        manifest["tensors"][0]["shape"] = value  # type: ignore[index]
    else:
        manifest[field] = value
    files = [_write(folder, "manifest.json", json.dumps(manifest).encode()), _write(folder, "outputs.safetensors", b"\x00" * 16)]
    with read_only(*files):
        try:
            load_reference(folder)
        except InputError as exc:
            assert str(exc).startswith((str(folder), "--reference")) and "\n" not in str(exc)


@FUZZ
@given(value=JSON_VALUE)
def test_the_codec_output_is_strict_json_that_reads_back(value):
    text = dumps(value)
    back = loads_strict(text)  # never NaN or Infinity
    assert dumps(back) == text


@FUZZ
@given(data=st.binary(max_size=2000), cap=st.integers(min_value=0, max_value=2500))
def test_the_bounded_reader_returns_the_bytes_or_names_the_cap(tmp_path, data, cap):
    path = _write(tmp_path, "f.bin", data)
    with read_only(path):
        try:
            assert read_input(path, "trace", cap=cap) == data
            assert len(data) <= cap
        except InputError as exc:
            assert len(data) > cap and "neuronprobe's cap on one input file" in str(exc)
