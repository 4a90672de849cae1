"""Read a serving trace for decode buckets: prompt and output lengths per request, and when it arrived.

Formats by extension: CSV / TSV (``.csv``, ``.tsv``, ``.tab``; anything else is read as CSV),
JSON Lines (``.jsonl``, ``.ndjson``) and Parquet (``.parquet``, ``.pq``). The columns are
named with ``--prompt-column`` / ``--output-column`` / ``--time-column``; without them the
first column whose name is in :data:`PROMPT_NAMES` / :data:`OUTPUT_NAMES` /
``reading.TIMESTAMP_NAMES`` is used (case-insensitive), which recognises the Azure LLM
inference trace 2023 (``TIMESTAMP,ContextTokens,GeneratedTokens``).

A row that is not usable (a missing value, a fraction, a prompt < 1, an output < 1) is
one sentence naming the row and the column, never the row's content.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from neuronprobe.errors import InputError
from neuronprobe.limits import MAX_BUCKET_LENGTH
from neuronprobe.shape_buckets.reading import DELIMITED_SUFFIXES, JSONL_SUFFIXES, PARQUET_SUFFIXES, TIMESTAMP_NAMES, parse_timestamps

# Column names taken as the prompt and the output length when none is named (case-insensitive):
# the Azure trace's own names first, then the usual spellings of serving logs and benchmarks.
PROMPT_NAMES: tuple[str, ...] = ("contexttokens", "prompt_tokens", "prompt_len", "prompt_length", "input_tokens", "input_len", "input_length")
OUTPUT_NAMES: tuple[str, ...] = (
    "generatedtokens",
    "output_tokens",
    "completion_tokens",
    "output_len",
    "output_length",
    "generated_tokens",
    "max_tokens",
)
# Longer than any model context served today; the position histogram is a dense array up to here.
MAX_DECODE_LENGTH = MAX_BUCKET_LENGTH
# The most requests one trace may hold (a week of a large service is ~10^7), the most values
# (rows x columns) it may hold, and the most decode steps (output tokens, summed) it may ask for:
# each is named in the refusal, before the table is built.
MAX_TRACE_ROWS = 2**25
MAX_TRACE_VALUES = 2**28
MAX_TRACE_STEPS = 2**36


@dataclass
class DecodeTrace:
    """Requests in file order: prompt tokens, output tokens, and arrival seconds when known."""

    prompts: np.ndarray  # int64 >= 1
    outputs: np.ndarray  # int64 >= 1 (the first output token comes from prefill)
    arrivals: np.ndarray | None = None  # float64 seconds from the first request, same size
    source: str = ""
    prompt_column: str = ""
    output_column: str = ""
    time_column: str | None = None
    cached: np.ndarray | None = None  # int64 prefix-cache hit tokens per request (vLLM Neuron replay); None: no column

    def __len__(self) -> int:
        return int(self.prompts.size)

    def subset(self, index: np.ndarray) -> DecodeTrace:
        arr = None if self.arrivals is None else self.arrivals[index]
        return DecodeTrace(self.prompts[index], self.outputs[index], arr, self.source, self.prompt_column, self.output_column, self.time_column)


def trace_from_arrays(prompts: Any, outputs: Any, arrivals: Any = None, source: str = "requests") -> DecodeTrace:
    """A trace from in-memory lists/arrays (the Python API); the same checks as a file."""
    p = _lengths(np.asarray(prompts), source, "prompt", lambda i: f"request {i}")
    o = _lengths(np.asarray(outputs), source, "output", lambda i: f"request {i}")
    if p.size != o.size:
        raise InputError(f"{source}: {p.size} prompt lengths but {o.size} output lengths; give one of each per request")
    times = None
    if arrivals is not None:
        stamps = parse_timestamps(list(arrivals))
        if stamps is None or len(stamps) != p.size:
            raise InputError(f"{source}: arrival times must be one number or date per request")
        times = _seconds(stamps)
    return DecodeTrace(p, o, times, source, "prompt", "output", "arrival" if times is not None else None)


def read_decode_trace(
    path: str | Path,
    prompt_column: str | None = None,
    output_column: str | None = None,
    time_column: str | None = None,
    *,
    cached_column: str | None = None,
) -> DecodeTrace:
    """Read prompt and output lengths (and arrival times) from a trace file; see the module docstring."""
    from neuronprobe.files import read_input

    p = Path(path)
    # Bounded: a FIFO waits a bounded time for its writer, /dev/zero is refused, a file above 1 GiB too.
    data = read_input(p, "trace", pipes=True)
    suffix = p.suffix.lower()
    if suffix in PARQUET_SUFFIXES:
        frame, row_label = _parquet(p, data), _row_label(0)
    elif suffix in JSONL_SUFFIXES:
        frame, lines = _jsonl(p, data)
        row_label = lambda i: f"line {lines[i]}"  # noqa: E731
    else:
        frame, row_label = _delimited(p, data, DELIMITED_SUFFIXES.get(suffix, ",")), _row_label(2)
    if len(frame) > MAX_TRACE_ROWS:
        raise InputError(f"{p}: {len(frame):,} requests; neuronprobe reads at most {MAX_TRACE_ROWS:,} (MAX_TRACE_ROWS): sample the trace")
    columns = [str(c) for c in frame.columns]
    pc = _choose(p, columns, prompt_column, PROMPT_NAMES, "--prompt-column", "prompt length")
    oc = _choose(p, columns, output_column, OUTPUT_NAMES, "--output-column", "output length")
    if pc == oc:
        raise InputError(f"{p}: the prompt and output columns are both {pc!r}; name them with --prompt-column and --output-column")
    tc = time_column
    if tc is not None and tc not in columns:
        raise InputError(f"{p} has no --time-column {tc!r}; it has {', '.join(map(repr, columns))}")
    if tc is None:
        tc = next((c for c in columns if c.strip().lower() in TIMESTAMP_NAMES and c not in (pc, oc)), None)
    if len(frame) == 0:
        raise InputError(f"{p}: no requests found (the file has a header and no rows)")
    prompts = _lengths(frame[pc].to_numpy(), str(p), pc, row_label)
    outputs = _lengths(frame[oc].to_numpy(), str(p), oc, row_label)
    check_steps(outputs, str(p))
    arrivals = None
    if tc is not None:
        stamps = parse_timestamps(frame[tc])
        if stamps is None:
            if time_column is not None:  # named explicitly: it must parse
                raise InputError(f"{p}: --time-column {tc!r} does not parse as times (numbers or dates) on every row")
            tc = None
        else:
            arrivals = _seconds(stamps)
    if cached_column is not None and cached_column not in columns:
        raise InputError(f"{p} has no --cached-column {cached_column!r}; it has {', '.join(map(repr, columns))}")
    cc = cached_column or next((c for c in columns if c.strip().lower() in CACHED_NAMES and c not in (pc, oc, tc)), None)
    cached = None if cc is None else _cached_tokens(frame[cc].to_numpy(), str(p), cc, row_label)
    return DecodeTrace(prompts, outputs, arrivals, str(p), pc, oc, tc, cached)


CACHED_NAMES = ("cached_tokens", "cached", "prefix_cached")


def _cached_tokens(values: np.ndarray, where: str, column: str, label: Any) -> np.ndarray:
    """Prefix-cache hits per request: whole numbers >= 0 (an empty cell is 0), or one sentence naming the first bad row."""
    import pandas as pd

    text = pd.Series(values, dtype=object).map(lambda v: v.strip() if isinstance(v, str) else v)
    numbers = np.array(pd.to_numeric(text, errors="coerce"), dtype=np.float64)
    blank = (pd.isna(text) | text.map(lambda v: v == "")).to_numpy(dtype=bool)
    numbers[blank] = 0.0
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(numbers) | (numbers != np.floor(numbers)) | (numbers < 0) | (numbers > MAX_DECODE_LENGTH)
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(f"{where} {label(i)}: {column!r} is not a whole number of cached tokens between 0 and {MAX_DECODE_LENGTH}")
    return numbers.astype(np.int64)


def _row_label(first_line: int) -> Any:
    if first_line:
        return lambda i: f"line {i + first_line}"
    return lambda i: f"row {i}"


def check_steps(outputs: np.ndarray, where: str) -> None:
    """At most :data:`MAX_TRACE_STEPS` decode steps (output tokens) in all: the replay walks them."""
    total = int(outputs.sum(dtype=np.float64))
    if total > MAX_TRACE_STEPS:
        raise InputError(f"{where}: {total:,} output tokens in all; neuronprobe replays at most {MAX_TRACE_STEPS:,} (MAX_TRACE_STEPS): sample the trace")


def _check_size(p: Path, rows: int, columns: int) -> None:
    """Rows and values (rows x columns) within the caps, counted before the table is built."""
    if rows > MAX_TRACE_ROWS:
        raise InputError(f"{p}: more than {MAX_TRACE_ROWS:,} requests; neuronprobe reads at most that many (MAX_TRACE_ROWS): sample the trace")
    if rows * max(columns, 1) > MAX_TRACE_VALUES:
        raise InputError(
            f"{p}: {rows:,} rows x {columns:,} columns; neuronprobe reads at most {MAX_TRACE_VALUES:,} values (MAX_TRACE_VALUES): keep the columns it needs"
        )


def _delimited(p: Path, data: bytes, sep: str) -> Any:
    import pandas as pd

    if data.startswith(b"\xef\xbb\xbf"):  # a byte-order mark (Excel's CSV): not part of the first column's name
        data = data[3:]
    header = data.split(b"\n", 1)[0]
    _check_size(p, data.count(b"\n"), header.count(sep.encode()) + 1)
    try:
        # Numbers are parsed in C (10^6 rows in a fraction of a second); a column with a bad
        # cell comes back as text and _lengths names the row.
        return pd.read_csv(io.BytesIO(data), sep=sep, keep_default_na=False, skip_blank_lines=True)
    except pd.errors.EmptyDataError:
        raise InputError(f"{p}: no requests found (the file is empty)") from None
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
        # pandas names the line in its message ("Expected 3 fields in line 5, saw 4"); no content is quoted
        raise InputError(f"{p}: cannot read it as {'TSV' if sep == chr(9) else 'CSV'} ({str(exc).strip().splitlines()[-1]})") from None


def _json_int(text: str) -> int | float:
    """A JSON integer within int64, else infinity (refused as a length by :func:`_lengths`, never an OverflowError)."""
    if len(text.lstrip("-")) > 19:
        return float("inf")
    value = int(text)
    return value if -(2**63) <= value < 2**63 else float("inf")


def _jsonl(p: Path, data: bytes) -> tuple[Any, Any]:
    """The rows of a JSON Lines trace, parsed one line at a time and kept by column.

    Streamed within the bytes already read: no list of every line, no dict per row (a row
    dict costs ~500 bytes; a 1 GiB trace of short rows held ~14 GB before the row cap fired).
    A column is one list of values, a missing key a None; line numbers are int64s.
    """
    import array

    import pandas as pd

    columns: dict[str, list[Any]] = {}
    lines = array.array("q")
    values = 0
    offset = 0
    for lineno, raw in enumerate(io.BytesIO(data), start=1):
        at, offset = offset, offset + len(raw)
        if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):  # a byte-order mark before the first object is not an error
            raw = raw[3:]
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"{p}: cannot read it as text (not UTF-8 at byte {at + exc.start})") from None
        if not line.strip():
            continue
        try:
            obj = json.loads(line, parse_int=_json_int)
        except (ValueError, RecursionError):  # JSONDecodeError is a ValueError
            raise InputError(f"{p} line {lineno}: not valid JSON") from None
        if not isinstance(obj, dict):
            raise InputError(f"{p} line {lineno}: not a JSON object; each line needs one object with the prompt and output lengths")
        values += len(obj)
        if len(lines) >= MAX_TRACE_ROWS:
            raise InputError(
                f"{p} line {lineno}: more than {MAX_TRACE_ROWS:,} requests; neuronprobe reads at most that many (MAX_TRACE_ROWS): sample the trace"
            )
        if values > MAX_TRACE_VALUES:
            raise InputError(f"{p} line {lineno}: more than {MAX_TRACE_VALUES:,} values; neuronprobe reads at most that many (MAX_TRACE_VALUES)")
        row = len(lines)
        for key, value in obj.items():
            column = columns.get(key)
            if column is None:
                column = columns[key] = [None] * row
            column.append(value)
        for column in columns.values():
            if len(column) == row:  # a key this line does not have
                column.append(None)
        lines.append(lineno)
    if not lines:
        raise InputError(f"{p}: no requests found (the file is empty)")
    # One column at a time, its list dropped once typed (ints, floats with NaN for a missing key, as from_records did).
    frame = pd.DataFrame({key: pd.Series(columns.pop(key)) for key in list(columns)})
    return frame, lines


def _parquet(p: Path, data: bytes) -> Any:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise InputError(f"{p}: reading Parquet needs pyarrow (pip install 'neuronprobe[parquet]')") from None
    try:
        meta = pq.ParquetFile(pa.BufferReader(data)).metadata
        _check_size(p, int(meta.num_rows), int(meta.num_columns))
        return pq.read_table(pa.BufferReader(data)).to_pandas()
    except InputError:
        raise
    except Exception as exc:  # pyarrow raises several types for a corrupt file
        raise InputError(f"{p}: cannot read it as Parquet ({type(exc).__name__})") from None


def _choose(p: Path, columns: list[str], named: str | None, names: tuple[str, ...], flag: str, what: str) -> str:
    if named is not None:
        if named not in columns:
            raise InputError(f"{p} has no {flag} {named!r}; it has {', '.join(map(repr, columns))}")
        return named
    lower = {c.strip().lower(): c for c in reversed(columns)}
    for name in names:
        if name in lower:
            return lower[name]
    raise InputError(f"{p}: no {what} column found; name it with {flag} (the file has {', '.join(map(repr, columns))})")


def _lengths(values: np.ndarray, where: str, column: str, label: Any) -> np.ndarray:
    """Whole numbers >= 1 as int64, or one sentence naming the first bad row (never its content)."""
    import pandas as pd

    if values.dtype.kind in "iu":
        arr = values.astype(np.int64)
        bad = (arr < 1) | (arr > MAX_DECODE_LENGTH)
    else:
        if values.dtype.kind in "fc":
            numbers = values.astype(np.float64)
        else:
            series = pd.Series(values, dtype=object)
            as_text = series.map(lambda v: v.strip() if isinstance(v, str) else v)
            is_bool = series.map(lambda v: isinstance(v, bool)).to_numpy(dtype=bool)
            # pandas raises OverflowError for an integer past float's range even when coercing: each value then
            # on its own, with such a value read as not a number (a length past MAX_DECODE_LENGTH either way)
            try:
                numbers = np.array(pd.to_numeric(as_text, errors="coerce"), dtype=np.float64)
            except OverflowError:
                numbers = np.array([_as_float(v) for v in as_text], dtype=np.float64)
            numbers[is_bool] = np.nan
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(numbers) | (numbers != np.floor(numbers)) | (numbers < 1) | (numbers > MAX_DECODE_LENGTH)
        arr = np.where(bad, 1, numbers).astype(np.int64)
    if arr.size == 0:
        raise InputError(f"{where}: no requests found")
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(f"{where} {label(i)}: {column!r} is not a whole number of tokens between 1 and {MAX_DECODE_LENGTH}")
    return arr


def _as_float(value: Any) -> float:
    """One cell as a float; NaN for anything that is not a number in float range."""
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return float("nan")


def _seconds(stamps: np.ndarray) -> np.ndarray:
    """Seconds from the earliest stamp (numbers are taken as seconds already)."""
    if np.issubdtype(stamps.dtype, np.datetime64):
        ns = stamps.astype("datetime64[ns]").astype(np.int64)
        return (ns - ns.min()).astype(np.float64) / 1e9
    arr = stamps.astype(np.float64)
    return arr - arr.min()
