"""A nightly split over the jobs of a CI matrix: ``nightly CONFIG --shard i/n``, then ``nightly merge``.

The convention is the test runners' (Playwright ``--shard=x/y``, 1-based, with a
merge step; vitest and Jest ``--shard``): each matrix job analyses its part of the
models and uploads its shard folder as an artifact; a final job downloads them all
and runs ``neuronprobe nightly merge SHARD_DIR... --history DIR``, which writes what
one nightly would have written. GitHub Actions allows 256 jobs per matrix
(/work/shared/research/serving.md, Scale-out), hence ``n <= 256``.

Assignment (:func:`assign_shards`): a model goes to ``sha256(name) mod n``, so a
model added to the config moves no other. With a history, the models that have a
measured duration from the last run are spread by the longest-processing-time rule
(longest first, each to the least-loaded shard); models without one still go by hash.

A shard folder holds ``<model>.json`` (its reports, not yet diffed) and
``_shard.json`` (the manifest: config hash, neuronprobe version, rule table version,
backend, the night, the shard and its models with their outcome and duration). A
shard never writes the index or the history; the merge checks that the shards
belong together and cover every model exactly once.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from pathlib import Path

from neuronprobe.defaults import MAX_SECONDS
from neuronprobe.errors import ConfigError, ReportFormatError
from neuronprobe.file_reads import file_sha256
from neuronprobe.nightly.documents import SHARD_MANIFEST_DOCUMENT, ShardEntry, ShardManifest
from neuronprobe.nightly.run import (
    DATE_RE,
    NAME_RE,
    SUMMARY_FILE,
    Analysed,
    NightlyConfig,
    NightlyResult,
    assemble_night,
    check_date,
    night_dirs,
)
from neuronprobe.report.model import load_report

MAX_SHARDS = 256  # GitHub Actions: at most 256 jobs per matrix (research/serving.md, Scale-out)
MANIFEST_FILE = "_shard.json"  # starts with "_": no model name can
MAX_MANIFEST_BYTES = 64 * 2**20  # a manifest lists at most a few thousand models
_SHARD_RE = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


def parse_shard(text: str) -> tuple[int, int]:
    """``"2/7"`` -> (2, 7): 1-based index, count at most 256; a ConfigError otherwise."""
    m = _SHARD_RE.match(text)
    if m is None:
        raise ConfigError(f"--shard {text!r}: write it INDEX/COUNT, e.g. 1/4")
    index, count = int(m.group(1)), int(m.group(2))
    if not 1 <= count <= MAX_SHARDS:
        raise ConfigError(f"--shard {text}: the count must be 1 to {MAX_SHARDS} (a CI matrix has at most {MAX_SHARDS} jobs)")
    if not 1 <= index <= count:
        raise ConfigError(f"--shard {text}: the index is 1-based and at most the count ({count})")
    return index, count


def _hash_shard(name: str, count: int) -> int:
    return int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:8], "big") % count


def assign_shards(names: list[str], count: int, durations: dict[str, float] | None = None) -> dict[str, int]:
    """Each model's shard, 0-based. Timed models by the longest-processing-time rule, the others by hash."""
    durations = durations or {}
    timed = sorted((n for n in names if n in durations), key=lambda n: (-durations[n], n))
    load = [0.0] * count
    out: dict[str, int] = {}
    for name in timed:
        shard = min(range(count), key=lambda i: (load[i], i))
        out[name] = shard
        load[shard] += durations[name]
    for name in names:
        if name not in out:
            out[name] = _hash_shard(name, count)
    return out


def last_durations(history_dir: Path) -> dict[str, float]:
    """Each model's analysis time in the most recent night that recorded one (``_nightly.json`` ``seconds``).

    A summary the strict typed reader refuses (unreadable, or from a newer neuronprobe) gives no durations:
    its models go by hash, as models without history do.
    """
    from neuronprobe.nightly.documents import SUMMARY_DOCUMENT

    out: dict[str, float] = {}
    for night in reversed(night_dirs(Path(history_dir))):
        try:
            summary = SUMMARY_DOCUMENT.load(Path(history_dir) / night / SUMMARY_FILE)
        except ReportFormatError:
            continue
        for entry in summary.models:
            if math.isfinite(entry.seconds) and entry.seconds >= 0:
                out.setdefault(entry.name, entry.seconds)
    return out


def config_sha256(config: NightlyConfig) -> str:
    """The hash of the config file's bytes: every shard of one night must have read the same config."""
    return file_sha256(str(config.path)) or ""  # read 1 MiB at a time; a FIFO put in its place is an OSError, never a hang


