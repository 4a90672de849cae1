"""Read sequence lengths from a file, with a clear sentence for every way it can be unusable.

Formats, by extension (anything else is sniffed):

- one integer per line (``.txt``, ``.lengths`` or no extension; ``#`` comments and blank
  lines are skipped),
- CSV / TSV with a header (``.csv``, ``.tsv``, ``.tab``), column chosen with ``--column``
  (may be omitted when the file has one column),
- JSON Lines (``.jsonl``, ``.ndjson``), field chosen with ``--field`` (bare numbers per line
  need none),
- Parquet (``.parquet``, ``.pq``) when pyarrow is installed, column chosen with ``--column``.

A timestamp column or field (named like ``timestamp``, ``time``, ``ts``, ``date``,
``datetime``, ``created_at``) is kept, so that ``--holdout`` can split in time order.
"""

from __future__ import annotations

import io
import json
import math
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from neuronprobe.errors import InputError

# Column / field names taken as the request time, case-insensitive.
TIMESTAMP_NAMES: frozenset[str] = frozenset({"timestamp", "time", "ts", "date", "datetime", "created_at", "created", "arrival_time", "start_time"})
DELIMITED_SUFFIXES: dict[str, str] = {".csv": ",", ".tsv": "\t", ".tab": "\t"}
JSONL_SUFFIXES: frozenset[str] = frozenset({".jsonl", ".ndjson"})
PARQUET_SUFFIXES: frozenset[str] = frozenset({".parquet", ".pq"})
# Beyond this a "length" is not a sequence length (and float64 stops being exact).
MAX_LENGTH = 2**53
# Two tokens on one line: not a one-integer-per-line file (checked before the fast path).
_INNER_SPACE = re.compile(r"\S[ \t]+\S")


@dataclass
class LengthData:
    """Lengths in file order, with request times when the file has them."""

    lengths: np.ndarray  # int64, all >= 1
    source: str = ""
    column: str | None = None
    timestamps: np.ndarray | None = None  # sortable (datetime64 or float), same size as lengths
    time_column: str | None = None


def validate_lengths(values: Any, where: str = "lengths", line_offset: int = 0) -> np.ndarray:
    """Positive integers as int64, or an InputError naming the first bad item.

    ``line_offset`` turns an item index into a file line number for messages
    (``None`` entries, NaN, fractions, zero and negatives are all rejected).
    """
    if not isinstance(values, (np.ndarray, list, tuple)) and hasattr(values, "__iter__"):
        values = list(values)  # generators, ranges, sets: materialise once
    if isinstance(values, np.ndarray) and values.dtype.kind in "iu":
        arr: np.ndarray = values.astype(np.int64, copy=False).ravel()
    else:
        try:
            arr = np.asarray(values, dtype=np.float64).ravel()
        except (TypeError, ValueError):
            seq = list(values)
            for i, item in enumerate(seq):
                try:
                    float(item)
                except (TypeError, ValueError):
                    raise InputError(f"{_at(where, i, line_offset)}: not an integer length") from None
            raise InputError(f"{where}: the lengths are not numbers") from None
        bad = ~np.isfinite(arr)
        if bad.any():
            i = int(np.argmax(bad))
            raise InputError(f"{_at(where, i, line_offset)}: not a length (NaN or infinite)")
        frac = arr != np.floor(arr)
        if frac.any():
            i = int(np.argmax(frac))
            raise InputError(f"{_at(where, i, line_offset)}: not an integer length (a fraction)")
        if arr.size and np.abs(arr).max() >= MAX_LENGTH:
            i = int(np.argmax(np.abs(arr)))
            raise InputError(f"{_at(where, i, line_offset)}: too large to be a sequence length")
        arr = arr.astype(np.int64)
    if arr.size == 0:
        raise InputError(f"{where}: no lengths found")
    nonpos = arr <= 0
    if nonpos.any():
        i = int(np.argmax(nonpos))
        raise InputError(f"{_at(where, i, line_offset)}: a length that is not positive")
    return arr


def _at(where: str, index: int, line_offset: int) -> str:
    if line_offset:
        return f"{where} line {index + line_offset}"
    return f"{where} item {index}"


