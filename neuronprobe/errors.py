"""Typed errors. The library raises these; only the CLI turns them into exit codes.

Every message is one sentence a user can act on, naming the file (and line where
there is one). Exit codes: 2 for unusable input or configuration.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_GATE_FAILED = 1
EXIT_UNUSABLE = 2
EXIT_COULD_NOT_ANALYSE = 4  # valid input that no capture strategy could analyse


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


class BackendUnavailable(NeuronprobeError):
    """A required backend (the real Neuron SDK) is missing, a placeholder or a fake."""


class CouldNotAnalyse(NeuronprobeError):
    """Valid input that every capture strategy failed on: neuronprobe's limit, not the user's mistake."""

    exit_code = EXIT_COULD_NOT_ANALYSE