def rules_version() -> str:
    from neuronprobe.support import load_table

    return load_table().version


def shard_models(config: NightlyConfig, index: int, count: int, history_dir: Path | None = None) -> list[str]:
    """The names of the models shard ``index`` (1-based) of ``count`` analyses, in the config's order."""
    names = [m.name for m in config.models]
    assignment = assign_shards(names, count, last_durations(history_dir) if history_dir is not None else None)
    return [n for n in names if assignment[n] == index - 1]


def shard_files(config: NightlyConfig, index: int, count: int, date: str, require_backend: str | None, analysed: list[Analysed]) -> dict[str, str]:
    """The shard folder's files: one report per analysed model, then the manifest (last, so a complete manifest means a complete shard)."""
    from neuronprobe.version import __version__

    check_date(date)
    files = {f"{a.name}.json": a.report.to_json() for a in analysed if a.report is not None}
    manifest = ShardManifest(
        config_sha256=config_sha256(config),
        neuronprobe=__version__,
        rules=rules_version(),
        backend=config.backend,
        require_backend=require_backend or config.require_backend,
        date=date,
        history=config.history,
        shard=[index, count],
        config_models=[m.name for m in config.models],
        models=[ShardEntry(a.name, error=a.error or None, internal=a.internal, seconds=round(a.seconds, 3), reused_from=a.reused_from) for a in analysed],
    )
    files[MANIFEST_FILE] = SHARD_MANIFEST_DOCUMENT.dumps(manifest)  # versioned; the codec: never NaN
    return files


def shard_output_files(names: list[str]) -> list[str]:
    return [*(f"{n}.json" for n in names), MANIFEST_FILE]


@dataclass
class Shard:
    folder: Path
    manifest: ShardManifest

    @property
    def label(self) -> str:
        index, count = self.manifest.shard
        return f"{self.folder} (shard {index}/{count})"


# What every shard of one night must agree on, and how a message names it.
_SAME = (
    ("config_sha256", "config"),
    ("neuronprobe", "neuronprobe version"),
    ("rules", "rule table version"),
    ("backend", "backend"),
    ("require_backend", "required backend"),
)


def read_shard(folder: Path) -> Shard:
    """A shard folder's manifest, checked; a ConfigError (exit 2) names the folder."""

    file = Path(folder) / MANIFEST_FILE
    if not Path(folder).is_dir():
        raise ConfigError(f"{folder}: not a shard folder ({'it is not a folder' if Path(folder).exists() else 'no such folder'})")
    if not file.exists() and not file.is_symlink():
        raise ConfigError(f"{folder}: not a shard folder (no {MANIFEST_FILE}; was its shard run killed?)")
    try:
        # The strict typed reader, bounded: a manifest that is a FIFO or /dev/zero is refused, not waited on or read for ever.
        data = SHARD_MANIFEST_DOCUMENT.load(file)
    except ReportFormatError as exc:
        raise ConfigError(str(exc)) from None
    shard = data.shard
    if len(shard) != 2 or not 1 <= shard[0] <= shard[1] <= MAX_SHARDS:
        raise ConfigError(f"{file}: shard manifest field 'shard' must be [index, count] with 1 <= index <= count <= {MAX_SHARDS}")
    if not DATE_RE.match(data.date):
        raise ConfigError(f"{file}: shard manifest field 'date' is not YYYY-MM-DD")
    names = data.config_models
    if not all(NAME_RE.match(n) for n in names):
        raise ConfigError(f"{file}: shard manifest field 'config_models' must list model names")
    for entry in data.models:
        if entry.name not in names:
            raise ConfigError(f"{file}: shard manifest lists a model that is not in its config: {entry.name!r}"[:300])
        _check_entry(file, entry)
    return Shard(Path(folder), data)


def _check_entry(file: Path, entry: ShardEntry) -> None:
    """One model's outcome in a shard manifest: a duration the merge can use (the types are the reader's)."""
    seconds = entry.seconds
    if seconds is not None and (not math.isfinite(seconds) or not 0 <= seconds <= MAX_SECONDS):
        raise ConfigError(f"{file}: shard manifest entry {entry.name!r}: 'seconds' must be a number of seconds from 0 to {MAX_SECONDS:g}")


def check_shard_folder(folder: Path) -> None:
    """``--shard`` before any work: a folder that holds a shard already is another run's (exit 2, never overwritten)."""
    if (Path(folder) / MANIFEST_FILE).exists():
        raise ConfigError(f"--output-dir {folder}: the folder already holds a shard ({MANIFEST_FILE}); give each shard run its own folder, or remove it")