def read_lengths(path: str | Path, column: str | None = None, field: str | None = None) -> LengthData:
    """Read a length file in any supported format (see the module docstring)."""
    from neuronprobe.files import read_input

    p = Path(path)
    # Bounded: never /dev/zero or a socket; <(...) is fine, and a pipe nobody writes to is a bounded wait.
    data = read_input(p, "length", pipes=True)
    suffix = p.suffix.lower()
    if suffix in PARQUET_SUFFIXES:
        return _read_parquet(p, data, column)
    try:
        text = data.decode("utf-8-sig")  # a byte-order mark (Excel, Notepad) is not part of the first line
    except UnicodeDecodeError as exc:
        raise InputError(f"{p}: cannot read it as text (not UTF-8 at byte {exc.start})") from None
    if field is not None or suffix in JSONL_SUFFIXES:
        return _read_jsonl(p, text, field)
    if column is not None or suffix in DELIMITED_SUFFIXES:
        sep = DELIMITED_SUFFIXES.get(suffix) or _sniff_separator(text) or ","
        return _read_delimited(p, text, sep, column)
    sniffed = _sniff_separator(text)
    if sniffed:
        return _read_delimited(p, text, sniffed, column)
    if text.lstrip().startswith("{"):
        return _read_jsonl(p, text, field)
    return _read_plain(p, text)


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            return line
    return ""


def _sniff_separator(text: str) -> str | None:
    line = _first_line(text)
    if "\t" in line:
        return "\t"
    if "," in line:
        return ","
    return None


def _parse_clean(text: str) -> np.ndarray | None:
    """Whitespace-separated integers parsed in C, or None when anything does not parse."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy warns (here: raises) on unparsable text
        try:
            return np.fromstring(text, dtype=np.int64, sep=" ")
        except (ValueError, DeprecationWarning, AttributeError):
            return None


def _read_plain(p: Path, text: str) -> LengthData:
    # Fast path for the common clean file (no comments, one token per line); anything
    # unusual goes through the line-by-line loop below, which names the bad line.
    if "#" not in text and not _INNER_SPACE.search(text):
        fast = _parse_clean(text)
        if fast is not None and fast.size and fast.min() > 0 and fast.max() < MAX_LENGTH:
            return LengthData(fast, source=str(p))
    values: list[int] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if len(line) > 19 and line.lstrip("+-").isdigit():  # past int64 (and past Python's digit limit): no length
            raise InputError(f"{p} line {lineno}: too large to be a sequence length")
        try:
            values.append(int(line))
        except ValueError:
            try:
                number = float(line)
            except ValueError:
                raise InputError(f"{p} line {lineno}: not an integer length") from None
            if not math.isfinite(number):
                raise InputError(f"{p} line {lineno}: not a length (NaN or infinite)") from None
            if number != int(number):
                raise InputError(f"{p} line {lineno}: not an integer length (a fraction)") from None
            values.append(int(number))
        if values[-1] <= 0:
            raise InputError(f"{p} line {lineno}: a length that is not positive")
        if values[-1] >= MAX_LENGTH:
            raise InputError(f"{p} line {lineno}: too large to be a sequence length")
    if not values:
        raise InputError(f"{p}: no lengths found (the file is empty or only comments)")
    return LengthData(np.asarray(values, dtype=np.int64), source=str(p))


def _pick_column(p: Path, columns: list[str], column: str | None, flag: str) -> str:
    if column is not None:
        if column not in columns:
            raise InputError(f"{p} has no {flag.lstrip('-')} {column!r}; it has {', '.join(map(repr, columns))}")
        return column
    data_columns = [c for c in columns if c.strip().lower() not in TIMESTAMP_NAMES]
    if len(data_columns) == 1:
        return data_columns[0]
    raise InputError(f"{p} has {len(columns)} columns; choose the lengths with {flag} ({', '.join(map(repr, columns))})")


def _time_column(columns: list[str], chosen: str) -> str | None:
    for c in columns:
        if c != chosen and c.strip().lower() in TIMESTAMP_NAMES:
            return c
    return None


def parse_timestamps(values: Any) -> np.ndarray | None:
    """Sortable times on every row: numbers (seconds, finite) or dates, else None (the column is then not
    taken as times). ISO 8601 is tried first: it parses 10^6 stamps in a fraction of a second where pandas'
    mixed-format guess takes seconds. Shared by the length reader and the decode-trace reader."""
    import pandas as pd

    series = pd.Series(values)
    if series.dtype.kind in "iuf":
        return None if series.isna().any() else _finite(series.to_numpy(dtype=np.float64))
    try:
        numeric = pd.to_numeric(series, errors="coerce")
    except OverflowError:  # an integer past float range: not a time in seconds
        numeric = None
    if numeric is not None and not numeric.isna().any():
        return _finite(numeric.to_numpy(dtype=np.float64))
    for fmt in ("ISO8601", "mixed"):
        try:
            parsed = pd.to_datetime(series, errors="coerce", format=fmt)
        except (TypeError, ValueError):
            continue
        if not parsed.isna().any():
            return parsed.to_numpy(dtype="datetime64[ns]")
    return None


def _finite(seconds: np.ndarray) -> np.ndarray | None:
    """Numeric stamps whose every value and whose span are finite, else None: ``inf`` (or 1e308 next to -1e308)
    is no arrival time, and an infinite gap would reach the schedule's arithmetic as NaN."""
    with np.errstate(over="ignore", invalid="ignore"):
        ok = bool(np.isfinite(seconds).all()) and (not len(seconds) or bool(np.isfinite(seconds.max() - seconds.min())))
    return seconds if ok else None


