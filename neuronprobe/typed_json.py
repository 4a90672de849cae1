"""The one strict reader and writer of neuronprobe's JSON files: a dataclass tree is the schema.

Every JSON file neuronprobe writes (the report, ``audit --json``, ``diff --json``,
``buckets --json``, the nightly's summary and shard manifests) is a dataclass tree
written with :func:`dataclasses.asdict`, and read back by :func:`build_typed`, which
rebuilds the same objects and checks every value against the field's type as it goes,
so a bad file is refused with one sentence naming the field instead of failing later
with a traceback.

The files other than the report are *documents* (:class:`DocumentSchema`): their first
key is ``schema_version``. A file without one was written before neuronprobe versioned
that output; its shape is schema 1's, so it loads as schema 1. A file from a newer
neuronprobe (a larger version) is refused with a sentence naming both versions, and a
document is strict: a key its schema does not know is refused too (a typo in a
hand-edited baseline, or a newer writer's field, never silently dropped).

Below the report and the audit: it knows dataclasses, the closed vocabularies and the
JSON codec, nothing of what the documents mean.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar, Union

from neuronprobe.errors import InputError, ReportFormatError
from neuronprobe.vocabulary import (
    AutoCast,
    CaptureStrategy,
    CauseKind,
    Fit,
    LowType,
    Origin,
    OutputKind,
    ParityRun,
    Phase,
    ReferenceBackend,
    ReferenceTensorKind,
    ServedDtype,
    StepStatus,
    TopVerdict,
    Verdict,
    Word,
    parse_closed,
)

T = TypeVar("T")

VERSION_KEY = "schema_version"
# A document larger than this is not one neuronprobe wrote (the largest, a nightly summary of
# thousands of models or a diff of two huge reports, is a few MiB).
MAX_DOCUMENT_BYTES = 256 * 2**20


def build_typed(tp: Any, value: Any, where: str, *, strict: bool = False) -> Any:
    """Rebuild a typed value (a dataclass tree) from JSON data, checking types as it goes.

    ``where`` names the position for error messages (``report.findings[3].line``).
    ``strict``: an object key that is no field of its dataclass is refused too (documents;
    a report reads its derived top-level keys ``verdict`` and ``verdict_words`` itself).
    Raises ReportFormatError on the first mismatch.
    """
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if isinstance(tp, type) and issubclass(tp, Word):
        if not isinstance(value, str):
            raise ReportFormatError(f"{where}: expected {_noun(tp)} (a string), got {type(value).__name__}")
        try:
            return parse_closed(tp, value, _noun(tp))
        except ValueError as exc:
            raise ReportFormatError(f"{where}: {exc}") from None
    if tp is Path:
        if not isinstance(value, str):
            raise ReportFormatError(f"{where}: expected a path (a string), got {type(value).__name__}")
        return Path(value)
    if origin in (Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return build_typed(arg, value, where, strict=strict)
            except ReportFormatError as exc:
                errors.append(str(exc))
        raise ReportFormatError(errors[0] if errors else f"{where}: unexpected null")
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _build_dataclass(tp, value, where, strict)
    if origin is list:
        if not isinstance(value, list):
            raise ReportFormatError(f"{where}: expected a list, got {type(value).__name__}")
        (item,) = typing.get_args(tp) or (Any,)
        return [build_typed(item, v, f"{where}[{i}]", strict=strict) for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ReportFormatError(f"{where}: expected an object, got {type(value).__name__}")
        key_tp, item = typing.get_args(tp) or (str, Any)
        return {build_typed(key_tp, str(k), f"{where}.{k}"): build_typed(item, v, f"{where}.{k}", strict=strict) for k, v in value.items()}
    return _build_scalar(tp, value, where)


def _build_dataclass(tp: type, value: Any, where: str, strict: bool) -> Any:
    if not isinstance(value, dict):
        raise ReportFormatError(f"{where}: expected an object, got {type(value).__name__}")
    hints = typing.get_type_hints(tp)
    fields = dataclasses.fields(tp)
    if strict:
        names = {f.name for f in fields}
        unknown = next((k for k in value if k not in names), None)
        if unknown is not None:
            raise ReportFormatError(f"{where}.{unknown}: unknown field (not in this neuronprobe's schema)")
    kwargs = {}
    for f in fields:
        if f.name in value:
            kwargs[f.name] = build_typed(hints[f.name], value[f.name], f"{where}.{f.name}", strict=strict)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ReportFormatError(f"{where}: missing field '{f.name}'")
    return tp(**kwargs)


def _build_scalar(tp: Any, value: Any, where: str) -> Any:
    if tp is float:
        from neuronprobe.jsonio import number

        read = number(value)  # "NaN" / "Infinity": how the codec writes a non-finite float
        if read is None:
            raise ReportFormatError(f"{where}: expected a number, got {type(value).__name__}")
        return read
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ReportFormatError(f"{where}: expected an integer, got {type(value).__name__}")
        return value
    if tp in (str, bool):
        if not isinstance(value, tp):
            raise ReportFormatError(f"{where}: expected {tp.__name__}, got {type(value).__name__}")
        return value
    raise ReportFormatError(f"{where}: cannot read type {tp!r}")


# How each closed set is named in a rejection ("unknown verdict 'foo'; expected one of ...").
_NOUNS: dict[type[Word], str] = {
    Verdict: "verdict",
    TopVerdict: "verdict",
    Origin: "origin",
    Phase: "phase",
    CauseKind: "cause kind",
    StepStatus: "step status",
    Fit: "fit",
    CaptureStrategy: "capture strategy",
    AutoCast: "auto-cast",
    LowType: "auto-cast type",
    ServedDtype: "dtype",
    ParityRun: "parity run",
    OutputKind: "output kind",
    ReferenceBackend: "reference backend",
    ReferenceTensorKind: "reference tensor kind",
}


def _noun(tp: type[Word]) -> str:
    return _NOUNS.get(tp, tp.__name__.lower())


# --- documents: the versioned JSON outputs besides the report ----------------------------------


@dataclass(frozen=True)
class DocumentSchema(Generic[T]):
    """One kind of JSON document: its dataclass, its schema version and how messages name it.

    Every version from 1 up to ``version`` is read as it is: so far each change was additive (new
    fields with defaults). A change of shape bumps ``version`` and adds the rewrite of the older
    shape here, as ``report/model.py``'s ``_upgrade`` does for reports.
    """

    name: str  # how a message names the file: "audit JSON"
    root: type[T]  # the dataclass the file is
    version: int  # the schema version this neuronprobe writes, and the newest it reads
    marker: str  # a key every such document has: without it the file is some other JSON
    hint: str  # what writes one: "`neuronprobe audit --json`"
    where: str = ""  # the root's name in field paths ("audit.findings[0].line"); default: the dataclass's name
    legacy_version_key: str | None = None  # where files written before ``schema_version`` kept their version, if anywhere

    def to_dict(self, value: T) -> dict[str, Any]:
        """The file's object: ``schema_version`` first, then the dataclass's fields."""
        if not isinstance(value, self.root):
            raise TypeError(f"{_a(self.name)} holds a {self.root.__name__}, not a {type(value).__name__}")
        return {VERSION_KEY: self.version, **dataclasses.asdict(value)}  # type: ignore[call-overload]

    def dumps(self, value: T) -> str:
        """The file's text: the codec (never NaN), indented, one trailing newline."""
        from neuronprobe.jsonio import dumps

        return dumps(self.to_dict(value), indent=2) + "\n"

    def from_dict(self, data: Any) -> T:
        """The typed object of a parsed document; ReportFormatError (one sentence, naming the field) otherwise."""
        if not isinstance(data, dict):
            raise ReportFormatError(f"not {_a(self.name)} (a JSON {_json_kind(data)}, not an object); write one with {self.hint}")
        if self.marker not in data:
            raise ReportFormatError(f"not {_a(self.name)} (no '{self.marker}' field); write one with {self.hint}")
        legacy = self.legacy_version_key
        if VERSION_KEY not in data and legacy is not None and legacy in data:
            data = dict(data)
            version = data.pop(legacy)  # an older file's own version key
        else:
            version = data.get(VERSION_KEY, 1)  # written before the version was: schema 1's shape
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise ReportFormatError(f"{VERSION_KEY} {json.dumps(version)[:40]} is no {self.name} schema version (a whole number from 1)")
        if version > self.version:
            raise ReportFormatError(
                f"written by a newer neuronprobe ({self.name} schema_version {version}; this neuronprobe reads 1 to {self.version}); upgrade neuronprobe to read it"
            )
        body = {k: v for k, v in data.items() if k != VERSION_KEY}
        result: T = build_typed(self.root, body, self.where or self.root.__name__, strict=True)
        return result

    def loads(self, text: str | bytes) -> T:
        """Parse and type a document's text: strict JSON (no NaN or Infinity), then :meth:`from_dict`."""
        from neuronprobe.jsonio import loads_strict

        try:
            data = loads_strict(text)
        except UnicodeDecodeError:
            raise ReportFormatError("not UTF-8 text") from None
        except json.JSONDecodeError as exc:
            raise ReportFormatError(f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
        except ValueError as exc:  # NaN / Infinity
            raise ReportFormatError(f"not valid JSON ({exc})") from None
        except RecursionError:
            raise ReportFormatError(f"JSON nested too deep to be {_a(self.name)}") from None
        try:
            return self.from_dict(data)
        except RecursionError:
            raise ReportFormatError(f"JSON nested too deep to be {_a(self.name)}") from None

    def load(self, path: str | Path, label: str | None = None) -> T:
        """Read a document file (bounded: a FIFO or /dev/zero is refused); every error names ``label`` (default: the path)."""
        from neuronprobe.files import read_input_text

        label = label or str(path)
        if not Path(path).exists() and not Path(path).is_symlink():
            raise ReportFormatError(f"{label}: no such file; write one with {self.hint}")
        try:
            text = read_input_text(path, self.name, cap=MAX_DOCUMENT_BYTES)
        except InputError as exc:
            raise ReportFormatError(f"{label}: {_after_path(str(exc), str(path))}") from None
        try:
            return self.loads(text)
        except ReportFormatError as exc:
            raise ReportFormatError(f"{label}: {exc}") from None


def _after_path(message: str, path: str) -> str:
    """A file reader's message without its leading ``path:`` (the caller's label replaces it)."""
    return message[len(path) + 2 :] if message.startswith(f"{path}: ") else message


def _a(noun: str) -> str:
    return f"an {noun}" if noun[:1].lower() in "aeio" else f"a {noun}"


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "list"
    if isinstance(value, str):
        return "string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    return "number"


__all__ = ["MAX_DOCUMENT_BYTES", "VERSION_KEY", "DocumentSchema", "build_typed"]
