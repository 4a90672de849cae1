"""Issue 34 points 3, 4 and 10 on the serving readers of issue 37: scrapes, compile times, cache explain.

Library level: hypothesis builds Prometheus scrapes (labels with escapes, histograms, counters
that reset, huge, negative and NaN values, junk lines), compile-time CSVs and deployment
manifests; each parses or raises the typed user error (InputError), never another exception.
CLI level: each hostile case runs the real command in its own process (io_cli) and asserts
exit 2, one line on stderr, the inputs byte-identical and the subprocess time bound.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from io_cli import bounded, refused_line, run_cli

from neuronprobe.errors import InputError
from neuronprobe.shape_buckets.cache_explain import explain, read_manifest
from neuronprobe.shape_buckets.compile_bill import MAX_COMPILE_SECONDS, read_compile_times
from neuronprobe.shape_buckets.metrics import (
    COMPILE_TIME,
    EXECUTIONS,
    MAX_COUNT,
    PADDING_SEQS,
    PADDING_TOKENS,
    parse_prometheus,
    read_scrape,
    traffic_from_scrapes,
)

FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
SERVER = ["--max-num-batched-tokens", "512", "--max-num-seqs", "8", "--max-model-len", "4096"]
GOOD_SCRAPE = (
    "# TYPE vllm_neuron:num_seqs_padding histogram\n"
    'vllm_neuron:num_seqs_padding_bucket{bucket_name="decode_b8",le="0.0",model_name="m",rank_id="0"} 10.0\n'
    'vllm_neuron:num_seqs_padding_bucket{bucket_name="decode_b8",le="2.0",model_name="m",rank_id="0"} 30.0\n'
    'vllm_neuron:num_seqs_padding_bucket{bucket_name="decode_b8",le="+Inf",model_name="m",rank_id="0"} 40.0\n'
    'vllm_neuron:compilation_time_seconds{bucket_name="decode_b8",model_name="m",rank_id="0"} 95.5\n'
)


# --- library: fuzzed scrapes --------------------------------------------------------------------

_numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.sampled_from(["NaN", "+Inf", "-Inf", "1e308", "1e309", "-0.0", "9007199254740993", "0x10", "1_0", "", "abc"]),
)
_label_values = st.one_of(
    st.text(alphabet=st.sampled_from('ab0_\\"n{},= \t'), max_size=12),
    st.sampled_from(["prefill_s512", "decode_b8", "decode_b8_ctx1024", "prefill_s0", "decode_b99999999999999", "prefill_s" + "9" * 5000]),
)
_names = st.sampled_from(
    [
        PADDING_TOKENS + "_bucket",
        PADDING_SEQS + "_bucket",
        PADDING_SEQS + "_sum",
        PADDING_SEQS + "_count",
        EXECUTIONS + "_total",
        COMPILE_TIME,
        "process_cpu_seconds_total",
        "bad name",
    ]
)
_label_keys = st.sampled_from(["bucket_name", "le", "model_name", "rank_id", "x", "le"])


@st.composite
def _sample_line(draw: st.DrawFn) -> str:
    labels = draw(st.lists(st.tuples(_label_keys, _label_values), max_size=5))
    body = ",".join(f'{k}="{v}"' for k, v in labels)
    name = draw(_names)
    ts = draw(st.sampled_from(["", " 1700000000000", " -5", " 99999999999999999999999"]))
    return f"{name}{{{body}}} {draw(_numbers)}{ts}" if labels or draw(st.booleans()) else f"{name} {draw(_numbers)}{ts}"


_lines = st.lists(
    st.one_of(_sample_line(), st.sampled_from(["# TYPE x histogram", "# HELP x y", "#", "", "  ", "}{", '{le="1"} 2']), st.text(max_size=30)), max_size=25
)


def _parsed_or_input_error(texts: list[str]) -> None:
    try:
        with bounded():
            scrapes = [parse_prometheus(t, f"s{i}") for i, t in enumerate(texts)]
            traffic = traffic_from_scrapes(scrapes)
    except InputError as exc:
        assert "\n" not in str(exc) and str(exc)
        return
    for h in traffic.prefill + traffic.decode:  # what the planner relies on: whole, positive sizes and counts
        assert all(1 <= lo <= hi <= h.bucket for lo, hi in zip(h.lower, h.upper, strict=True))
        assert all(isinstance(c, int) and 0 <= c <= MAX_COUNT for c in h.counts)
    assert all(math.isfinite(v) and v >= 0 for v in traffic.compile_seconds.values())


@FUZZ
@given(scrapes=st.lists(_lines.map("\n".join), min_size=1, max_size=3))
def test_a_fuzzed_scrape_parses_or_is_one_input_error(scrapes):
    _parsed_or_input_error(scrapes)


@FUZZ
@given(values=st.lists(st.one_of(st.integers(min_value=-5, max_value=2**60), st.floats(allow_nan=True)), min_size=1, max_size=6))
def test_a_histogram_series_with_resets_and_hostile_values_parses_or_is_one_input_error(values):
    """One decode bucket's cumulative bins across scrapes: resets (a value falling), NaN, negatives, past 2^53."""
    texts = []
    for v in values:
        texts.append(f'{PADDING_SEQS}_bucket{{bucket_name="decode_b8",le="0.0"}} {v!r}\n{PADDING_SEQS}_bucket{{bucket_name="decode_b8",le="+Inf"}} {v!r}\n')
    _parsed_or_input_error(texts)


