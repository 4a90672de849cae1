"""Typed errors. The library raises these; only the CLI turns them into exit codes.

Every message is one sentence a user can act on, naming the file (and line where
there is one). Exit codes: 2 for unusable input or configuration, 3 for a bug in
neuronprobe itself (:class:`InternalError`, or any exception that is not one of these).
"""

from __future__ import annotations

from collections.abc import Sequence

EXIT_OK = 0
EXIT_GATE_FAILED = 1
EXIT_UNUSABLE = 2
EXIT_INTERNAL = 3  # a bug in neuronprobe: a CI job can tell it from "your model file is broken" (2)

# Where an internal error tells the user to report it (pyproject.toml names no project URL).
BUG_REPORT_URL = "https://github.com/neuronprobe/neuronprobe/issues"
EXIT_COULD_NOT_ANALYSE = 4  # valid input that no capture strategy could analyse: read from the written report (capture strategy "none"), never raised


class NeuronprobeError(Exception):
    """Base class: a problem the user can fix, reported without a traceback."""

    exit_code: int = EXIT_UNUSABLE


class InputError(NeuronprobeError):
    """Unusable input: a model file, a traffic file, a length list, a flag value."""


class ModelLoadError(InputError):
    """The model file could not be imported, lacks a function, or its forward raised."""


class ReportFormatError(InputError):
    """A report JSON that is missing, truncated, corrupt or of an unknown schema."""


class ConfigError(InputError):
    """An unusable configuration file (nightly TOML) or combination of options."""


class GateFailed(NeuronprobeError):
    """A gate a Python call asked for failed (the command would exit 1): ``result`` is the report or audit, ``failures`` what failed."""

    exit_code: int = EXIT_GATE_FAILED

    def __init__(self, message: str, result: object = None, failures: Sequence[object] = ()) -> None:
        super().__init__(message)
        self.result = result
        self.failures = list(failures)


class BackendUnavailable(NeuronprobeError):
    """A required backend (the real Neuron SDK) is missing, a placeholder or a fake."""


class InternalError(Exception):
    """A bug in neuronprobe (e.g. its bundled tables disagree with its code): not the user's to fix, exit 3.

    Deliberately not a :class:`NeuronprobeError`: code that catches user-fixable
    problems (one model of a nightly, a notebook's ``except NeuronprobeError``) must
    not swallow a bug as if it were bad input.
    """

    exit_code: int = EXIT_INTERNAL


def root_error(exc: BaseException) -> BaseException:
    """The innermost real error under wrappers (``.original``, ``__cause__``): what the user can act on.

    torch wraps a model's own exception (dynamo's ``.original``, export's chained
    causes); a capture strategy's reason should name the model's error, not the wrapper.
    """
    seen: set[int] = set()
    while id(exc) not in seen:
        seen.add(id(exc))
        inner = getattr(exc, "original", None) or exc.__cause__
        if not isinstance(inner, BaseException):
            break
        exc = inner
    return exc


def error_line(exc: BaseException, limit: int | None = None) -> str:
    """``Type: first line`` of the innermost real error (:func:`root_error`), the line cut at ``limit`` characters."""
    root = root_error(exc)
    text = str(root).strip().splitlines()[0] if str(root).strip() else ""
    if limit is not None and len(text) > limit:
        text = text[:limit].rstrip() + " ..."
    return f"{type(root).__name__}: {text}" if text else type(root).__name__
