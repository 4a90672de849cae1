"""The nightly config's keys as the analysis request: every option ``neuronprobe analyze`` has.

A key of the top level is the default of every model; the same key in a ``[[models]]`` table wins
for that model (an ``[env]`` table is merged, the model's variables over the top level's). The keys
are the request's field names (``sdk``, ``rules``, ``decode_trace``, ``parity``, ``audit``, ``env``,
...), so a night asks for what a command line asks for. The command's outputs and gates are not
keys: the nightly writes its own files and gates regressions against the history.
"""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any

from neuronprobe.errors import ConfigError, InputError, ReportFormatError
from neuronprobe.request.model import FIELDS, OPTION_NAMES, OUTPUT_NAMES, AnalyzeRequest

# Keys the nightly does not take: the model (its own key), the command's outputs and gates.
NOT_NIGHTLY = frozenset({"model", *OUTPUT_NAMES, "fail_on", "fail_on_recompiles"})
REQUEST_KEYS: frozenset[str] = frozenset(OPTION_NAMES) - NOT_NIGHTLY
# Request keys that name a file or folder: relative to the config's folder.
FILE_KEYS = ("rules", "support_table", "decode_trace", "serving_trace", "compile_times", "audit")

_HINTS = typing.get_type_hints(AnalyzeRequest)


def _toml_type(name: str) -> Any:
    """The type a TOML value of request field ``name`` is read as (a tuple is a TOML list, env a table)."""
    if name == "env":
        return dict[str, str]
    hint = _HINTS[name]
    text = str(hint)
    if "tuple[int" in text:
        return list[int] | None
    if "tuple[str" in text:
        return list[str]
    if "tuple[pathlib.Path" in text:
        return list[str]
    return hint


def request_values(table: dict[str, Any], path: Path, where: str) -> dict[str, Any]:
    """The request keys of one table, typed; a value of the wrong type is one sentence naming the key."""
    from neuronprobe.report.model import build_typed

    values: dict[str, Any] = {}
    for name in sorted(REQUEST_KEYS & set(table)):
        try:
            value = build_typed(_toml_type(name), table[name], f"{where}.{name}" if where else name)
        except ReportFormatError as exc:
            raise ConfigError(f"{path}: {str(exc).lstrip('.')}") from None
        if name in FILE_KEYS and value is not None:
            file = (path.parent / value).expanduser()
            if not file.exists() and name != "audit":  # a missing audit root: the request's own sentence (check_request)
                raise ConfigError(f"{path}: {where + '.' if where else ''}{name}: {file} does not exist (relative paths are relative to the config file)")
            value = file.resolve() if file.exists() else file
        values[name] = value
    return values


def merged(top: dict[str, Any], own: dict[str, Any]) -> dict[str, Any]:
    """A model's request values: the top level's, the model's own over them (``env`` merged)."""
    out = {**top, **own}
    if "env" in top or "env" in own:
        out["env"] = {**top.get("env", {}), **own.get("env", {})}
    return out


def build(model: str, values: dict[str, Any], path: Path, where: str) -> AnalyzeRequest:
    """The checked request of one model; a bad field is the command line's sentence, prefixed with the config and the entry."""
    from neuronprobe.request.check import build_request, check_request

    try:
        return check_request(build_request(model, **values))
    except InputError as exc:
        raise ConfigError(f"{path}: {where}: {exc}") from None


def key_values(request: AnalyzeRequest) -> dict[str, Any]:
    """The request as JSON-able data, for the result cache's key (a changed option is a new key)."""
    out: dict[str, Any] = {}
    for name in sorted(REQUEST_KEYS):
        value = getattr(request, name)
        if isinstance(value, tuple):
            value = [list(v) if isinstance(v, tuple) else str(v) if isinstance(v, Path) else v for v in value]
        elif isinstance(value, Path):
            value = str(value)
        out[name] = value
    return out


__all__ = ["FIELDS", "FILE_KEYS", "REQUEST_KEYS", "build", "key_values", "merged", "request_values"]