def write_shard(folder: Path, files: dict[str, str]) -> None:
    """Write a shard's files (the manifest last) for this run only: two runs into one folder never mix or overwrite."""
    from neuronprobe.files import write_folder_exclusive

    write_folder_exclusive(
        folder,
        [(name, text.encode("utf-8")) for name, text in files.items()],
        "--output-dir",
        taken="another shard run wrote into this folder first; give each shard run its own folder",
    )


def check_shards(shards: list[Shard]) -> None:
    """The shards come from one config, version, rule table and backend, and cover every model exactly once (else exit 2, naming the shard)."""
    if not shards:
        raise ConfigError("nightly merge: give at least one shard folder")
    first = shards[0]
    for shard in shards[1:]:
        for key, what in (*_SAME, ("date", "night"), ("history", "history length")):
            if getattr(shard.manifest, key) != getattr(first.manifest, key):
                raise ConfigError(
                    f"{shard.label} is foreign: its {what} is {getattr(shard.manifest, key)!r}, "
                    f"{first.label} has {getattr(first.manifest, key)!r}; merge the shards of one nightly run only"
                )
        if shard.manifest.shard[1] != first.manifest.shard[1]:
            raise ConfigError(f"{shard.label} is foreign: it is one of {shard.manifest.shard[1]} shards, {first.label} one of {first.manifest.shard[1]}")
    count = first.manifest.shard[1]
    by_index: dict[int, Shard] = {}
    for shard in shards:
        index = shard.manifest.shard[0]
        if index in by_index:
            raise ConfigError(f"shard {index}/{count} is given twice: {by_index[index].folder} and {shard.folder}")
        by_index[index] = shard
    missing = [i for i in range(1, count + 1) if i not in by_index]
    if missing:
        raise ConfigError(f"shard {missing[0]}/{count} is missing: {len(shards)} of {count} shard folders given")
    owner: dict[str, Shard] = {}
    for shard in shards:
        for entry in shard.manifest.models:
            name = entry.name
            if name in owner:
                raise ConfigError(f"model {name!r} is in two shards: {owner[name].label} and {shard.label}")
            owner[name] = shard
    lacking = [n for n in first.manifest.config_models if n not in owner]
    if lacking:
        raise ConfigError(f"model {lacking[0]!r} is in no shard ({len(lacking)} model(s) missing); was a shard run with another history?")


def _analysed(shard: Shard, entry: ShardEntry) -> Analysed:
    name = entry.name
    error = entry.error or ""
    reused = entry.reused_from
    out = Analysed(name, error=error, internal=entry.internal, seconds=entry.seconds or 0.0)
    out.reused_from = reused if reused is not None and DATE_RE.match(reused) else None
    if not error:
        try:
            out.report = load_report(str(shard.folder / f"{name}.json"))
        except ReportFormatError as exc:
            raise ConfigError(f"{shard.label}: the report of {name!r} is missing or unreadable ({exc})") from None
    return out


def merge_shards(folders: list[Path], history_dir: Path, date: str | None = None) -> NightlyResult:
    """What one nightly would have written, from its shard folders: reports diffed against the history, the summary, the index.

    Writes nothing (the CLI writes ``result.files`` into ``history_dir`` with
    :func:`neuronprobe.nightly.run.write_night`). Merging the same shards again gives the same files.
    """
    shards = [read_shard(f) for f in folders]
    check_shards(shards)
    manifest = shards[0].manifest
    night = check_date(date) if date else manifest.date
    entries = {e.name: (s, e) for s in shards for e in s.manifest.models}
    analysed = [_analysed(*entries[name]) for name in manifest.config_models]
    return assemble_night(analysed, Path(history_dir), night, manifest.history)


def merge_output_files(folders: list[Path], date: str | None = None) -> tuple[str, list[str]]:
    """The night a merge writes and its files relative to the history folder (for the output guard, before any work)."""
    shards = [read_shard(f) for f in folders]
    check_shards(shards)
    manifest = shards[0].manifest
    night = check_date(date) if date else manifest.date
    names = manifest.config_models
    from neuronprobe.nightly.run import INDEX_FILE

    return night, [*(f"{night}/{n}.{ext}" for n in names for ext in ("json", "html")), f"{night}/{SUMMARY_FILE}", INDEX_FILE]


__all__ = [
    "MANIFEST_FILE",
    "MAX_SHARDS",
    "assign_shards",
    "check_shards",
    "last_durations",
    "merge_output_files",
    "merge_shards",
    "parse_shard",
    "read_shard",
    "shard_files",
    "shard_models",
]
