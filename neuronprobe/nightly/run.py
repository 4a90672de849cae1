"""The nightly job: analyse a list of models, diff each against its last run, build the history page.

``load_config`` reads CONFIG.toml into dataclasses (a ConfigError, exit 2, names
the first bad key). ``run_nightly`` analyses each model, finds its baseline,
diffs, and returns a :class:`NightlyResult`: the files to write, in order, and
the regressions. It writes nothing; the CLI writes the files atomically in the
order given, the index page last, so a run killed at any point leaves complete
reports and the previous, still valid, index.

Layout of the reports folder::

    reports/
      index.html                run history: trend plots, each model's last diff
      2025-06-01/               one folder per night, the UTC date of the run (--date overrides)
        tiny_gpt.json           the report, with baseline_diff against the last run
        tiny_gpt.html
        _nightly.json           the night in short: status, baseline, regressions per model

Model names start with a letter or digit, so ``_nightly.json`` never collides
with a model. A rerun on the same date replaces the files of the models it runs; its
``_nightly.json`` keeps the entries of the other models (written under a lock, see :func:`write_night`).

The baseline of a model is its most recent report from an *earlier* night on the
same backend (real SDK or not) and target. When the compiler version changed in
between, the diff is shown but not gated (see report/diff.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import fcntl
import functools
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neuronprobe.analysis import TrafficOptions
from neuronprobe.backends import BACKEND_CHOICES
from neuronprobe.defaults import (
    DEFAULT_BACKEND,
    DEFAULT_HISTORY_NIGHTS,
    DEFAULT_OP_TIMEOUT_S,
    DEFAULT_TARGET,
    DEFAULT_TIMEOUT_S,
    MAX_SECONDS,
    MIN_MAX_BUCKETS,
    MIN_MAX_COMPILES,
)
from neuronprobe.errors import BackendUnavailable, ConfigError, InputError, InternalError, NeuronprobeError, ReportFormatError
from neuronprobe.gates import GateFailure, Gates, evaluate_gates
from neuronprobe.report.diff import diff_reports, run_label
from neuronprobe.report.model import Report, RunDiff, load_report
from neuronprobe.report.nightly_html import NightReport, render_index, run_status
from neuronprobe.request.model import AnalyzeRequest
from neuronprobe.support import TARGETS
from neuronprobe.support.native.stack import STACKS, check_stack
from neuronprobe.typed_json import build_typed

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

REQUIRABLE_BACKENDS: tuple[str, ...] = tuple(b for b in BACKEND_CHOICES if b != "auto")

INDEX_FILE = "index.html"
SUMMARY_FILE = "_nightly.json"  # starts with "_": no model name can
DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
# A model name becomes a file name: letters, digits, dot, dash, underscore; no leading dot or underscore.
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")

MAX_JOBS = 256  # parallel workers of one nightly
REGRESSION_GATE = Gates(fail_on_regression=True)  # the nightly gates every model on regressions against its baseline


# --- configuration ------------------------------------------------------------------


@dataclass(frozen=True)
class ModelConfig:
    """One ``[[models]]`` table: what to analyse and with which traffic.

    The table is flat: its traffic keys (``shapes``, ``lengths``, ``max_buckets``, ...) are the
    fields of :class:`~neuronprobe.analysis.TrafficOptions`, read into ``traffic``, so the
    config and ``neuronprobe analyze`` share one definition and one set of defaults.
    """

    name: str
    model: str  # a model file (absolute, resolved against the config's folder) or an hf: spec
    set: list[str] = dataclasses.field(default_factory=list)  # hf config overrides, KEY=VALUE
    target: str | None = None  # default: the top-level target
    backend: str | None = None  # default: the top-level backend
    stack: str | None = None  # xla | native (issue 36); default: the top-level stack, else the target's
    train: bool = False  # analyse one training step (neuronprobe analyze --train)
    # Files or folders the model reads that the result cache cannot see being read (native readers such as
    # safetensors): hashed by content into its cache key (see neuronprobe.file_reads).
    cache_inputs: list[str] = dataclasses.field(default_factory=list)
    # Folders the model file imports packages from (analyze --path), resolved against the config's folder;
    # the top-level `path = [...]` comes first for every model.
    path: list[str] = dataclasses.field(default_factory=list)
    traffic: TrafficOptions = dataclasses.field(default_factory=TrafficOptions)
    # The whole analysis request (every option `analyze` has; nightly/requests.py), built and checked
    # from the top-level defaults and this table; None for a ModelConfig made in code (built from the fields above).
    request: AnalyzeRequest | None = None


# The [[models]] keys that are traffic options, and those that are the model's own.
TRAFFIC_KEYS: frozenset[str] = frozenset(f.name for f in dataclasses.fields(TrafficOptions))
MODEL_KEYS: frozenset[str] = frozenset(f.name for f in dataclasses.fields(ModelConfig)) - {"traffic", "request"}
# Request keys only the top level takes: the worker's limits are the night's, and --require-backend overrides the config's.
TOP_ONLY_KEYS = frozenset({"timeout", "op_timeout", "max_memory", "require_backend"})


@dataclass(frozen=True)
class NightlyConfig:
    """The whole CONFIG.toml: defaults at the top level, one ``[[models]]`` table per model."""

    models: list[ModelConfig]
    target: str = DEFAULT_TARGET
    backend: str = DEFAULT_BACKEND
    stack: str | None = None  # xla | native (issue 36); default: what the SDK documents for each model's target
    require_backend: str | None = None  # "neuron": exit 2 unless the real Neuron stack is there
    timeout: float = DEFAULT_TIMEOUT_S  # per model: the wall-clock limit of its worker (and of the live backend)
    op_timeout: float = DEFAULT_OP_TIMEOUT_S
    history: int = DEFAULT_HISTORY_NIGHTS
    max_memory: str | None = None  # per model: resident-memory bound of its worker, e.g. "8G" or "50%"
    path: str = ""  # the config file, for messages

    def target_of(self, model: ModelConfig) -> str:
        return model.target or self.target

    def backend_of(self, model: ModelConfig) -> str:
        return model.backend or self.backend

    def stack_of(self, model: ModelConfig) -> str | None:
        return model.stack or self.stack


_PATH_KEYS = ("shapes", "lengths")


def load_config(path: str | Path) -> NightlyConfig:
    """Read and validate CONFIG.toml; relative paths in it are relative to its folder."""
    path = Path(path)
    from neuronprobe.files import read_input_text

    if not path.exists() and not path.is_symlink():
        raise ConfigError(f"{path}: no such config file")
    try:
        text = read_input_text(path, "config", cap=16 * 2**20)  # bounded: a FIFO would block, /dev/zero never end
    except InputError as exc:
        raise ConfigError(str(exc)) from None
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the config ({exc})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    except RecursionError:
        raise ConfigError(f"{path}: TOML nested too deep to be a config") from None
    return parse_config(data, path)


def parse_config(data: dict[str, Any], path: Path) -> NightlyConfig:
    """Validate parsed TOML into a NightlyConfig; one ConfigError sentence for the first problem."""
    from neuronprobe.nightly.requests import REQUEST_KEYS, request_values

    night_keys = {f.name for f in dataclasses.fields(NightlyConfig)}  # `path`: import folders (the field is the config file)
    # A key a [[models]] table owns (set, train, the traffic keys) is per model; the other request keys are defaults for every model.
    _check_keys(data, night_keys | (REQUEST_KEYS - MODEL_KEYS - TRAFFIC_KEYS), path, "the top level")
    top_request = request_values({k: v for k, v in data.items() if k != "path"}, path, "")
    tables = data.get("models")
    if not isinstance(tables, list) or not tables or not all(isinstance(t, dict) for t in tables):
        raise ConfigError(f"{path}: needs at least one [[models]] table with a `model = ...` entry")
    top_paths = _import_folders(data.get("path", []), path, "path")
    data = {k: v for k, v in data.items() if k != "path"}
    data = {k: v for k, v in data.items() if k in night_keys}  # the rest are the models' request defaults
    parsed = [_model_config(t, i, path, top_paths) for i, t in enumerate(tables)]  # each model and its own request keys
    models = [m for m, _ in parsed]
    seen: set[str] = set()
    for m in models:
        if m.name in seen:
            raise ConfigError(f"{path}: two models are named {m.name!r}; give each a unique `name`")
        seen.add(m.name)
    config = _typed(NightlyConfig, {**data, "models": [], "path": str(path)}, path, "")
    config = dataclasses.replace(config, models=models)
    _check_choice(config.target, TARGETS, path, "target")
    _check_choice(config.backend, BACKEND_CHOICES, path, "backend")
    if config.stack is not None:
        _check_choice(config.stack, STACKS, path, "stack")
    for m in models:  # a stack the model's target does not run (native on trn1) stops the night before it starts
        try:
            check_stack(config.stack_of(m), config.target_of(m))
        except InputError as exc:
            raise ConfigError(f"{path}: models {m.name!r}: {exc}") from None
    if config.require_backend is not None:
        _check_choice(config.require_backend, REQUIRABLE_BACKENDS, path, "require_backend")
    for name, value in (("timeout", config.timeout), ("op_timeout", config.op_timeout), ("history", config.history)):
        most = MAX_SECONDS if name != "history" else float("inf")
        if not 0 < value <= most:  # also refuses nan (TOML has it): a limit that never fires
            raise ConfigError(f"{path}: `{name}` must be positive{' and at most a week (604800 s)' if name != 'history' else ''}, got {value}")
    if config.max_memory is not None:
        worker_limits(config)
    from neuronprobe.nightly.requests import build, merged

    models = []
    for i, (m, own) in enumerate(parsed):  # every option checked as `analyze` checks it, naming the entry (after the night's own keys)
        values = {**merged(top_request, own), **_model_fields(m, config)}
        models.append(dataclasses.replace(m, request=build(m.model, values, path, f"models[{i}] ({m.name})")))
    return dataclasses.replace(config, models=models)


def _model_fields(model: ModelConfig, config: NightlyConfig) -> dict[str, Any]:
    """The request values a ModelConfig's own fields give (resolved against the config's folder, the top level's defaults applied)."""
    traffic = {f.name: getattr(model.traffic, f.name) for f in dataclasses.fields(TrafficOptions)}
    for key in ("batch_sizes", "buckets"):
        if traffic[key] is not None:
            traffic[key] = tuple(traffic[key])
    return {
        **traffic,
        "set": tuple(model.set),
        "path": tuple(Path(p) for p in model.path),
        "train": model.train,
        "target": config.target_of(model),
        "backend": config.backend_of(model),
        "stack": config.stack_of(model),
        "timeout": config.timeout,
        "op_timeout": config.op_timeout,
        "max_memory": config.max_memory,
    }


