"""The JSON codec: what neuronprobe writes is JSON that every strict parser reads.

Python's ``json.dumps`` writes ``NaN``, ``Infinity`` and ``-Infinity`` for non-finite
floats by default; those are not JSON (RFC 8259), and ``jq``, JavaScript's
``JSON.parse`` and Go reject the whole file. A ``--train`` parity step with a NaN loss
wrote such a report. Every JSON file neuronprobe writes goes through :func:`dumps`:
a non-finite float becomes the string ``"NaN"``, ``"Infinity"`` or ``"-Infinity"``
(so the fact survives, readable), and ``allow_nan=False`` makes any float that slips
past the sanitiser a loud bug instead of a silent invalid file. :func:`number` reads
the strings back as floats.

Bottom layer: the standard library only.
"""

from __future__ import annotations

import json
import math
from typing import Any

# A non-finite float as it is written: a JSON string a reader can still tell apart.
NON_FINITE: dict[str, float] = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _word(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def sanitise(value: Any) -> Any:
    """``value`` with every non-finite float (at any depth of dicts, lists and tuples) replaced by its string."""
    if isinstance(value, float):
        return value if math.isfinite(value) else _word(value)
    if isinstance(value, dict):
        return {k: sanitise(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [sanitise(v) for v in value]
    return value


def dumps(value: Any, **kwargs: Any) -> str:
    """``json.dumps`` that never writes NaN or infinity (see the module docstring)."""
    return json.dumps(sanitise(value), allow_nan=False, **kwargs)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def loads_strict(text: str | bytes) -> Any:
    """``json.loads`` that refuses ``NaN``, ``Infinity`` and ``-Infinity`` (a ValueError), as strict parsers do."""
    return json.loads(text, parse_constant=_refuse_constant)


def number(value: Any) -> float | None:
    """A float read back from :func:`dumps`: a number, or one of the :data:`NON_FINITE` strings; None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and value in NON_FINITE:
        return NON_FINITE[value]
    return None


__all__ = ["NON_FINITE", "dumps", "loads_strict", "number", "sanitise"]
