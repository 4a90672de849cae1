"""Bounds on user input, checked before any work: one sentence (exit 2) instead of a runaway.

A length of 10^9, ``--set n_layer=1000000000`` or ``--max-buckets 1000000`` used
to grow past the machine's memory; ``--set n_layer=abc`` crashed inside
transformers. Each value is now checked against what it describes:

* ``--set KEY=VALUE``: the type of the config field's current value (a whole
  number for an int field, a finite number for a float field, true/false for a
  bool, ...), positive for counts and sizes, and at most :data:`MAX_MODULE_COUNT`
  for fields that multiply modules (layers, experts, blocks) or
  :data:`MAX_CONFIG_SIZE` for other sizes;
* sequence lengths: at most the model's maximum positions where its config has
  one (``max_position_embeddings``, ``n_positions``), else :data:`MAX_SEQ_LEN`;
  the error names the line, never its content (a lengths file may be any file);
* batch sizes: at most :data:`MAX_BATCH_SIZE`; shapes: every size at most
  :data:`MAX_DIM` and every tensor at most :data:`MAX_ELEMENTS` elements.

Bottom layer: numbers and messages only; torch is never imported here.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np

from neuronprobe.errors import InputError

# The longest sequence a model without a maximum in its config is analysed at:
# 2^20 tokens, above every context length in production today.
MAX_SEQ_LEN = 2**20
# The largest batch size: above any serving or training batch on one Neuron device.
MAX_BATCH_SIZE = 4096
# The largest size of one dimension in --shapes, and the most elements of one tensor (2^32).
MAX_DIM = 2**24
MAX_ELEMENTS = 2**32
# Config fields that multiply modules (layers, experts, blocks): each one is a Python object
# even on the meta device; 1024 is above every published architecture (GPT-3: 96 layers).
MAX_MODULE_COUNT = 1024
# Any other size or count in a config (vocabulary, hidden size, heads, positions): 2^22.
MAX_CONFIG_SIZE = 2**22
# The longest bucket `buckets` proposes or accepts (--max-len, --multiple-of, --min-bucket) and the
# longest decode length it reads: 2^24 tokens, 16x the longest context served today (1M tokens).
MAX_BUCKET_LENGTH = 2**24
# --speculation-length: speculative tokens per decode step (NxD Inference runs 2 to 7; 256 is far above).
MAX_SPECULATION_LENGTH = 256
# --tp-degree: tensor-parallel ranks (a trn2 ultraserver has 256 cores).
MAX_TP_DEGREE = 1024
# --reserve-gib: GiB kept per core (a core has 16 to 24 GiB; a reserve above this fits nothing).
MAX_RESERVE_GIB = 1024.0
# --max-graphs: compiled decode graphs (each takes minutes of neuronx-cc).
MAX_GRAPHS = 4096
# --tokens-per-second: decode steps per second in the replay (and --prefill-tokens-per-second).
MAX_TOKENS_PER_SECOND = 1e9
# --cost A,B (f(x) = A*x + B*x^2) and --compile-weight: at 2^24 tokens, B = 1e12 costs 2.8e26 per item, so a
# sum over any trace stays a finite float; --cost 1e308,1e308 overflowed to infinity (an internal error).
MAX_COST_COEFFICIENT = 1e12
# --host-memory-gib: the compile host's RAM (the largest EC2 hosts have 24 TiB).
MAX_HOST_MEMORY_GIB = 65536.0
# Config fields that hold a count or a size, and so must be at least 1.
_COUNT_FIELD = re.compile(
    r"(^n_|^num_|_size$|_dim$|^d_|vocab|layers?$|heads$|positions$|^n?_?embd$|^hidden|intermediate|channels|experts)",
    re.IGNORECASE,
)
_MODULE_FIELD = re.compile(r"(layer|expert|block)", re.IGNORECASE)
_MAX_POSITION_FIELDS = ("max_position_embeddings", "n_positions", "max_seq_len", "max_sequence_length", "seq_length")


# --- --set ------------------------------------------------------------------------------


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, int):
        return "a whole number"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def check_override(current: Any, key: str, value: Any, model: str, raw: str | None = None) -> Any:
    """``value`` checked against the type of the field's ``current`` value and its range; what to set.

    Raises an InputError naming the field: ``--set n_layer=abc: hf:gpt2's n_layer takes a whole number``
    (``raw`` is the value as the user wrote it).
    """
    shown = raw if raw is not None else repr(value)
    prefix = f"--set {key}={shown}: {model}'s {key}"
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(f"{prefix} must be a finite number")
    if isinstance(current, bool):
        ok = isinstance(value, bool)
    elif isinstance(current, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(current, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        value = float(value) if ok else value
    elif isinstance(current, str):
        ok = isinstance(value, str)
    elif isinstance(current, (list, tuple)):
        ok = isinstance(value, list)
    elif isinstance(current, dict):
        ok = isinstance(value, dict)
    else:  # None or an object: the config decides
        ok = True
    if not ok:
        raise InputError(f"{prefix} takes {_kind(current)}, e.g. --set {key}={_example(current)}")
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if is_number and _COUNT_FIELD.search(key) and not key.endswith("_id"):
        if value < 1:
            raise InputError(f"{prefix} is a count or a size and must be at least 1")
        ceiling = MAX_MODULE_COUNT if _MODULE_FIELD.search(key) else MAX_CONFIG_SIZE
        if value > ceiling:
            raise InputError(f"{prefix} is above neuronprobe's ceiling of {ceiling} for this kind of field")
    return value


def _example(current: Any) -> str:
    if isinstance(current, bool):
        return "true"
    if isinstance(current, (int, float)) and current:
        return str(current)
    if isinstance(current, int):
        return "1"
    if isinstance(current, list):
        return "[1,2]"
    return "VALUE"


# --- lengths, batch sizes, shapes ---------------------------------------------------------


def model_max_positions(module: Any) -> tuple[int, str] | None:
    """The longest sequence the model's config allows, and the field that says so."""
    for owner in (module, getattr(module, "model", None)):
        config = getattr(owner, "config", None)
        if config is None:
            continue
        for name in _MAX_POSITION_FIELDS:
            value = getattr(config, name, None)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value, name
    return None


