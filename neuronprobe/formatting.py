"""How numbers read, the same on the console and in the HTML report.

One function per kind of quantity. Both renderers (and the CLI's messages) use
these, so the same report never says "10.0 min" in one place and "10 min" in
another. Pure functions of their argument: no locale, no environment.
"""

from __future__ import annotations

import math

_BYTE_UNITS: tuple[str, ...] = ("B", "KiB", "MiB", "GiB", "TiB")
_KIB = 1024.0
# Durations below this read in seconds, below HOURS_FROM in minutes, above it in hours.
MINUTES_FROM_S = 120.0
HOURS_FROM_S = 2 * 3600.0


def format_bytes(n: float) -> str:
    """Bytes in binary units, as transfer sizes are usually quoted: ``8192`` -> ``8.0 KiB``, ``10`` -> ``10 B``."""
    value = float(n)
    for unit in _BYTE_UNITS:
        if abs(value) < _KIB or unit == _BYTE_UNITS[-1]:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= _KIB
    raise AssertionError("unreachable")  # pragma: no cover


def format_memory(n: int) -> str:
    """A memory size as the ``--max-memory`` messages quote it: three figures, no space: ``1.5GiB``, ``512 B``."""
    for unit, size in (("T", 2**40), ("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if n >= size:
            return f"{n / size:.3g}{unit}iB"
    return f"{n} B"


def format_duration(seconds: float) -> str:
    """A duration read at a glance: ``95 s``, ``0.25 s``, ``12.5 min``, ``4.0 h``."""
    if not math.isfinite(seconds):
        return f"{seconds} s"
    if abs(seconds) < MINUTES_FROM_S:
        return f"{seconds:.3g} s"
    if abs(seconds) < HOURS_FROM_S:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def format_percent(value: float, digits: int = 1) -> str:
    """A percentage given in percent (not a fraction): ``97.26`` -> ``97.3%``, ``1234.5`` -> ``1,234.5%``."""
    return f"{value:,.{digits}f}%"


def format_signed(value: float, digits: int = 1) -> str:
    """A change with its sign always shown: ``+1.5``, ``-0.2``, ``+0.0``."""
    return f"{value:+.{digits}f}"