@FUZZ
@given(data=st.binary(max_size=300))
def test_fuzzed_bytes_as_a_scrape_file_parse_or_are_one_input_error(tmp_path, data):
    path = tmp_path / "scrape.prom"
    path.write_bytes(data)
    with bounded(), contextlib.suppress(InputError):
        traffic_from_scrapes([read_scrape(path)])
    assert path.read_bytes() == data


def test_label_escapes_are_read_in_one_pass():
    s = parse_prometheus('m{a="x\\\\ny",b="q\\"r",c="l1\\nl2"} 1\n', "s")
    assert s.samples[0].labels == (("a", "x\\ny"), ("b", 'q"r'), ("c", "l1\nl2"))


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (f'{PADDING_SEQS}_bucket{{bucket_name="decode_b8",le="+Inf"}} NaN\n', "a count must be a number between 0 and 2^53"),
        (f'{PADDING_SEQS}_bucket{{bucket_name="decode_b8",le="+Inf"}} -3\n', "a count must be a number between 0 and 2^53"),
        (f'{PADDING_SEQS}_bucket{{bucket_name="decode_b8",le="+Inf"}} 1e30\n', "a count must be a number between 0 and 2^53"),
        (f'{PADDING_SEQS}_bucket{{bucket_name="decode_b0",le="+Inf"}} 3\n', "the bucket size must be between 1 and 16777216"),
        (f'{PADDING_SEQS}_bucket{{bucket_name="decode_b{"9" * 5000}",le="+Inf"}} 3\n', "the bucket size must be between 1 and 16777216"),
        (f'{PADDING_SEQS}_bucket{{bucket_name="decode_b8",le="1",le="2"}} 3\n', "the label le appears twice"),
        (f'{COMPILE_TIME}{{bucket_name="decode_b8"}} inf\n', "seconds must be between 0 and a week"),
        ("m{" + ",".join(f'l{i}="v"' for i in range(70)) + "} 1\n", "more than 64 labels (MAX_LABELS)"),
    ],
)
def test_each_hostile_value_names_its_field(text, words):
    with pytest.raises(InputError, match=None) as got:
        traffic_from_scrapes([parse_prometheus(text, "s")])
    assert words in str(got.value)


def test_the_sample_cap_is_named(monkeypatch):
    import neuronprobe.shape_buckets.metrics as metrics

    monkeypatch.setattr(metrics, "MAX_SAMPLES", 10)
    with pytest.raises(InputError, match=r"more than 10 samples \(MAX_SAMPLES\)"):
        parse_prometheus("m 1\n" * 11, "s")


def test_counters_summed_over_scrapes_past_2_53_are_refused():
    line = f'{PADDING_SEQS}_bucket{{bucket_name="decode_b8",le="+Inf"}} {2**53}\n'
    with pytest.raises(InputError, match="adds up to more than 2\\^53"):
        traffic_from_scrapes(
            [
                parse_prometheus(line.replace(str(2**53), "1"), "a"),
                parse_prometheus(line, "b"),
                parse_prometheus(line.replace(str(2**53), "0"), "c"),
                parse_prometheus(line, "d"),
            ]
        )


# --- library: compile times and manifests ----------------------------------------------------------

_graphs = st.one_of(st.sampled_from(["prefill_s128", "decode_b8", "decode_b8_ctx1024", "prefill_s0", "decode_b" + "9" * 30, "graph"]), st.text(max_size=10))