def check_lengths(lengths: np.ndarray, path: Path | str, module: Any, model: str) -> None:
    """Every length at most the model's maximum positions (else MAX_SEQ_LEN); the line, not its content."""
    bound = model_max_positions(module)
    ceiling, why = (bound[0], f"{model}'s config.{bound[1]}") if bound else (MAX_SEQ_LEN, "neuronprobe's ceiling")
    over = np.asarray(lengths) > ceiling
    if not over.any():
        return
    index = int(np.argmax(over))
    place = locate_item(Path(path), index, int(np.asarray(lengths)[index]))
    raise InputError(f"{path} {place}: a length above {ceiling} ({why}); drop the longer requests, or analyse a model configured for them")


def locate_item(path: Path, index: int, value: int) -> str:
    """``line 12`` for the file line holding the ``index``-th length, found by its value; else ``item 12``."""
    token = re.compile(rf"(?<![\d.]){value}(?![\d.])")
    try:
        if not path.is_file():  # a pipe was read once already: opening it again would wait for a new writer
            return f"item {index + 1}"
        with open(path, encoding="utf-8", errors="replace") as fh:
            for number, line in enumerate(fh, start=1):
                if token.search(line) and not line.lstrip().startswith("#"):
                    return f"line {number}"
    except OSError:
        pass
    return f"item {index + 1}"


def check_batch_sizes(batch_sizes: list[int] | None, flag: str = "--batch-sizes") -> None:
    for b in batch_sizes or ():
        if isinstance(b, int) and b > MAX_BATCH_SIZE:
            raise InputError(f"{flag}: a batch size above {MAX_BATCH_SIZE} (neuronprobe's ceiling)")


def check_shape(shape: tuple[int, ...], where: str, what: str) -> None:
    """One input shape of --shapes: every size at most MAX_DIM, at most MAX_ELEMENTS elements."""
    if any(d > MAX_DIM for d in shape):
        raise InputError(f"{where}: {what} has a size above {MAX_DIM} (neuronprobe's ceiling)")
    if math.prod(shape) > MAX_ELEMENTS:
        raise InputError(f"{where}: {what} has more than {MAX_ELEMENTS} elements (neuronprobe's ceiling)")


def check_range(value: float | int | None, flag: str, least: float, most: float, *, whole: bool = True) -> None:
    """``least <= value <= most`` (a whole number when ``whole``); one sentence naming ``flag`` otherwise. None passes."""
    if value is None:
        return
    if isinstance(value, bool) or (whole and int(value) != value) or not math.isfinite(value) or not least <= value <= most:
        kind = "a whole number" if whole else "a number"
        raise InputError(
            f"{flag} {value:g}: use {kind} from {least:g} to {most:,g}" if not whole else f"{flag} {value}: use {kind} from {int(least)} to {int(most):,}"
        )


__all__ = [
    "MAX_BATCH_SIZE",
    "MAX_BUCKET_LENGTH",
    "MAX_CONFIG_SIZE",
    "MAX_COST_COEFFICIENT",
    "MAX_DIM",
    "MAX_ELEMENTS",
    "MAX_GRAPHS",
    "MAX_HOST_MEMORY_GIB",
    "MAX_MODULE_COUNT",
    "MAX_RESERVE_GIB",
    "MAX_SEQ_LEN",
    "MAX_SPECULATION_LENGTH",
    "MAX_TOKENS_PER_SECOND",
    "MAX_TP_DEGREE",
    "check_batch_sizes",
    "check_lengths",
    "check_override",
    "check_range",
    "check_shape",
    "model_max_positions",
]
