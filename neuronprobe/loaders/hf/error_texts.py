"""The error texts the ``hf:`` loader learns from, read from ``data/error_texts.json``.

A default config that leaves a field unset, or inputs a forward does not take, show up as an
exception whose text says what is wrong (``The size of tensor a (32) must match the size of
tensor b (9)``). The fills of :mod:`.config` and the repairs of :mod:`.inputs.repairs` read
those texts. They are the words of Python, torch and transformers, not an API, so they live in
the data file, each with who prints it, the versions it was checked on, its provenance and an
example it must match; the code asks for a pattern by id.

The file ships with neuronprobe: an entry that is malformed, or whose example its pattern does
not match, is neuronprobe's bug (:class:`ErrorTextsError`, exit 3), found on first use and by
the tests.

Bottom of the package: it imports nothing from neuronprobe but the errors.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from neuronprobe.errors import InternalError

TEXTS_FILE = "error_texts.json"
SOURCE = f"loaders/hf/data/{TEXTS_FILE}"  # how messages name the bundled file
_KEYS = frozenset({"id", "regex", "ignore_case", "dot_all", "printed_by", "checked_on", "provenance", "example"})
_REQUIRED = frozenset({"id", "regex", "printed_by", "checked_on", "provenance", "example"})
PRINTERS = frozenset({"python", "torch", "transformers"})


class ErrorTextsError(InternalError):
    """The bundled error-text file is malformed: a bug in neuronprobe, named by entry."""


@dataclass(frozen=True)
class ErrorText:
    """One error text: its compiled pattern and what the file says about it."""

    id: str
    regex: re.Pattern[str]
    printed_by: tuple[str, ...]
    checked_on: tuple[tuple[str, str], ...]
    provenance: str
    example: str


def _entry(raw: Any, where: str) -> ErrorText:
    if not isinstance(raw, dict):
        raise ErrorTextsError(f"{SOURCE}: {where} is not an object")
    ident = raw.get("id", where)
    if missing := _REQUIRED - raw.keys():
        raise ErrorTextsError(f"{SOURCE}: pattern {ident!r} lacks {', '.join(sorted(missing))}")
    if unknown := raw.keys() - _KEYS:
        raise ErrorTextsError(f"{SOURCE}: pattern {ident!r} has unknown keys {', '.join(sorted(unknown))}")
    printers = tuple(raw["printed_by"])
    if not printers or not set(printers) <= PRINTERS:
        raise ErrorTextsError(f"{SOURCE}: pattern {ident!r}: printed_by must name some of {', '.join(sorted(PRINTERS))}")
    checked = raw["checked_on"]
    if not isinstance(checked, dict) or not checked or not all(isinstance(v, str) and v for v in checked.values()):
        raise ErrorTextsError(f"{SOURCE}: pattern {ident!r}: checked_on must map each tool to the versions it was checked on")
    flags = (re.IGNORECASE if raw.get("ignore_case") else 0) | (re.DOTALL if raw.get("dot_all") else 0)
    try:
        regex = re.compile(raw["regex"], flags)
    except re.error as exc:
        raise ErrorTextsError(f"{SOURCE}: pattern {ident!r} does not compile ({exc})") from exc
    if not regex.search(raw["example"]):
        raise ErrorTextsError(f"{SOURCE}: pattern {ident!r} does not match its own example")
    return ErrorText(ident, regex, printers, tuple(sorted(checked.items())), raw["provenance"], raw["example"])


@lru_cache(maxsize=1)
def error_texts() -> dict[str, ErrorText]:
    """Every error text of the bundled file, by id, validated."""
    try:
        raw = json.loads(resources.files("neuronprobe.loaders.hf").joinpath("data", TEXTS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ErrorTextsError(f"{SOURCE} cannot be read ({exc})") from exc
    entries = [_entry(item, f"pattern #{i}") for i, item in enumerate(raw.get("patterns", []))]
    found = {e.id: e for e in entries}
    if len(found) != len(entries):
        raise ErrorTextsError(f"{SOURCE}: pattern ids repeat")
    return found


def error_text(ident: str) -> re.Pattern[str]:
    """The compiled pattern of the error text ``ident``."""
    try:
        return error_texts()[ident].regex
    except KeyError:
        raise ErrorTextsError(f"{SOURCE} has no pattern {ident!r}") from None
