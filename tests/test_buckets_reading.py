"""Length files in every supported format, and one clear sentence for each unusable one."""

from __future__ import annotations

import json

import numpy as np
import pytest

from neuronprobe.errors import InputError
from neuronprobe.shape_buckets import read_lengths, read_step_times


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_one_integer_per_line_with_comments_and_blank_lines(tmp_path):
    path = _write(tmp_path, "lengths.txt", "# prompt lengths\n12\n\n  40 \n7\n")
    data = read_lengths(path)
    assert data.lengths.tolist() == [12, 40, 7]
    assert data.timestamps is None


def test_a_clean_file_and_a_messy_file_read_the_same(tmp_path):
    clean = _write(tmp_path, "clean.txt", "12\n40\n\n7 \n")
    messy = _write(tmp_path, "messy.txt", "# header comment\n12\n40\n\n7 \n")
    assert read_lengths(clean).lengths.tolist() == read_lengths(messy).lengths.tolist() == [12, 40, 7]
    with pytest.raises(InputError, match=r"line 2: not an integer length$"):
        read_lengths(_write(tmp_path, "two.txt", "12\n40 41\n"))
    with pytest.raises(InputError, match=r"line 2: too large"):
        read_lengths(_write(tmp_path, "huge.txt", "12\n99999999999999999999\n"))


def test_csv_column_with_a_timestamp_column_detected(tmp_path):
    path = _write(
        tmp_path,
        "trace.csv",
        "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:50.9951690,396,109\n2023-11-16 18:15:46.6805900,374,44\n",
    )
    data = read_lengths(path, column="ContextTokens")
    assert data.lengths.tolist() == [396, 374]
    assert data.column == "ContextTokens" and data.time_column == "TIMESTAMP"
    assert data.timestamps[1] < data.timestamps[0]


def test_tsv_with_a_single_data_column_needs_no_column_flag(tmp_path):
    path = _write(tmp_path, "l.tsv", "ts\tlen\n3\t10\n1\t20\n")
    data = read_lengths(path)
    assert data.lengths.tolist() == [10, 20] and data.column == "len"
    assert data.timestamps.tolist() == [3.0, 1.0]


@pytest.mark.parametrize("stamp", ["inf", "9" * 400], ids=["infinite", "past-float-range"])
def test_a_time_column_that_is_no_finite_seconds_is_not_taken_as_times(tmp_path, stamp):
    """A 400-digit integer made pandas raise OverflowError out of the reader (an internal error); ``inf`` ordered
    the holdout by a time that is none. The lengths read as ever, without times."""
    path = _write(tmp_path, "l.csv", f"ts,len\n{stamp},10\n1,20\n")
    data = read_lengths(path, column="len")
    assert data.lengths.tolist() == [10, 20] and data.timestamps is None and data.time_column is None


def test_json_lines_field(tmp_path):
    rows = [{"time": 2, "prompt_len": 30}, {"time": 1, "prompt_len": 31.0}]
    path = _write(tmp_path, "t.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n")
    data = read_lengths(path, field="prompt_len")
    assert data.lengths.tolist() == [30, 31]
    assert data.time_column == "time"


def test_parquet_column(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"timestamp": [5, 6, 7], "n": [100, 200, 300]}), path)
    data = read_lengths(path, column="n")
    assert data.lengths.tolist() == [100, 200, 300]
    assert data.time_column == "timestamp"


@pytest.mark.parametrize(
    ("name", "text", "kwargs", "message"),
    [
        ("empty.txt", "", {}, "no lengths found"),
        ("only_comments.txt", "# nothing\n\n", {}, "no lengths found"),
        ("words.txt", "12\nabc\n", {}, "words.txt line 2: not an integer length"),
        ("frac.txt", "12\n3.5\n", {}, "line 2: not an integer length (a fraction)"),
        ("zero.txt", "12\n0\n", {}, "line 2: a length that is not positive"),
        ("neg.txt", "-4\n", {}, "line 1: a length that is not positive"),
        ("nan.txt", "12\nnan\n", {}, "line 2: not a length (NaN or infinite)"),
        ("t.csv", "a,b\n1,2\n", {"column": "c"}, "has no column 'c'; it has 'a', 'b'"),
        ("t2.csv", "a,b\n1,2\n", {}, "has 2 columns; choose the lengths with --column"),
        ("t3.csv", "len\n5\nNaN\n", {}, "line 3: not a length (NaN or infinite)"),
        ("t4.csv", "len\n5\nfive\n", {}, "line 3: column 'len' is not an integer length"),
        ("t5.csv", "len,x\n5,1\n,2\n", {"column": "len"}, "line 3: column 'len' is empty"),
        ("t6.csv", "", {"column": "len"}, "no lengths found"),
        ("t.jsonl", '{"a": 1}\n', {"field": "b"}, "line 1: no field 'b'"),
        ("t2.jsonl", '{"a": 1}\n', {}, "choose the length with --field"),
        ("t3.jsonl", '{"a": 1}\n{"a": "x"}\n', {"field": "a"}, "line 2: not an integer length"),
        ("t4.jsonl", '{"a": 1}\n{"a": 0}\n', {"field": "a"}, "line 2: a length that is not positive"),
        ("t5.jsonl", '{"a": 1}\nnot json\n', {"field": "a"}, "line 2: not valid JSON"),
    ],
)
def test_unusable_files_give_one_clear_sentence(tmp_path, name, text, kwargs, message):
    path = _write(tmp_path, name, text)
    with pytest.raises(InputError) as info:
        read_lengths(path, **kwargs)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_a_missing_file_and_a_folder(tmp_path):
    with pytest.raises(InputError, match=r"no such file"):
        read_lengths(tmp_path / "nope.txt")
    with pytest.raises(InputError, match=r"is a folder"):
        read_lengths(tmp_path)


def test_a_missing_parquet_column_names_the_columns(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"n": [1, 2]}), path)
    with pytest.raises(InputError, match=r"has no column 'm'; it has 'n'"):
        read_lengths(path, column="m")


def test_step_times_csv(tmp_path):
    path = _write(tmp_path, "steps.csv", "length,seconds\n128,0.01\n256,0.02\n")
    lengths, seconds = read_step_times(path)
    assert np.array_equal(lengths, [128, 256]) and np.allclose(seconds, [0.01, 0.02])
    bad = _write(tmp_path, "bad.csv", "len,s\n1,2\n")
    with pytest.raises(InputError, match=r"need columns 'length' and 'seconds'"):
        read_step_times(bad)