def _read_delimited(p: Path, text: str, sep: str, column: str | None) -> LengthData:
    import pandas as pd

    try:
        frame = pd.read_csv(io.StringIO(text), sep=sep, dtype=str, keep_default_na=False, skip_blank_lines=True, comment=None)
    except pd.errors.EmptyDataError:
        raise InputError(f"{p}: no lengths found (the file is empty)") from None
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"{p}: cannot read it as {'TSV' if sep == chr(9) else 'CSV'} ({str(exc).strip()})") from None
    columns = [str(c) for c in frame.columns]
    chosen = _pick_column(p, columns, column, "--column")
    raw = frame[chosen].str.strip()
    if raw.empty:
        raise InputError(f"{p}: column {chosen!r} has no lengths")
    empty = raw == ""
    if empty.any():
        i = int(np.argmax(empty.to_numpy()))
        raise InputError(f"{p} line {i + 2}: column {chosen!r} is empty")
    numbers = pd.to_numeric(raw, errors="coerce")
    bad = numbers.isna() & ~raw.str.lower().isin({"nan", "inf", "-inf", "infinity"})
    if bad.any():
        i = int(np.argmax(bad.to_numpy()))
        raise InputError(f"{p} line {i + 2}: column {chosen!r} is not an integer length")
    lengths = validate_lengths(numbers.to_numpy(dtype=np.float64), str(p), line_offset=2)
    time_col = _time_column(columns, chosen)
    stamps = parse_timestamps(frame[time_col]) if time_col else None
    return LengthData(lengths, str(p), chosen, stamps, time_col if stamps is not None else None)


def _read_jsonl(p: Path, text: str, field: str | None) -> LengthData:
    values: list[Any] = []
    lines: list[int] = []
    stamps: list[Any] = []
    time_key: str | None = None
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        try:
            obj = json.loads(line, parse_int=_json_int)
        except json.JSONDecodeError as exc:
            raise InputError(f"{p} line {lineno}: not valid JSON ({exc.msg})") from None
        except ValueError:  # an integer literal past Python's digit limit
            raise InputError(f"{p} line {lineno}: too large to be a sequence length") from None
        except RecursionError:
            raise InputError(f"{p} line {lineno}: JSON nested too deep") from None
        if isinstance(obj, dict):
            if field is None:
                raise InputError(f"{p} line {lineno}: a JSON object; choose the length with --field ({', '.join(map(repr, obj))})")
            if field not in obj:
                raise InputError(f"{p} line {lineno}: no field {field!r}; it has {', '.join(map(repr, obj))}")
            value = obj[field]
            if time_key is None and not stamps and not values:
                time_key = next((k for k in obj if k != field and k.strip().lower() in TIMESTAMP_NAMES), None)
            if time_key is not None:
                stamps.append(obj.get(time_key))
        elif isinstance(obj, list):
            raise InputError(f"{p} line {lineno}: a JSON list; JSON Lines needs one object or number per line")
        else:
            value = obj
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InputError(f"{p} line {lineno}: not an integer length")
        values.append(value)
        lines.append(lineno)
    if not values:
        raise InputError(f"{p}: no lengths found (the file is empty)")
    try:
        lengths = validate_lengths(np.asarray(values, dtype=np.float64), str(p))
    except InputError as exc:
        # Re-point the message at the file line of the offending item.
        msg = str(exc)
        marker = f"{p} item "
        if msg.startswith(marker):
            idx = int(msg[len(marker) :].split(":", 1)[0])
            msg = f"{p} line {lines[idx]}:" + msg.split(":", 1)[1]
        raise InputError(msg) from None
    times = parse_timestamps(stamps) if time_key is not None and len(stamps) == len(values) else None
    return LengthData(lengths, str(p), field, times, time_key if times is not None else None)


