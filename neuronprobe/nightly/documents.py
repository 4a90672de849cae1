"""The nightly's own JSON files, typed and versioned: the night's summary and a shard's manifest.

``<date>/_nightly.json`` (:class:`NightSummary`) is the night in short for machines: one entry per
model with its status, baseline and regressions. The next night reads it back for the models'
durations (shard balancing) and a second run of the same date merges it. ``_shard.json``
(:class:`ShardManifest`) is what ``nightly merge`` checks before it trusts a shard folder.

Both are documents of :mod:`neuronprobe.typed_json`: ``schema_version`` first, read back strictly.
Schema 1 is the shape written before they carried a version: a summary without one reads as
schema 1, and a manifest's older ``format`` key is its schema version.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from neuronprobe.typed_json import DocumentSchema


@dataclass
class NightEntry:
    """One model of the night."""

    name: str
    status: str  # ok | regressed | failed | not-comparable ... (nightly/run.py ModelOutcome.status)
    error: str | None = None
    json: str | None = None  # the report, relative to the reports folder
    html: str | None = None
    baseline: str | None = None  # the night it was diffed against
    comparable: bool | None = None
    not_comparable_reason: str | None = None
    regressions: list[str] = field(default_factory=list)
    seconds: float = 0.0  # the analysis's wall time: the next sharded night balances by it
    reused_from: str | None = None  # the night whose cached result was reused


@dataclass
class NightSummary:
    """``<date>/_nightly.json``."""

    date: str
    models: list[NightEntry] = field(default_factory=list)


@dataclass
class ShardEntry:
    """One model a shard analysed, and how it went."""

    name: str
    error: str | None = None
    internal: bool = False  # the error was neuronprobe's own bug (exit 3), not the model's
    seconds: float | None = None
    reused_from: str | None = None


@dataclass
class ShardManifest:
    """``_shard.json``: what every shard of one night must agree on, and the shard's models."""

    config_sha256: str
    neuronprobe: str  # the version that wrote it
    rules: str  # the rule table's version
    backend: str
    date: str
    history: int
    shard: list[int]  # [index, count], 1-based
    config_models: list[str]
    models: list[ShardEntry] = field(default_factory=list)
    require_backend: str | None = None


SUMMARY_SCHEMA_VERSION = 1
SHARD_MANIFEST_SCHEMA_VERSION = 1

SUMMARY_DOCUMENT: DocumentSchema[NightSummary] = DocumentSchema(
    "nightly summary", NightSummary, SUMMARY_SCHEMA_VERSION, marker="models", hint="`neuronprobe nightly CONFIG`", where="summary"
)
SHARD_MANIFEST_DOCUMENT: DocumentSchema[ShardManifest] = DocumentSchema(
    "shard manifest",
    ShardManifest,
    SHARD_MANIFEST_SCHEMA_VERSION,
    marker="shard",
    hint="`neuronprobe nightly CONFIG --shard I/N`",
    where="manifest",
    legacy_version_key="format",
)

__all__ = [
    "SHARD_MANIFEST_DOCUMENT",
    "SHARD_MANIFEST_SCHEMA_VERSION",
    "SUMMARY_DOCUMENT",
    "SUMMARY_SCHEMA_VERSION",
    "NightEntry",
    "NightSummary",
    "ShardEntry",
    "ShardManifest",
]