@FUZZ
@given(rows=st.lists(st.tuples(_graphs, _numbers, st.one_of(st.just(None), _numbers)), max_size=8), header=st.booleans())
def test_a_fuzzed_compile_times_csv_parses_or_is_one_input_error(tmp_path, rows, header):
    path = tmp_path / "ct.csv"
    text = ("graph,seconds,host_gib\n" if header else "") + "".join(f"{g},{s}" + (f",{h}" if h is not None else "") + "\n" for g, s, h in rows)
    path.write_bytes(text.encode())
    try:
        with bounded():
            samples = read_compile_times(path, 4096)
    except InputError as exc:
        assert "\n" not in str(exc)
        return
    finally:
        assert path.read_bytes() == text.encode()  # byte for byte (read_text would read a '\r' as '\n')
    for s in samples:
        assert 1 <= s.size <= 2**48 and math.isfinite(s.seconds) and 0 <= s.seconds <= MAX_COMPILE_SECONDS


def test_compile_times_rows_are_capped_with_the_cap_named(tmp_path, monkeypatch):
    import neuronprobe.shape_buckets.compile_bill as compile_bill

    monkeypatch.setattr(compile_bill, "MAX_COMPILE_ROWS", 3)
    path = tmp_path / "ct.csv"
    path.write_text("prefill_s128,10\n" * 4)
    with pytest.raises(InputError, match=r"line 4: more than 3 compiled graphs \(MAX_COMPILE_ROWS\)"):
        read_compile_times(path, 4096)


_json = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
_fields = st.sampled_from(["scheme", "graphs", "model", "dtype", "neuronxcc", "compiler_args", "target", "tensor_parallel_size"])


def _plan(**kw: object) -> dict:
    base: dict = {"scheme": "vllm-neuron", "model": "m", "neuronxcc": "2.22.1", "compiler_args": ["-O1"], "tensor_parallel_size": 8}
    base["graphs"] = ["prefill_s128", "decode_b8"]
    base.update(kw)
    return base


@FUZZ
@given(fields=st.dictionaries(_fields, _json, max_size=3), constant=st.sampled_from(["", "NaN", "Infinity", "-Infinity"]))
def test_a_fuzzed_manifest_is_explained_or_one_input_error(tmp_path, fields, constant):
    plan = tmp_path / "plan.json"
    text = json.dumps(_plan(**fields))
    if constant:
        text = text.replace('"tensor_parallel_size": 8', f'"tensor_parallel_size": {constant}')
    plan.write_text(text)
    cache = tmp_path / "cache.json"
    cache.write_text(json.dumps(_plan()))
    try:
        with bounded():
            result = explain(plan, cache)
    except InputError as exc:
        assert "\n" not in str(exc)
        return
    finally:
        assert plan.read_text() == text and cache.read_text() == json.dumps(_plan())
    assert constant == "" or "tensor_parallel_size" in fields  # a bare NaN or Infinity never reaches a verdict
    assert {g.verdict for g in result.graphs} <= {"hit", "miss", "unknown"}


def test_a_manifest_with_a_bare_nan_is_refused(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(_plan(model="m")).replace('"m"', "NaN", 1))
    with pytest.raises(InputError, match="not a readable JSON manifest"):
        read_manifest(plan)


# --- CLI: buckets --metrics, --compile-times, cache explain, analyze --serving-engine ----------------


def _file(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _zero_link(tmp_path: Path, name: str) -> Path:
    link = tmp_path / name
    link.symlink_to("/dev/zero")
    return link


def test_a_good_scrape_is_a_plan(tmp_path):
    ran = run_cli(["buckets", "--metrics", str(_file(tmp_path, "s.prom", GOOD_SCRAPE)), *SERVER])
    assert ran.code == 0, ran.stderr
    assert "compile bill" in ran.stdout


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda t: (os.mkfifo(t / "s.prom"), t / "s.prom")[1], "is a pipe"),
        (lambda t: _zero_link(t, "s.prom"), "is a device"),
        (lambda t: _file(t, "s.prom", GOOD_SCRAPE.replace("30.0", "NaN")), "a count must be a number between 0 and 2^53"),
        (lambda t: _file(t, "s.prom", GOOD_SCRAPE.replace("10.0", "-10.0")), "a count must be a number between 0 and 2^53"),
        (lambda t: _file(t, "s.prom", GOOD_SCRAPE.replace("decode_b8", "decode_b" + "9" * 40)), "the bucket size must be between 1 and"),
        (lambda t: _file(t, "s.prom", GOOD_SCRAPE.replace('rank_id="0"', 'rank_id="0",rank_id="1"')), "appears twice"),
        (lambda t: _file(t, "s.prom", GOOD_SCRAPE.replace("95.5", "1e308")), "seconds must be between 0 and a week"),
        (lambda t: (t / "s.prom").write_bytes(b"m 1\n\xff\xfe\n") and t / "s.prom", "not UTF-8"),
    ],
    ids=["fifo", "dev-zero-link", "nan", "negative", "huge-bucket", "duplicate-label", "huge-seconds", "not-utf8"],
)
def test_buckets_metrics_hostile_scrape_is_one_line_exit_2(tmp_path, make, words):
    scrape = make(tmp_path)
    line = refused_line(["buckets", "--metrics", str(scrape), *SERVER], [scrape])
    assert words in line, line


