"""Traffic: the input shapes of a stream of calls, interned into distinct signatures.

A *signature* is what a static compiler (``torch_neuronx.trace``, XLA) keys a
compiled graph on: the shape of every tensor input, plus the value of every
Python scalar input (those are baked into the graph). A stream of 10^5 calls
usually has a few hundred distinct signatures, so the stream is stored as one
``int64`` id per call into the list of distinct signatures; every prediction
works on the distinct signatures and maps back with numpy indexing.

Three sources:

* ``--shapes FILE``: JSON Lines, one call per line: ``{"input_ids": [1, 384]}``
  for keyword inputs, ``[[1, 384], [1, 384]]`` for positional inputs.
* ``--lengths FILE [--batch-sizes 1,4,8]``: one request per length; every
  request is served at every batch size, and the model file's
  ``make_inputs(batch_size, seq_len)`` says what the inputs look like.
* ``sample_inputs()`` in the model file: an iterable of real inputs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from neuronprobe.errors import InputError, ModelLoadError
from neuronprobe.limits import check_shape

# A sample_inputs() that never ends is read up to this many calls (and said so).
MAX_SAMPLE_CALLS = 1_000_000


@dataclass(frozen=True)
class Const:
    """A Python scalar passed as an input: its value is part of the compiled graph."""

    value: Any

    def __str__(self) -> str:
        return f"={self.value!r}"


Shape = tuple[int, ...]
Entry = Shape | Const
Key = str | int  # a keyword name, or a positional index
Signature = tuple[tuple[Key, Entry], ...]


@dataclass(frozen=True)
class TensorTemplate:
    """How to make a tensor of any shape for an input: its dtype, device and a safe fill value."""

    dtype: Any
    device: Any
    fill: Any = None  # an element of the example (a valid index for integer inputs), or None

    def make(self, shape: Shape) -> Any:
        import torch

        if str(self.device) == "meta":
            return torch.empty(shape, dtype=self.dtype, device="meta")
        if self.dtype.is_floating_point or self.dtype.is_complex:
            return torch.randn(shape, dtype=self.dtype, device=self.device)
        if self.fill is not None:
            return torch.full(shape, self.fill, dtype=self.dtype, device=self.device)
        return torch.zeros(shape, dtype=self.dtype, device=self.device)


@dataclass
class Traffic:
    """A stream of calls as ids into its distinct signatures (first-seen order)."""

    signatures: list[Signature]
    ids: np.ndarray  # int64, one per call: index into ``signatures``
    source: str
    first_line: list[int] = field(default_factory=list)  # where each signature first appears (file line or item)
    line_label: str = "line"  # "line" for files, "item" for sample_inputs()
    lengths: np.ndarray | None = None  # per-request lengths (--lengths): what the bucket proposal reads
    pairs: list[tuple[int, int]] | None = None  # (batch_size, seq_len) of each signature (--lengths)
    signature_for: Callable[[int, int], Signature] | None = None  # make_inputs(b, L) as a signature
    templates: dict[Key, TensorTemplate] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def calls(self) -> int:
        return int(self.ids.size)

    def counts(self) -> np.ndarray:
        """Calls per distinct signature."""
        return np.bincount(self.ids, minlength=len(self.signatures))

    def where(self, index: int) -> str:
        """'FILE line N' for the first call with signature ``index``."""
        if index < len(self.first_line):
            return f"{self.source} {self.line_label} {self.first_line[index]}"
        return self.source


# --- signatures -------------------------------------------------------------------------


def signature_text(sig: Signature, names: dict[Key, str] | None = None) -> str:
    """``input_ids[1, 384]`` style text for a signature (reports, console)."""
    parts = []
    for key, entry in sig:
        name = (names or {}).get(key, str(key))
        if isinstance(entry, Const):
            parts.append(f"{name}{entry}")
        else:
            parts.append(f"{name}[{', '.join(str(d) for d in entry)}]")
    return " ".join(parts)


def signature_of(args: Sequence[Any], kwargs: dict[str, Any], where: str) -> Signature:
    """The signature of one call's real inputs (tensors by shape, scalars by value)."""
    import torch

    entries: list[tuple[Key, Entry]] = []
    pairs: list[tuple[Key, Any]] = [*enumerate(args), *sorted(kwargs.items())]
    for key, value in pairs:
        if isinstance(value, torch.Tensor):
            entries.append((key, tuple(int(d) for d in value.shape)))
        elif value is None or isinstance(value, (bool, int, float, str)):
            entries.append((key, Const(value)))
        else:
            label = f"input {key!r}" if isinstance(key, str) else f"positional input {key}"
            raise InputError(f"{where}: {label} is a {type(value).__name__}; traffic inputs must be tensors or Python scalars")
    return tuple(entries)