def request_of(model: ModelConfig, config: NightlyConfig) -> AnalyzeRequest:
    """The analysis request of one configured model (built from its fields when it was made in code)."""
    if model.request is not None:
        return model.request
    from neuronprobe.request.check import build_request

    return build_request(model.model, **_model_fields(model, config))


def worker_limits(config: NightlyConfig) -> Any:
    """Each model's worker limits from the config (a ConfigError names a bad `max_memory`)."""
    from neuronprobe.process.worker import limits_from_options

    try:
        return limits_from_options(config.timeout, config.max_memory, names=("`timeout`", "`max_memory`"))
    except NeuronprobeError as exc:
        raise ConfigError(f"{config.path}: {exc}") from None


def check_required_backend(config: NightlyConfig, require_backend: str | None) -> None:
    """Before the first model: a --require-backend that is no backend, or one that is not here, stops the night (exit 2)."""
    required = require_backend or config.require_backend
    if required is None:
        return
    if required not in REQUIRABLE_BACKENDS:
        raise ConfigError(f"--require-backend {required!r}: use one of {', '.join(REQUIRABLE_BACKENDS)}")
    from neuronprobe.backends import resolve_backend

    for backend in sorted({config.backend_of(m) for m in config.models}):
        resolve_backend(backend, required)  # BackendUnavailable: one line, exit 2


