"""The strict typed reader: a dataclass tree rebuilt from JSON data, every value checked against its type hint."""

from __future__ import annotations

import dataclasses
import types
import typing
from pathlib import Path
from typing import Any, Union

from neuronprobe.errors import ReportFormatError
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


def build_typed(tp: Any, value: Any, where: str) -> Any:
    """Rebuild a typed value (a dataclass tree) from JSON data, checking types as it goes.

    ``where`` names the position for error messages (``report.findings[3].line``).
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
                return build_typed(arg, value, where)
            except ReportFormatError as exc:
                errors.append(str(exc))
        raise ReportFormatError(errors[0] if errors else f"{where}: unexpected null")
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if not isinstance(value, dict):
            raise ReportFormatError(f"{where}: expected an object, got {type(value).__name__}")
        hints = typing.get_type_hints(tp)
        kwargs = {}
        for f in dataclasses.fields(tp):
            if f.name in value:
                kwargs[f.name] = build_typed(hints[f.name], value[f.name], f"{where}.{f.name}")
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ReportFormatError(f"{where}: missing field '{f.name}'")
        return tp(**kwargs)
    if origin is list:
        if not isinstance(value, list):
            raise ReportFormatError(f"{where}: expected a list, got {type(value).__name__}")
        (item,) = typing.get_args(tp) or (Any,)
        return [build_typed(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ReportFormatError(f"{where}: expected an object, got {type(value).__name__}")
        key_tp, item = typing.get_args(tp) or (str, Any)
        return {build_typed(key_tp, str(k), f"{where}.{k}"): build_typed(item, v, f"{where}.{k}") for k, v in value.items()}
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