def templates_of(args: Sequence[Any], kwargs: dict[str, Any]) -> dict[Key, TensorTemplate]:
    """Tensor templates (dtype, device, fill) for each tensor input of a call."""
    import torch

    out: dict[Key, TensorTemplate] = {}
    pairs: list[tuple[Key, Any]] = [*enumerate(args), *kwargs.items()]
    for key, value in pairs:
        if not isinstance(value, torch.Tensor):
            continue
        fill = None
        if value.device.type != "meta" and value.numel() and not (value.dtype.is_floating_point or value.dtype.is_complex):
            fill = value.reshape(-1)[0].item()
        out[key] = TensorTemplate(dtype=value.dtype, device=value.device, fill=fill)
    return out


def intern(sigs_per_call: Iterable[Signature]) -> tuple[list[Signature], np.ndarray]:
    """Distinct signatures in first-seen order and one id per call."""
    index: dict[Signature, int] = {}
    ids = [index.setdefault(s, len(index)) for s in sigs_per_call]
    return list(index), np.asarray(ids, dtype=np.int64)


def renumber_first_seen(ids: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Renumber ids so that id order is first-appearance order.

    Returns (new ids per call, ``order``) where ``order[new_id]`` is the old id.
    Ids that never appear are dropped.
    """
    uniq, first = np.unique(ids, return_index=True)
    order = uniq[np.argsort(first, kind="stable")]
    remap = np.full(max(n, 1), -1, dtype=np.int64)
    remap[order] = np.arange(order.size, dtype=np.int64)
    return remap[ids], order


# --- --shapes JSON Lines ---------------------------------------------------------------------


def _shape(value: Any, where: str, what: str) -> Shape:
    if not isinstance(value, list) or any(isinstance(d, bool) or not isinstance(d, int) for d in value):
        raise InputError(f"{where}: {what} is not a shape; a shape is a list of whole numbers, e.g. [1, 384]")
    if any(d < 0 for d in value):
        raise InputError(f"{where}: {what} has a negative size")
    check_shape(tuple(value), where, what)
    return tuple(value)


def parse_shapes_line(line: str, where: str) -> Signature:
    """One JSON Lines call: an object of named shapes, or a list of positional shapes."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InputError(f"{where}: not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise InputError(f"{where}: JSON nested too deep") from None
    if isinstance(obj, dict):
        if not obj:
            raise InputError(f'{where}: an empty object; give each input\'s shape, e.g. {{"input_ids": [1, 384]}}')
        return tuple((str(k), _shape(v, where, f"input {k!r}")) for k, v in sorted(obj.items()))
    if isinstance(obj, list):
        if not obj:
            raise InputError(f"{where}: an empty list; give one shape per positional input, e.g. [[1, 384]]")
        if all(isinstance(v, int) and not isinstance(v, bool) for v in obj):
            raise InputError(
                f"{where}: {json.dumps(obj)} is a list of numbers; a line of positional inputs is a list of "
                f'shapes, e.g. [{json.dumps(obj)}], and named inputs are an object, e.g. {{"input_ids": {json.dumps(obj)}}}'
            )
        return tuple((i, _shape(v, where, f"positional input {i}")) for i, v in enumerate(obj))
    raise InputError(f"{where}: {json.dumps(obj)} is not a call; give an object of named shapes or a list of positional shapes")


def _read_text(p: Path, what: str) -> str:
    if not p.exists():
        raise InputError(f"{p}: no such {what} file")
    if p.is_dir():
        raise InputError(f"{p}: is a folder, not a {what} file")
    from neuronprobe.files import read_input_text

    return read_input_text(p, what, pipes=True)  # bounded: never /dev/zero, a pipe's writer waited on for a bounded time


def read_shapes(path: str | Path) -> Traffic:
    """Read a --shapes JSON Lines file; an InputError naming the file and line for any bad line.

    Identical lines are parsed once (traffic repeats itself), so 10^5 lines read in well under a second.
    """
    p = Path(path)
    text = _read_text(p, "shapes")
    by_text: dict[str, int] = {}
    index: dict[Signature, int] = {}
    first_line: list[int] = []
    ids: list[int] = []
    form: tuple[str, int] | None = None  # ("named" | "positional", first line)
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        sid = by_text.get(line)
        if sid is None:
            where = f"{p} line {lineno}"
            sig = parse_shapes_line(line, where)
            kind = "positional" if isinstance(sig[0][0], int) else "named"
            if form is None:
                form = (kind, lineno)
            elif form[0] != kind:
                raise InputError(f"{where}: {kind} inputs, but line {form[1]} gives {form[0]} inputs; use one form for every call")
            sid = index.get(sig)
            if sid is None:
                sid = index[sig] = len(index)
                first_line.append(lineno)
            by_text[line] = sid
        ids.append(sid)
    if not ids:
        raise InputError(f"{p}: no calls found (the file is empty)")
    return Traffic(list(index), np.asarray(ids, dtype=np.int64), str(p), first_line)


# --- --lengths with make_inputs -----------------------------------------------------------------


def meta_signature(make_inputs: Callable[[int, int], Any], where: str) -> Callable[[int, int], Signature]:
    """``make_inputs(b, L)`` as a signature, built under the meta device so no memory is touched."""

    def signature(batch_size: int, seq_len: int) -> Signature:
        import torch

        from neuronprobe.loaders.resolve import split_inputs

        call = f"{where}: make_inputs({batch_size}, {seq_len})"
        try:
            with torch.device("meta"):
                inputs = make_inputs(batch_size, seq_len)
        except Exception as exc:
            raise ModelLoadError(f"{call} raised {type(exc).__name__}: {exc}") from exc
        args, kwargs = split_inputs(inputs, call)
        return signature_of(args, kwargs, call)

    return signature


def traffic_from_lengths(
    lengths: np.ndarray,
    batch_sizes: Sequence[int],
    signature_for: Callable[[int, int], Signature],
    source: str,
) -> Traffic:
    """Request i at batch size j is call ``i * len(batch_sizes) + j``.

    ``make_inputs`` is called once per distinct (batch size, length) pair, not per call.
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    values, inverse = np.unique(lengths, return_inverse=True)
    nb = len(batch_sizes)
    pair_sig: dict[tuple[int, int], Signature] = {}
    sig_index: dict[Signature, int] = {}
    pair_ids = np.empty((values.size, nb), dtype=np.int64)
    for u, length in enumerate(values.tolist()):
        for j, b in enumerate(batch_sizes):
            sig = signature_for(int(b), int(length))
            pair_sig[(int(b), int(length))] = sig
            pair_ids[u, j] = sig_index.setdefault(sig, len(sig_index))
    raw = pair_ids[inverse].reshape(-1)
    ids, order = renumber_first_seen(raw, len(sig_index))
    signatures_by_old = list(sig_index)
    signatures = [signatures_by_old[o] for o in order.tolist()]
    # The (b, L) pair of each signature: its first call's pair.
    first_call = np.unique(ids, return_index=True)[1]
    pairs = [(int(batch_sizes[c % nb]), int(lengths[c // nb])) for c in first_call.tolist()]
    first_line = [int(c // nb) + 1 for c in first_call.tolist()]
    return Traffic(
        signatures,
        ids,
        source,
        first_line,
        line_label="request",
        lengths=lengths,
        pairs=pairs,
        signature_for=signature_for,
    )


# --- sample_inputs() --------------------------------------------------------------------------


def traffic_from_samples(samples: Callable[[], Iterable[Any]], where: str) -> Traffic:
    """Read the model file's ``sample_inputs()`` (up to MAX_SAMPLE_CALLS calls)."""
    from neuronprobe.loaders.resolve import split_inputs

    sigs: list[Signature] = []
    templates: dict[Key, TensorTemplate] = {}
    notes: list[str] = []
    try:
        iterator = iter(samples())
    except Exception as exc:
        raise ModelLoadError(f"{where}: sample_inputs() raised {type(exc).__name__}: {exc}") from exc
    index = 0
    while True:
        try:
            item = next(iterator)
        except StopIteration:
            break
        except Exception as exc:
            raise ModelLoadError(f"{where}: sample_inputs() raised {type(exc).__name__} at item {index}: {exc}") from exc
        label = f"{where}: sample_inputs() item {index}"
        args, kwargs = split_inputs(item, label)
        sigs.append(signature_of(args, kwargs, label))
        for key, template in templates_of(args, kwargs).items():
            templates.setdefault(key, template)
        index += 1
        if index >= MAX_SAMPLE_CALLS:
            notes.append(f"sample_inputs() yields more than {MAX_SAMPLE_CALLS:,} calls; read the first {MAX_SAMPLE_CALLS:,}")
            break
    if not sigs:
        raise InputError(f"{where}: sample_inputs() yielded no inputs")
    signatures, ids = intern(sigs)
    first = np.unique(ids, return_index=True)[1]
    return Traffic(
        signatures,
        ids,
        f"{where}: sample_inputs()",
        [int(i) for i in first.tolist()],
        line_label="item",
        templates=templates,
        notes=notes,
    )