def _import_folders(value: Any, path: Path, key: str) -> list[str]:
    """A `path = [...]` entry: folders a model file imports packages from, resolved against the config's folder."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ConfigError(f'{path}: `{key}` must be a list of folders, e.g. path = ["../src"]')
    folders: list[str] = []
    for entry in value:
        folder = (path.parent / entry).expanduser()
        if not folder.is_dir():
            raise ConfigError(f"{path}: {key}: {folder} is not a folder (relative paths are relative to the config file)")
        if str(folder.resolve()) not in folders:
            folders.append(str(folder.resolve()))
    return folders


def _model_config(table: dict[str, Any], index: int, path: Path, top_paths: list[str] | None = None) -> tuple[ModelConfig, dict[str, Any]]:
    """One [[models]] table: its ModelConfig, and the request keys it sets beyond the ModelConfig's own (sdk, rules, ...)."""
    from neuronprobe.nightly.requests import REQUEST_KEYS, request_values

    where = f"models[{index}]"
    _check_keys(table, set(MODEL_KEYS | TRAFFIC_KEYS | (REQUEST_KEYS - TOP_ONLY_KEYS)), path, where)
    spec = table.get("model")
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError(f'{path}: {where} needs `model = "<model file or hf:<model_type>>"`')
    name = table.get("name", _default_name(spec))
    own = {k: v for k, v in table.items() if k in MODEL_KEYS and k != "path"}
    model: ModelConfig = _typed(ModelConfig, {**own, "name": name}, path, where)
    traffic: TrafficOptions = _typed(TrafficOptions, {k: v for k, v in table.items() if k in TRAFFIC_KEYS}, path, where)
    if not NAME_RE.match(model.name):
        raise ConfigError(f"{path}: {where}.name {model.name!r} cannot be a file name; use letters, digits, '.', '-' or '_'")
    where = f"models[{index}] ({model.name})"
    if model.target is not None:
        _check_choice(model.target, TARGETS, path, f"{where}.target")
    if model.backend is not None:
        _check_choice(model.backend, BACKEND_CHOICES, path, f"{where}.backend")
    if model.stack is not None:
        _check_choice(model.stack, STACKS, path, f"{where}.stack")
    for key, least in (("max_buckets", MIN_MAX_BUCKETS), ("max_compiles", MIN_MAX_COMPILES)):
        if getattr(traffic, key) < least:
            raise ConfigError(f"{path}: {where}.{key} must be at least {least}")
    for key in ("batch_sizes", "buckets"):
        values = getattr(traffic, key)
        if values is not None and (not values or min(values) < 1):
            raise ConfigError(f"{path}: {where}.{key} must be a non-empty list of positive integers")
    if model.set and not spec.startswith("hf:"):
        raise ConfigError(f"{path}: {where}.set applies to hf: models only; edit the model file instead")
    base = path.parent
    folders = [*(top_paths or []), *_import_folders(table.get("path", []), path, f"{where}.path")]
    resolved: dict[str, Any] = {"path": list(dict.fromkeys(folders))}
    if not is_named_spec(spec):
        resolved["model"] = str(_existing(base / spec, path, f"{where}.model"))
    files: dict[str, Any] = {}  # TrafficOptions path fields, resolved against the config's folder
    for key in _PATH_KEYS:
        value = getattr(traffic, key)
        if value is not None:
            files[key] = _existing(base / value, path, f"{where}.{key}")
    resolved["cache_inputs"] = [str(_existing(base / p, path, f"{where}.cache_inputs")) for p in model.cache_inputs]
    values = request_values({k: v for k, v in table.items() if k not in MODEL_KEYS and k not in TRAFFIC_KEYS}, path, where)
    return dataclasses.replace(model, **resolved, traffic=dataclasses.replace(traffic, **files)), values


