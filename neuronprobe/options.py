"""Checks of the numbers options take, before any work: each bad value is one sentence naming the option (exit 2).

A time limit must be finite, positive and at most :data:`~neuronprobe.defaults.MAX_SECONDS`
(``--op-timeout nan`` would otherwise be accepted and never fire; ``--op-timeout 0``
would cut every observation off at once). A count must be a whole number within its
bounds (``--dataset-size 1000000000 --batch-size 1`` would otherwise build an epoch of a
billion batches and end in a memory limit that blames the model).
"""

from __future__ import annotations

import math
from typing import Any

from neuronprobe.defaults import MAX_EPOCH_BATCHES, MAX_SECONDS, MAX_TRAIN_COUNT
from neuronprobe.errors import InputError


def check_seconds(value: float, flag: str, *, zero: bool = False) -> float:
    """``value`` when it is a usable time limit in seconds; an InputError naming ``flag`` otherwise.

    ``zero``: 0 is allowed (an estimate such as --compile-seconds, not a limit).
    """
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise InputError(f"{flag} {value}: use a finite number of seconds")
    if value < 0 or (value == 0 and not zero):
        raise InputError(f"{flag} {value:g}: use a {'non-negative' if zero else 'positive'} number of seconds")
    if value > MAX_SECONDS:
        raise InputError(f"{flag} {value:g}: at most {MAX_SECONDS:g} seconds (a week)")
    return float(value)


def check_count(value: int, flag: str, least: int, most: int) -> int:
    """``value`` when ``least <= value <= most``; an InputError naming ``flag`` otherwise."""
    if value < least or value > most:
        raise InputError(f"{flag} {value}: use a whole number from {least} to {most:,}")
    return value


def check_epoch(dataset_size: int | None, batch_size: int | None) -> None:
    """--dataset-size and --batch-size within bounds, and an epoch of at most :data:`MAX_EPOCH_BATCHES` batches."""
    if dataset_size is not None:
        check_count(dataset_size, "--dataset-size", 1, MAX_TRAIN_COUNT)
    if batch_size is not None:
        check_count(batch_size, "--batch-size", 1, MAX_TRAIN_COUNT)
    if dataset_size is not None and batch_size is not None and -(-dataset_size // batch_size) > MAX_EPOCH_BATCHES:
        raise InputError(
            f"--dataset-size {dataset_size} --batch-size {batch_size}: an epoch of {-(-dataset_size // batch_size):,} batches; "
            f"neuronprobe walks at most {MAX_EPOCH_BATCHES:,} (raise --batch-size)"
        )


# Every whole number an option takes fits a 64-bit integer (numpy, torch and JSON readers in other
# languages use int64): Python's ints are unbounded, so typer accepts 10^30 and numpy raises later.
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


def _shown(value: Any) -> str:
    text = f"{value:g}" if isinstance(value, float) else str(value)
    return text if len(text) <= 24 else f"{text[:10]}...{text[-6:]} ({len(text)} digits)"


def check_number(value: Any, flag: str) -> None:
    """One number an option took: a whole number within int64, a float finite; an InputError naming ``flag`` otherwise."""
    if isinstance(value, bool):
        return
    if isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX:
        raise InputError(f"{flag} {_shown(value)}: use a whole number of at most {INT64_MAX:,} (a 64-bit integer)")
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(f"{flag} {_shown(value)}: use a finite number")


def check_parameters(params: dict[str, Any], flags: dict[str, str]) -> None:
    """Every number of a command's parsed options (``params``, by parameter name) within int64 and finite.

    The one check at the edge for every integer and float option of every command (the
    CLI calls it as each command starts); the command's own ranges (positive, at most a
    ceiling) are checked after it by the library. ``flags`` maps a parameter to its option.
    """
    for name, value in params.items():
        flag = flags.get(name, name)
        for item in value if isinstance(value, (list, tuple)) else (value,):
            check_number(item, flag)


__all__ = ["INT64_MAX", "check_count", "check_epoch", "check_number", "check_parameters", "check_seconds"]