def _json_int(text: str) -> int | float:
    """A JSON integer within int64, else MAX_LENGTH (refused as too large, never an OverflowError or a digit limit)."""
    if len(text.lstrip("-")) > 19:
        return float(MAX_LENGTH)
    value = int(text)
    return value if -(2**63) <= value < 2**63 else float(MAX_LENGTH)


def _read_parquet(p: Path, data: bytes, column: str | None) -> LengthData:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise InputError(f"{p}: reading Parquet needs pyarrow (pip install 'neuronprobe[parquet]')") from None
    try:
        table = pq.read_table(pa.BufferReader(data))
    except Exception as exc:  # pyarrow raises several types for a corrupt file
        raise InputError(f"{p}: cannot read it as Parquet ({exc})") from None
    columns = [str(c) for c in table.column_names]
    chosen = _pick_column(p, columns, column, "--column")
    col = table.column(chosen).to_pandas()
    if col.isna().any():
        i = int(np.argmax(col.isna().to_numpy()))
        raise InputError(f"{p} row {i}: column {chosen!r} is empty (null or NaN)")
    try:
        numbers = col.to_numpy(dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(f"{p}: column {chosen!r} is not numeric") from None
    lengths = validate_lengths(numbers, f"{p} column {chosen!r}")
    time_col = _time_column(columns, chosen)
    stamps = parse_timestamps(table.column(time_col).to_pandas()) if time_col else None
    return LengthData(lengths, str(p), chosen, stamps, time_col if stamps is not None else None)


def read_step_times(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """Measured step times: a CSV/TSV with columns ``length`` and ``seconds``."""
    import pandas as pd

    from neuronprobe.files import read_input

    p = Path(path)
    data = read_input(p, "step times", pipes=True)
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    sep = "\t" if p.suffix.lower() in {".tsv", ".tab"} else ","
    try:
        frame = pd.read_csv(io.BytesIO(data), sep=sep)
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise InputError(f"{p}: cannot read step times ({str(exc).strip()})") from None
    lower = {str(c).strip().lower(): c for c in frame.columns}
    missing = [c for c in ("length", "seconds") if c not in lower]
    if missing:
        raise InputError(f"{p}: step times need columns 'length' and 'seconds'; it has {', '.join(map(repr, frame.columns))}")
    try:
        lengths = pd.to_numeric(frame[lower["length"]], errors="coerce").to_numpy(dtype=np.float64)
        seconds = pd.to_numeric(frame[lower["seconds"]], errors="coerce").to_numpy(dtype=np.float64)
    except (OverflowError, ValueError, TypeError):  # pandas raises even under errors="coerce" for an int past float's range
        raise InputError(f"{p}: a length or seconds value is not a finite number in float range") from None
    bad = ~np.isfinite(lengths) | ~np.isfinite(seconds)
    if bad.any():
        raise InputError(f"{p} line {int(np.argmax(bad)) + 2}: length and seconds must be finite numbers")
    from neuronprobe.defaults import MAX_SECONDS
    from neuronprobe.limits import MAX_BUCKET_LENGTH

    # Ceilings (limits.py): a step of 1e308 s fitted a cost of 5e305*x with R^2 = nan and was used as if measured.
    over = (lengths > MAX_BUCKET_LENGTH) | (seconds > MAX_SECONDS)
    if over.any():
        raise InputError(f"{p} line {int(np.argmax(over)) + 2}: a length above {MAX_BUCKET_LENGTH} or a step above {MAX_SECONDS:g} seconds (a week)")
    return lengths, seconds