def test_buckets_metrics_never_writes_over_its_scrape(tmp_path):
    scrape = _file(tmp_path, "s.prom", GOOD_SCRAPE)
    line = refused_line(["buckets", "--metrics", str(scrape), *SERVER, "--json", str(scrape)], [scrape])
    assert line.startswith(f"error: --json {scrape} is an input of this command")


def test_buckets_compile_times_never_written_over_and_bounded(tmp_path):
    scrape = _file(tmp_path, "s.prom", GOOD_SCRAPE)
    times = _file(tmp_path, "ct.csv", "graph,seconds\ndecode_b8,60\n")
    line = refused_line(["buckets", "--metrics", str(scrape), *SERVER, "--compile-times", str(times), "--json", str(times)], [scrape, times])
    assert line.startswith(f"error: --json {times} is an input of this command")
    os.mkfifo(tmp_path / "fifo.csv")
    line = refused_line(["buckets", "--metrics", str(scrape), *SERVER, "--compile-times", str(tmp_path / "fifo.csv")], [scrape])
    assert "is a pipe" in line
    huge = _file(tmp_path, "huge.csv", "graph,seconds\ndecode_b" + "9" * 5000 + ",60\n")
    line = refused_line(["buckets", "--metrics", str(scrape), *SERVER, "--compile-times", str(huge)], [scrape, huge])
    assert "each size in a bucket name must be between 1 and 16777216" in line


@pytest.mark.parametrize(
    ("side", "make", "words"),
    [
        ("plan", lambda t: (os.mkfifo(t / "p.json"), t / "p.json")[1], "is a pipe"),
        ("plan", lambda t: _zero_link(t, "p.json"), "is a device"),
        ("plan", lambda t: _file(t, "p.json", json.dumps(_plan()).replace("8", "NaN")), "not a readable JSON"),
        ("plan", lambda t: _file(t, "p.json", json.dumps(_plan(tensor_parallel_size=2**64))), "field 'tensor_parallel_size'"),
        ("plan", lambda t: _file(t, "p.json", json.dumps(_plan(graphs="prefill_s128"))), "field 'graphs'"),
        ("cache", lambda t: (os.mkfifo(t / "c"), t / "c")[1], "not a pipe or a device"),
        ("cache", lambda t: _zero_link(t, "c"), "not a pipe or a device"),
        ("cache", lambda t: _file(t, "c.json", json.dumps(_plan(scheme="xla"))), "a xla cache cannot serve a vllm-neuron deployment"),
    ],
    ids=["plan-fifo", "plan-dev-zero", "plan-nan", "plan-tp-huge", "plan-graphs-string", "cache-fifo", "cache-dev-zero", "cache-foreign-scheme"],
)
def test_cache_explain_hostile_inputs_are_one_line_exit_2(tmp_path, side, make, words):
    hostile = make(tmp_path)
    other = _file(tmp_path, "other.json", json.dumps(_plan()))
    plan, cache = (hostile, other) if side == "plan" else (other, hostile)
    line = refused_line(["cache", "explain", "--plan", str(plan), "--cache", str(cache)], [plan, cache])
    assert words in line, line


def test_analyze_serving_engine_past_int64_is_one_line_exit_2(tmp_path):
    from helpers import MODELS

    model = tmp_path / "m.py"
    model.write_bytes((MODELS / "mlp.py").read_bytes())
    trace = _file(tmp_path, "t.csv", "prompt_tokens,output_tokens\n100,20\n")
    engine = "max_num_batched_tokens=512,max_num_seqs=99999999999999999999999,max_model_len=4096"
    line = refused_line(["analyze", str(model), "--serving-trace", str(trace), "--serving-engine", engine], [model, trace])
    assert "--serving-engine max_num_seqs" in line and "between 1 and 2^63-1" in line
