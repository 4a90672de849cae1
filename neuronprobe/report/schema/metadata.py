"""The report's run metadata: where and how the run happened."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class RunMetadata:
    """Where and how the run happened; the key a nightly baseline is matched on."""

    tool_version: str = ""
    time: str = ""
    host: str = ""
    command_line: str = ""
    git_commit: str | None = None
    git_dirty: bool | None = None
    python: str = ""
    platform: str = ""
    dtype: str = ""
    batch_size: int | None = None
    seq_len: int | None = None
    model_source: str = ""  # the model file path or the hf: spec