def _default_name(spec: str) -> str:
    """``examples/tiny_gpt.py`` -> ``tiny_gpt``; ``hf:gpt2`` -> ``gpt2``."""
    if spec.startswith("hf:"):
        return re.sub(r"[^A-Za-z0-9._-]", "-", spec[3:]) or "hf"
    if is_named_spec(spec):  # tv:resnet18 -> resnet18
        scheme, _, rest = spec.partition(":")
        return re.sub(r"[^A-Za-z0-9._-]", "-", rest).lstrip("._-") or scheme
    return Path(spec).stem


def is_named_spec(spec: str) -> bool:
    """An ``hf:``, ``tv:`` or ``timm:`` spec: a model built by name, no file to resolve or guard."""
    from neuronprobe.loaders.resolve import VISION_PREFIXES

    return spec.startswith(("hf:", *VISION_PREFIXES))


def _typed(cls: type, data: dict[str, Any], path: Path, where: str) -> Any:
    """Check types with the report model's JSON reader, which names the bad field."""
    try:
        return build_typed(cls, data, where)
    except ReportFormatError as exc:
        raise ConfigError(f"{path}: {str(exc).lstrip('.')}") from None


def _check_keys(table: dict[str, Any], allowed: set[str], path: Path, where: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise ConfigError(f"{path}: unknown key {unknown[0]!r} in {where}; known keys: {', '.join(sorted(allowed))}")


def _check_choice(value: str, choices: tuple[str, ...], path: Path, key: str) -> None:
    if value not in choices:
        raise ConfigError(f"{path}: `{key}` must be one of {', '.join(choices)}, got {value!r}")


def _existing(file: Path, path: Path, key: str) -> Path:
    if not file.exists():
        raise ConfigError(f"{path}: {key}: {file} does not exist (relative paths are relative to the config file)")
    return file.resolve()


# --- the run -------------------------------------------------------------------------


@dataclass
class ModelOutcome:
    """What happened to one model tonight."""

    name: str
    report: Report | None = None  # None when the analysis failed
    error: str = ""  # the analysis failed: one sentence
    internal: bool = False  # it failed on a bug in neuronprobe, not on the model (the night exits 3)
    baseline_date: str | None = None
    json_path: str = ""  # relative to the reports folder
    html_path: str = ""
    seconds: float = 0.0  # wall time of its analysis (a timing: the one field of the summary that differs between runs)
    reused_from: str | None = None  # the result cache reused this night's report

    @property
    def diff(self) -> RunDiff | None:
        return self.report.baseline_diff if self.report is not None else None

    @property
    def status(self) -> str:
        """failed | first_run | regression | not_comparable | ok."""
        return run_status(self.report) if self.report is not None else "failed"


@dataclass
class NightlyResult:
    """The outcome of a night: files to write (in this order, the index last) and the regressions."""

    date: str
    outcomes: list[ModelOutcome]
    files: dict[str, str]  # path relative to the reports folder -> content; write in order
    warnings: list[str] = dataclasses.field(default_factory=list)
    history_nights: int = DEFAULT_HISTORY_NIGHTS  # the index's span, for its rendering again under the lock (write_night)

    @property
    def regressions(self) -> list[str]:
        return [f"{o.name}: {r}" for o in self.outcomes if o.diff is not None and o.diff.has_regression for r in o.diff.regressions]

    @property
    def failures(self) -> list[ModelOutcome]:
        return [o for o in self.outcomes if o.report is None]

    @property
    def internal_errors(self) -> list[ModelOutcome]:
        """Models whose analysis hit a bug in neuronprobe: any of them makes the night exit 3."""
        return [o for o in self.outcomes if o.internal]

    @property
    def gate_failures(self) -> list[GateFailure]:
        """The regression gate of every model, from :func:`neuronprobe.gates.evaluate_gates`, each line naming its model."""
        out = []
        for o in self.outcomes:
            if o.report is None:
                continue
            for failure in evaluate_gates(o.report, REGRESSION_GATE):
                out.append(dataclasses.replace(failure, failed=tuple(f"{o.name}: {line}" for line in failure.failed)))
        return out


@dataclass
class Observed:
    """A report with the files its analysis read (an AnalyzeFn may return one instead of a bare Report).

    ``reads`` is a :class:`neuronprobe.file_reads.FileReads`; the result cache stores a
    report only when it knows what the analysis read.
    """

    report: Report
    reads: Any


AnalyzeFn = Callable[[ModelConfig, NightlyConfig, str | None, str], "Report | Observed"]


@dataclass
class Analysed:
    """One model's analysis, before its baseline diff: the report, or why there is none, and how long it took."""

    name: str
    report: Report | None = None
    error: str = ""
    internal: bool = False
    seconds: float = 0.0
    reused_from: str | None = None  # the night whose report the result cache reused (no analysis ran)
    reads: Any = None  # the files the analysis read (FileReads), when its worker recorded them


def analyse_one(model: ModelConfig, config: NightlyConfig, required: str | None, command_line: str, analyze: AnalyzeFn) -> Analysed:
    """Run ``analyze`` on one model; a user-facing error or a neuronprobe bug becomes that model's failure."""
    started = time.monotonic()
    out = Analysed(model.name)
    try:
        value = analyze(model, config, required, command_line)
        if isinstance(value, Observed):
            out.report, out.reads = value.report, value.reads
        else:
            out.report = value
    except BackendUnavailable:
        raise
    except NeuronprobeError as exc:
        out.error = str(exc)
    except InternalError as exc:  # a neuronprobe bug on this model: the others still run, the night exits 3
        out.error = f"internal error: {type(exc).__name__}: {exc}"
        out.internal = True
    out.seconds = time.monotonic() - started
    return out


def run_nightly(
    config: NightlyConfig,
    reports_dir: str | Path,
    date: str,
    *,
    require_backend: str | None = None,
    command_line: str = "",
    analyze: AnalyzeFn | None = None,
    progress: Callable[[str], None] | None = None,
    jobs: int = 1,
    memory: MemoryPlan | None = None,
    on_done: Callable[[Analysed], None] | None = None,
    cache: Any = None,
) -> NightlyResult:
    """Analyse every model of ``config`` for the night ``date``; return the files to write.

    ``require_backend`` (the CLI flag) overrides the config's. A model whose analysis
    fails with a user-facing error (model file, traffic file), or on a bug in
    neuronprobe (``internal``), is recorded as failed and the others still run; a
    missing required backend stops the night at once. With ``jobs`` > 1 the models
    are analysed in parallel (see :func:`analyse_models`); the baselines, diffs and
    files are then built in the config's order, so the result is the serial one.
    """
    check_date(date)
    check_required_backend(config, require_backend)
    analysed = analyse_models(
        config,
        config.models,
        require_backend=require_backend,
        command_line=command_line,
        analyze=analyze,
        progress=progress,
        jobs=jobs,
        memory=memory,
        on_done=on_done,
        cache=cache,
    )
    return assemble_night(analysed, Path(reports_dir), date, config.history)


def analyse_models(
    config: NightlyConfig,
    models: list[ModelConfig],
    *,
    require_backend: str | None = None,
    command_line: str = "",
    analyze: AnalyzeFn | None = None,
    progress: Callable[[str], None] | None = None,
    jobs: int = 1,
    memory: MemoryPlan | None = None,
    on_done: Callable[[Analysed], None] | None = None,
    cache: Any = None,
) -> list[Analysed]:
    """Analyse ``models``, ``jobs`` at a time; the results in the order of ``models``.

    ``memory`` shares one memory total between the workers: a model starts only while
    the reservations of the running ones plus its own fit in it (see :class:`MemoryPlan`).
    ``on_done`` is called once per finished model, in the order they finish. ``cache``
    (a :class:`neuronprobe.nightly.cache.ResultCache`) answers a model whose inputs did
    not change without analysing it, and holds each fresh report for its commit.
    """
    analyze = analyze or analyze_model
    required = require_backend or config.require_backend
    if jobs < 1:
        raise ConfigError(f"--jobs {jobs}: use at least 1")
    gate = _MemoryGate(memory)

    def one(model: ModelConfig) -> Analysed:
        result = cache.lookup(model) if cache is not None else None
        if result is None:
            with gate.reserve():
                if progress:
                    progress(f"analysing {model.name} ({model.model})")
                result = analyse_one(model, config, required, command_line, analyze)
            if cache is not None:
                cache.remember(model, result)  # before the baseline diff is attached to the report
        if on_done:
            on_done(result)
        return result

    if jobs == 1 or len(models) <= 1:
        return [one(m) for m in models]
    from concurrent.futures import ThreadPoolExecutor

    # Each thread only waits on its model's forked worker (neuronprobe.process.worker); the modules a worker
    # needs are imported here first, so that no fork happens while another thread holds an import lock.

    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="neuronprobe-nightly") as pool:
        futures = [pool.submit(one, m) for m in models]
        try:
            return [f.result() for f in futures]
        except BaseException:  # a missing backend (or Ctrl-C): start no further model
            for f in futures:
                f.cancel()
            raise


