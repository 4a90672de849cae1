"""Fuzzing the structured readers: lengths files, nightly configs and report JSON.

Each reader runs in-process on generated input: it returns, or raises an InputError (exit 2)
whose sentence names the file; never another exception (exit 3), and the file is byte-identical
afterwards. Example counts stay modest: the suite must stay fast.
"""

from __future__ import annotations

import json
import os
import random
import re
import threading
from pathlib import Path

import pytest
from diff_fixtures import finding, make_report
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from io_cli import bounded
from typer.testing import CliRunner

from neuronprobe.cli import app
from neuronprobe.errors import ConfigError, InputError, ReportFormatError
from neuronprobe.nightly.run import load_config
from neuronprobe.report.model import load_report
from neuronprobe.shape_buckets import read_lengths

FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _reads_or_refuses(path: Path, read) -> None:
    before = path.read_bytes()
    try:
        with bounded():
            read(path)
    except InputError as exc:
        assert str(path) in str(exc) or str(path.name) in str(exc), str(exc)
    assert path.read_bytes() == before


# --- lengths files ------------------------------------------------------------------------------

_line = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.floats().map(repr),
    st.text(max_size=12),
    st.sampled_from(["", "length", "1,2", "1\t2", '{"length": 5}', '{"length": "x"}', '{"length": 1e400}', "[1, 2]", "null", "NaN"]),
)


@FUZZ
@given(lines=st.lists(_line, max_size=8), suffix=st.sampled_from([".txt", ".csv", ".tsv", ".jsonl", ".parquet", ""]))
def test_fuzz_lengths_files(tmp_path, lines, suffix):
    path = tmp_path / f"lengths{suffix}"
    path.write_text("\n".join(lines) + "\n")
    _reads_or_refuses(path, read_lengths)


@FUZZ
@given(data=st.binary(max_size=300), suffix=st.sampled_from([".txt", ".csv", ".jsonl", ".parquet"]))
def test_fuzz_lengths_files_of_random_bytes(tmp_path, data, suffix):
    path = tmp_path / f"lengths{suffix}"
    path.write_bytes(data)
    _reads_or_refuses(path, read_lengths)


# --- nightly configs ----------------------------------------------------------------------------


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return {float("inf"): "inf", float("-inf"): "-inf"}.get(value, "nan" if value != value else repr(value))
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(str(value))


_value = st.recursive(
    st.booleans() | st.integers(-(10**20), 10**20) | st.floats() | st.text(max_size=10), lambda inner: st.lists(inner, max_size=3), max_leaves=6
)
_top = st.sampled_from(["target", "backend", "timeout", "op_timeout", "history", "max_memory", "require_backend", "unknown"])
_model = st.sampled_from(["model", "name", "lengths", "shapes", "set", "train", "max_buckets", "max_compiles", "target", "backend", "column", "field"])


@FUZZ
@given(top=st.dictionaries(_top, _value, max_size=3), model=st.dictionaries(_model, _value, max_size=4), models=st.integers(0, 2))
def test_fuzz_nightly_configs(tmp_path, top, model, models):
    (tmp_path / "m.py").write_text("# a model file\n")
    lines = [f"{k} = {_toml(v)}" for k, v in top.items()]
    for _ in range(models):
        lines.append("[[models]]")
        lines += [f"{k} = {_toml(v)}" for k, v in {"model": "m.py", **model}.items()]
    path = tmp_path / "nightly.toml"
    path.write_text("\n".join(lines) + "\n")
    _reads_or_refuses(path, load_config)


@FUZZ
@given(data=st.binary(max_size=300))
def test_fuzz_nightly_configs_of_random_bytes(tmp_path, data):
    path = tmp_path / "nightly.toml"
    path.write_bytes(data)
    _reads_or_refuses(path, load_config)


def test_a_nightly_config_nested_deep_is_one_sentence(tmp_path):
    path = tmp_path / "nightly.toml"
    path.write_text("target = " + "[" * 100_000 + "]" * 100_000 + "\n")
    _reads_or_refuses(path, load_config)


# --- report JSON ----------------------------------------------------------------------------------

_REPORT = json.loads(make_report([finding("aten::nonzero", "dynamic_shape", 7)]).to_json())


def _paths(doc: object, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*prefix, i))
    return out


_PATHS = _paths(_REPORT)[1:]
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


@FUZZ
@given(changes=st.lists(st.tuples(st.sampled_from(_PATHS), _json), min_size=1, max_size=3), seed=st.integers(0, 2**16))
def test_fuzz_mutated_reports(tmp_path, changes, seed):
    doc = json.loads(json.dumps(_REPORT))
    for where, value in changes:
        node = doc
        try:
            for key in where[:-1]:
                node = node[key]
            if random.Random(seed).random() < 0.2 and isinstance(node, dict):
                del node[where[-1]]
            else:
                node[where[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue
    path = tmp_path / "run.json"
    path.write_text(json.dumps(doc))
    _reads_or_refuses(path, lambda p: load_report(str(p)))


@FUZZ
@given(data=st.binary(max_size=300))
def test_fuzz_reports_of_random_bytes(tmp_path, data):
    path = tmp_path / "run.json"
    path.write_bytes(data)
    _reads_or_refuses(path, lambda p: load_report(str(p)))


# --- inputs that are not files --------------------------------------------------------------------


def _fifo(tmp_path: Path) -> Path:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    return fifo


def test_a_device_or_a_pipe_is_never_read_as_a_report_or_a_config(tmp_path):
    """/dev/zero would be read until memory runs out; a FIFO without a writer blocks for ever."""
    fifo = _fifo(tmp_path)
    for path, kind in ((Path(os.devnull), "a device"), (fifo, "a pipe"), (tmp_path, "a folder")):
        with pytest.raises(ReportFormatError, match=f"^{re.escape(str(path))}: is {kind}, not a report file$"):
            load_report(str(path))
        with pytest.raises(ConfigError, match=f"^{re.escape(str(path))}: is {kind}, not a config file$"):
            load_config(path)
    result = CliRunner().invoke(app, ["diff", str(fifo), str(fifo)])
    assert result.exit_code == 2 and result.output.strip() == f"error: {fifo}: is a pipe, not a report file"


def test_a_device_is_never_read_as_lengths_but_a_pipe_is(tmp_path):
    with pytest.raises(InputError, match=r"^/dev/zero: is a device, not a length file$"):
        read_lengths("/dev/zero")
    fifo = _fifo(tmp_path)
    writer = threading.Thread(target=lambda: fifo.write_text("5\n9\n12\n"))  # `buckets <(cut -f2 log.tsv)`
    writer.start()
    data = read_lengths(fifo)
    writer.join(10)
    assert sorted(data.lengths.tolist()) == [5, 9, 12]
