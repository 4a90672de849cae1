"""One night, as the library runs it: plan (every option checked before the first model), analyse, save.

``neuronprobe nightly`` only prints and exits; what runs, in which order the files are written and
when the result cache is committed is decided here:

* a whole night writes every report, then the index (a run killed while writing leaves the previous
  index, which links only complete reports), and commits the cache only then;
* a shard writes its manifest last (a shard folder with a manifest is complete; a killed shard has
  none and cannot be merged), then commits the cache it was given.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Night:
    """A checked plan of one night (or one shard of it): the config, the models, the workers and the cache."""

    settings: Any  # NightlyConfig
    date: str
    output_dir: Path
    models: list[Any]  # ModelConfig, this run's share (a shard's, or every model)
    jobs: int
    memory: Any  # MemoryPlan
    require_backend: str | None = None
    shard: tuple[int, int] | None = None  # (index, of), 1-based
    cache: Any = None  # ResultCache, or None when off


@dataclass
class NightRun:
    """What a night (``result``, a NightlyResult) or a shard (``analysed``) gave, and the notes of its cache."""

    result: Any = None
    analysed: list[Any] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def failed(self) -> list[Any]:
        return [a for a in self.analysed if a.report is None]


def plan_night(
    config: Path,
    output_dir: Path,
    *,
    date: str | None = None,
    require_backend: str | None = None,
    jobs: int | None = None,
    total_memory: str | None = None,
    shard: str | None = None,
    history: Path | None = None,
    cache_dir: Path | None = None,
    no_cache: bool = False,
) -> Night:
    """Every option before the first model: the date, the config, the workers, the backend, the shard, the cache, and the outputs against the inputs."""
    from neuronprobe.files import check_outputs
    from neuronprobe.nightly.run import check_date, check_required_backend, input_files, load_config, output_files, plan_workers, today_utc

    night = check_date(date) if date else today_utc()
    settings = load_config(config)
    count, memory = plan_workers(settings, jobs, total_memory)
    check_required_backend(settings, require_backend)
    models = settings.models
    part = None
    if shard is not None:
        from neuronprobe.nightly.shards import check_shard_folder, parse_shard, shard_models, shard_output_files

        part = parse_shard(shard)
        check_shard_folder(output_dir)
        mine = set(shard_models(settings, part[0], part[1], history))
        models = [m for m in settings.models if m.name in mine]
        outputs = shard_output_files([m.name for m in models])
    else:
        outputs = output_files(settings, night)
    cache = None
    if not no_cache and (cache_dir is not None or shard is None):
        from neuronprobe.nightly.cache import DEFAULT_CACHE_DIR, ResultCache

        cache = ResultCache(cache_dir if cache_dir is not None else output_dir / DEFAULT_CACHE_DIR, settings, require_backend, night)
    folders = [("--output-dir", output_dir), *([("--cache", cache.folder)] if cache is not None else [])]
    check_outputs([("the nightly output", output_dir / f) for f in outputs], input_files(settings), folders=folders)
    return Night(settings, night, output_dir, models, count, memory, require_backend, part, cache)


def run_night(night: Night, *, command_line: str, on_done: Callable[[Any], None] | None = None) -> NightRun:
    """Analyse the night's models, each in its own worker (a shard: only its share, no diff, no index)."""
    from neuronprobe.nightly.run import analyse_models, isolated_analyze, run_nightly

    analyze = isolated_analyze(night.settings, night.memory.per_worker_bytes)
    common = {
        "require_backend": night.require_backend,
        "command_line": command_line,
        "analyze": analyze,
        "jobs": night.jobs,
        "memory": night.memory,
        "on_done": on_done,
        "cache": night.cache,
    }
    if night.shard is not None:
        return NightRun(analysed=analyse_models(night.settings, night.models, **common))
    return NightRun(result=run_nightly(night.settings, night.output_dir, night.date, **common))


def save_night(night: Night, done: NightRun, write: Callable[[Path, str], object]) -> NightRun:
    """Write what the run gave, in the order that keeps a killed run harmless (module docstring), then commit the cache."""
    if night.shard is not None:
        from neuronprobe.nightly.shards import shard_files, write_shard

        # For this run only: a second shard run into the same folder writes nothing (exit 2).
        write_shard(night.output_dir, shard_files(night.settings, night.shard[0], night.shard[1], night.date, night.require_backend, done.analysed))
    else:
        from neuronprobe.nightly.run import write_night

        write_night(done.result, night.output_dir, write)
    if night.cache is not None:  # only now: a run killed earlier leaves no cache entry
        night.cache.commit()
        done.notes = list(night.cache.notes)
    return done


__all__ = ["Night", "NightRun", "plan_night", "run_night", "save_night"]