@dataclass(frozen=True)
class MemoryPlan:
    """The memory of parallel workers: each worker's bound, and the total they share."""

    per_worker_bytes: int
    total_bytes: int


class _MemoryGate:
    """Admits a worker while the running ones' reservations plus its own fit in the total (one worker always runs)."""

    def __init__(self, plan: MemoryPlan | None) -> None:
        self.plan = plan
        self.reserved = 0
        self.running = 0
        self.cond = threading.Condition()

    @contextlib.contextmanager
    def reserve(self) -> Iterator[None]:
        if self.plan is None:
            yield
            return
        need = self.plan.per_worker_bytes
        with self.cond:
            self.cond.wait_for(lambda: self.running == 0 or self.reserved + need <= self.plan.total_bytes)  # type: ignore[union-attr]
            self.reserved += need
            self.running += 1
        try:
            yield
        finally:
            with self.cond:
                self.reserved -= need
                self.running -= 1
                self.cond.notify_all()


def plan_workers(config: NightlyConfig, jobs: int | None, total_memory: str | None) -> tuple[int, MemoryPlan]:
    """How many workers, and the memory each may use, from ``--jobs`` and ``--total-memory``.

    The total defaults to the single worker's default (a share of the machine). Each
    worker is bounded by the config's ``max_memory`` or, without one, by an equal part
    of the total. ``jobs`` defaults to one per usable core, lowered so that every
    running worker's bound fits in the total.
    """
    from neuronprobe.defaults import MIN_MEMORY_BYTES
    from neuronprobe.process.worker import default_max_memory, parse_memory

    try:
        total = parse_memory(total_memory, "--total-memory") if total_memory is not None else default_max_memory()
    except NeuronprobeError as exc:
        raise ConfigError(str(exc)) from None
    if jobs is not None and not 1 <= jobs <= MAX_JOBS:
        raise ConfigError(f"--jobs {jobs}: use 1 to {MAX_JOBS}")
    per = worker_limits(config).max_memory_bytes
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    wanted = jobs if jobs is not None else cores
    if per is None:
        fit = max(1, total // MIN_MEMORY_BYTES)
        count = wanted if jobs is not None else min(wanted, fit)
        per = max(MIN_MEMORY_BYTES, total // count)
    else:
        per = min(per, total)
        count = wanted if jobs is not None else min(wanted, max(1, total // per))
    return max(1, min(count, len(config.models))), MemoryPlan(per_worker_bytes=per, total_bytes=total)


def assemble_night(analysed: list[Analysed], reports_dir: Path, date: str, history_nights: int) -> NightlyResult:
    """Baselines, diffs, reports, the summary and the index for analysed models (in the config's order).

    Shared by a single nightly and by ``nightly merge``: both write the same files.
    """
    warnings: list[str] = []
    outcomes: list[ModelOutcome] = []
    tonight: list[NightReport] = []
    files: dict[str, str] = {}
    for item in analysed:
        outcome = ModelOutcome(name=item.name, error=item.error, internal=item.internal, seconds=item.seconds, reused_from=item.reused_from)
        outcomes.append(outcome)
        report = item.report
        if report is None:
            continue
        baseline = find_baseline(reports_dir, item.name, report, date, warnings)
        if baseline is not None:
            report.baseline_diff = diff_reports(
                baseline.report,
                report,
                base_label=f"{baseline.date} {run_label(baseline.report)}",
                new_label=f"{date} {run_label(report)}",
            )
            outcome.baseline_date = baseline.date
        outcome.report = report
        outcome.json_path = f"{date}/{item.name}.json"
        outcome.html_path = f"{date}/{item.name}.html"
        files[outcome.json_path] = report.to_json()
        files[outcome.html_path] = _render_report_html(report)
        tonight.append(NightReport(date, item.name, report, outcome.json_path, outcome.html_path))
    files[f"{date}/{SUMMARY_FILE}"] = summary_json(date, outcomes)
    replaced = {o.name for o in outcomes if o.report is not None}  # their files on disk are overwritten
    history = load_history(reports_dir, history_nights, warnings, replace=(date, replaced))
    history = sorted(history + tonight, key=lambda n: (n.date, n.name))
    failures = {o.name: o.error for o in outcomes if o.report is None}
    files[INDEX_FILE] = render_index(history, date, [o.name for o in outcomes], failures, warnings)
    return NightlyResult(date=date, outcomes=outcomes, files=files, warnings=warnings, history_nights=history_nights)


def analyze_model(model: ModelConfig, config: NightlyConfig, require_backend: str | None, command_line: str) -> Report:
    """Run the real analysis for one configured model (imports torch): the request `analyze` would run, in this process."""
    from neuronprobe.request.run import run_request

    request = dataclasses.replace(request_of(model, config), require_backend=require_backend, command_line=command_line)
    return run_request(request, isolate=False).report


def isolated_analyze(config: NightlyConfig, max_memory_bytes: int | None = None) -> IsolatedAnalyze:
    """analyze_model with each model in its own killable worker (what `neuronprobe nightly` runs).

    A model that exits, hangs, dies or runs out of memory becomes that model's
    failure (a WorkerFailure sentence); the other models and the index are unaffected.
    The workers are forked by one fork server for the night, which imported torch once
    (:mod:`neuronprobe.process.forkserver`; ``NEURONPROBE_FORK_SERVER=0``: forked from here).
    """
    limits = worker_limits(config)
    if max_memory_bytes is not None:  # a parallel night's share of the total (see plan_workers)
        limits = dataclasses.replace(limits, max_memory_bytes=max_memory_bytes)
    return IsolatedAnalyze(limits)


class IsolatedAnalyze:
    """An :data:`AnalyzeFn` that runs each model in a worker from the night's fork server (started on the first model).

    Closed with :meth:`close` or as a context manager; when garbage-collected otherwise (the server also
    ends with this process in any case).
    """

    def __init__(self, limits: Any) -> None:
        from neuronprobe.process.forkserver import ForkServer, fork_server_enabled

        self.limits = limits
        self.server = ForkServer() if fork_server_enabled() else None

    def __call__(self, model: ModelConfig, cfg: NightlyConfig, require_backend: str | None, command_line: str) -> Observed:
        from neuronprobe.process.worker import analyze_in_worker

        call = functools.partial(_recorded_analysis, model, cfg, require_backend, command_line)  # picklable: the server forks the worker
        report, reads = analyze_in_worker(model.model, call, self.limits, server=self.server)
        return Observed(report, reads)

    def close(self) -> None:
        if self.server is not None:
            self.server.close()

    def __enter__(self) -> IsolatedAnalyze:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _recorded_analysis(model: ModelConfig, cfg: NightlyConfig, require_backend: str | None, command_line: str) -> tuple[Report, Any]:
    """In the worker: the model's analysis and the files it read (for the result cache)."""
    import tempfile

    from neuronprobe.file_reads import ReadRecorder

    recorder = ReadRecorder(private_tmp=tempfile.gettempdir()).start()  # in the worker: its hook ends with it
    report = analyze_model(model, cfg, require_backend, command_line)
    return report, recorder.snapshot()


def input_files(config: NightlyConfig) -> list[str]:
    """Every file the night reads: the config, model files, traffic files (outputs must not be one)."""
    files = [config.path]
    for m in config.models:
        traffic = [str(p) for p in (m.traffic.shapes, m.traffic.lengths) if p is not None]
        files += [p for p in (None if is_named_spec(m.model) else m.model, *traffic, *m.cache_inputs) if p]
        if m.request is not None:  # what the request reads besides (rules, decode trace, support table, serving trace, audit root)
            files += [str(p) for p in (m.request.rules, m.request.decode_trace, m.request.support_table, m.request.serving_trace, m.request.audit) if p]
    return files


def output_files(config: NightlyConfig, date: str) -> list[str]:
    """Every file the night may write, relative to the reports folder."""
    out = [f"{date}/{m.name}.{ext}" for m in config.models for ext in ("json", "html")]
    return [*out, f"{date}/{SUMMARY_FILE}", INDEX_FILE]


LOCK_FILE = ".nightly.lock"  # in the reports folder: two nightlies writing there take turns


@contextlib.contextmanager
def night_lock(reports_dir: Path) -> Iterator[None]:
    """Hold the reports folder for one writer: a second nightly writing there waits (an advisory flock)."""
    folder = Path(reports_dir)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / LOCK_FILE, "a", encoding="utf-8") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def merge_summary(on_disk: Path, tonight: str) -> str:
    """Tonight's ``_nightly.json`` with the entries of models an earlier run of the same date wrote and tonight's lacks.

    Their reports stay in the folder, so the summary lists them too. The summary on disk is read by
    the strict typed reader; one it refuses (unreadable, or from a newer neuronprobe) is replaced.
    Entries are sorted by model name.
    """
    from neuronprobe.nightly.documents import SUMMARY_DOCUMENT

    new = SUMMARY_DOCUMENT.loads(tonight)
    try:
        old = SUMMARY_DOCUMENT.load(on_disk)
    except ReportFormatError:
        return tonight
    names = {m.name for m in new.models}
    new.models = sorted([*(m for m in old.models if m.name not in names), *new.models], key=lambda m: m.name)
    return SUMMARY_DOCUMENT.dumps(new)


def write_night(result: NightlyResult, reports_dir: Path, write: Callable[[Path, str], object]) -> None:
    """Write the night's files with ``write`` (the CLI's atomic writer) in order, holding :func:`night_lock`.

    Under the lock the summary is merged with the one on disk, and the index (written
    last) is rendered again from the reports on disk and that merged summary: two
    nightlies of one date and folder, one after the other or at once, leave a summary
    and an index of both (the index each built before the lock lacked the other's models).
    """
    summary = f"{result.date}/{SUMMARY_FILE}"
    merged = result.files.get(summary, "")
    with night_lock(reports_dir):
        for relative, content in result.files.items():
            if relative == summary:
                content = merged = merge_summary(Path(reports_dir) / relative, content)
            elif relative == INDEX_FILE:
                content = index_under_lock(result, Path(reports_dir), merged)
            write(Path(reports_dir) / relative, content)


def index_under_lock(result: NightlyResult, reports_dir: Path, merged_summary: str) -> str:
    """The index from what is on disk now: every model of the night's merged summary, tonight's first in config order."""
    from neuronprobe.nightly.documents import SUMMARY_DOCUMENT

    try:
        entries = SUMMARY_DOCUMENT.loads(merged_summary).models
    except ReportFormatError:
        entries = []
    mine = [o.name for o in result.outcomes]
    order = list(dict.fromkeys([*mine, *(m.name for m in entries)]))
    failures = {m.name: m.error or "failed" for m in entries if m.status == "failed"}
    failures.update({o.name: o.error for o in result.outcomes if o.report is None})
    failures = {name: error for name, error in failures.items() if name not in {o.name for o in result.outcomes if o.report is not None}}
    warnings = list(result.warnings)
    history = load_history(reports_dir, result.history_nights, warnings)
    return render_index(history, result.date, order, failures, warnings)


def _render_report_html(report: Report) -> str:
    from neuronprobe.report.html import render_html

    return render_html(report)


def check_date(date: str) -> str:
    """A night is a real calendar date written YYYY-MM-DD; anything else is a ConfigError."""
    try:
        if DATE_RE.match(date) and dt.date.fromisoformat(date):
            return date
    except ValueError:
        pass
    raise ConfigError(f"--date must be a date written YYYY-MM-DD, got {date!r}")


def today_utc() -> str:
    return dt.datetime.now(dt.timezone.utc).date().isoformat()


# --- history ---------------------------------------------------------------------------


def night_dirs(reports_dir: Path) -> list[str]:
    """The nights under ``reports_dir``, oldest first."""
    if not reports_dir.is_dir():
        return []
    return sorted(p.name for p in reports_dir.iterdir() if p.is_dir() and DATE_RE.match(p.name))


def find_baseline(reports_dir: Path, name: str, new: Report, date: str, warnings: list[str]) -> NightReport | None:
    """The most recent report of ``name`` from a night before ``date`` on the same backend and target."""
    for night in reversed(night_dirs(reports_dir)):
        if night >= date:
            continue
        found = _read_night_report(reports_dir, night, name, warnings)
        if found is None:
            continue
        old = found.report
        if (old.backend.name, old.backend.fake, old.target) == (new.backend.name, new.backend.fake, new.target):
            return found
    return None


def load_history(reports_dir: Path, nights: int, warnings: list[str], replace: tuple[str, set[str]] | None = None) -> list[NightReport]:
    """Every model report of the last ``nights`` nights on disk (except those tonight replaces)."""
    out = []
    for night in night_dirs(reports_dir)[-nights:]:
        for file in sorted((reports_dir / night).glob("*.json")):
            name = file.stem
            if not NAME_RE.match(name) or (replace and night == replace[0] and name in replace[1]):
                continue
            found = _read_night_report(reports_dir, night, name, warnings)
            if found is not None:
                out.append(found)
    return out


def _read_night_report(reports_dir: Path, night: str, name: str, warnings: list[str]) -> NightReport | None:
    file = reports_dir / night / f"{name}.json"
    if not file.exists():
        return None
    try:
        report = load_report(str(file))
    except ReportFormatError as exc:
        message = f"skipped an unreadable past report: {exc}"
        if message not in warnings:
            warnings.append(message)
        return None
    return NightReport(night, name, report, f"{night}/{name}.json", f"{night}/{name}.html")


def summary_json(date: str, outcomes: list[ModelOutcome]) -> str:
    """The night in short, for machines: one entry per model with status and regressions (``nightly/documents.py``)."""
    from neuronprobe.nightly.documents import SUMMARY_DOCUMENT, NightEntry, NightSummary

    models = []
    for o in outcomes:
        d = o.diff
        models.append(
            NightEntry(
                name=o.name,
                status=o.status,
                error=o.error or None,
                json=o.json_path or None,
                html=o.html_path or None,
                baseline=o.baseline_date,
                comparable=d.comparable if d is not None else None,
                not_comparable_reason=d.not_comparable_reason if d is not None and not d.comparable else None,
                regressions=list(d.regressions) if d is not None else [],
                seconds=round(o.seconds, 3),
                reused_from=o.reused_from,
            )
        )
    return SUMMARY_DOCUMENT.dumps(NightSummary(date, models))
