"""The nightly's result cache: a model whose inputs did not change reuses its last report.

The key of a model (:func:`cache_inputs`) is everything its analysis depends on: the
model file's bytes and those of the files it imports from beside it (found by
reading its ``import`` statements, recursively; an import made at run time with
``importlib`` is not seen), the ``hf:``/``tv:``/``timm:`` spec and its ``set``, the
traffic files' bytes and every option, the neuronprobe version, the rule table
version, the backend and the versions of the installed stack (torch, torch-xla,
torch-neuronx, neuronx-cc, transformers, torchvision, timm).

An entry is ``<cache>/<key>.json``: the key's inputs, the night it was analysed and
the report as it came from the analysis (before its baseline diff), with the
report's sha256. Entries are kept in memory during the night and written, each
atomically, only after the night's own files are written
(:meth:`ResultCache.commit`): a run killed before that leaves no entry, and an
entry whose report does not match its hash is never used.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from neuronprobe.errors import ReportFormatError
from neuronprobe.nightly import Analysed, ModelConfig, NightlyConfig, is_named_spec
from neuronprobe.report.model import Report

CACHE_FORMAT = 1
DEFAULT_CACHE_DIR = ".cache"  # inside the reports folder: the cache of that history
# The installed distributions whose versions change an analysis (absent ones count as absent).
STACK_DISTRIBUTIONS = ("torch", "torch-xla", "torch-neuronx", "neuronx-cc", "libneuronxla", "transformers", "torchvision", "timm")


_INSTALLED_DIRS = frozenset({"site-packages", "dist-packages"})


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def local_imports(model_file: Path, roots: Sequence[Path] = ()) -> list[Path]:
    """The model file and every file it imports from its own folder tree, recursively (sorted).

    ``roots``: the package roots elsewhere its imports also resolve against (``path = [...]``, ``PYTHONPATH``),
    searched after the model's folder, as sys.path has them during the analysis.
    """
    search = [model_file.resolve().parent, *(Path(r).resolve() for r in roots)]
    seen: set[Path] = set()
    todo = [model_file.resolve()]
    while todo:
        file = todo.pop()
        if file in seen:
            continue
        seen.add(file)
        try:
            tree = ast.parse(file.read_bytes())
        except (OSError, SyntaxError, ValueError):
            continue  # the analysis will say what is wrong with it; its bytes are still hashed
        for node in ast.walk(tree):
            names: list[tuple[str, int]] = []
            if isinstance(node, ast.Import):
                names = [(a.name, 0) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                names = [(base, node.level)] + [(f"{base}.{a.name}" if base else a.name, node.level) for a in node.names]
            for name, level in names:
                if level:
                    start = file.parent
                    for _ in range(level - 1):
                        start = start.parent
                    todo += [p.resolve() for p in _module_files(start, name)]
                    continue
                found = next((hit for root in search if (hit := _module_files(root, name))), [])  # the first root that has it, as import does
                todo += [p.resolve() for p in found]
    return sorted(seen)


def _module_files(start: Path, dotted: str) -> list[Path]:
    if not dotted:
        return []
    parts = dotted.split(".")
    found = []
    for i in range(1, len(parts) + 1):
        base = start.joinpath(*parts[:i])
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                found.append(candidate)
    return found


def stack_versions() -> dict[str, str | None]:
    from importlib import metadata

    out: dict[str, str | None] = {}
    for dist in STACK_DISTRIBUTIONS:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


def cache_inputs(model: ModelConfig, config: NightlyConfig, require_backend: str | None, stack: dict[str, str | None]) -> dict[str, Any]:
    """What one model's analysis depends on, as JSON-able data (its hash is the cache key)."""
    from neuronprobe.loading import pythonpath_entries
    from neuronprobe.nightly_shards import rules_version
    from neuronprobe.version import __version__

    files: dict[str, str] = {}
    # The analysis imports from these too (path = [...], then the user's PYTHONPATH; an installed
    # site-packages there is the stack, versioned below, not the model's own code).
    roots = [*model.path, *(p for p in pythonpath_entries() if Path(p).name not in _INSTALLED_DIRS)]
    if not is_named_spec(model.model):
        for file in local_imports(Path(model.model), [Path(r) for r in roots]):
            files[str(file)] = _sha256(file.read_bytes())
    traffic = dataclasses.asdict(model.traffic)
    for key in ("shapes", "lengths"):
        if traffic.get(key) is not None:
            path = Path(traffic[key])
            traffic[key] = {"path": str(path), "sha256": _sha256(path.read_bytes()) if path.is_file() else None}
    return {
        "format": CACHE_FORMAT,
        "model": model.model,
        "files": files,
        "set": list(model.set),
        "path": roots,
        "train": model.train,
        "traffic": json.loads(json.dumps(traffic, default=str)),
        "target": config.target_of(model),
        "backend": config.backend_of(model),
        "require_backend": require_backend or config.require_backend,
        "timeout": config.timeout,
        "op_timeout": config.op_timeout,
        "max_memory": config.max_memory,
        "neuronprobe": __version__,
        "rules": rules_version(),
        "stack": stack,
    }


def cache_key(inputs: dict[str, Any]) -> str:
    return _sha256(json.dumps(inputs, sort_keys=True).encode("utf-8"))


class ResultCache:
    """Lookups during the night; new entries held until :meth:`commit` (after the night's files are written)."""

    def __init__(self, folder: Path, config: NightlyConfig, require_backend: str | None, date: str) -> None:
        self.folder = Path(folder)
        self.date = date
        self.config = config
        self.require_backend = require_backend
        self.stack = stack_versions()
        self.keys: dict[str, str] = {}
        self.inputs: dict[str, dict[str, Any]] = {}
        self.pending: dict[str, str] = {}  # key -> entry JSON

    def key_of(self, model: ModelConfig) -> str:
        if model.name not in self.keys:
            self.inputs[model.name] = cache_inputs(model, self.config, self.require_backend, self.stack)
            self.keys[model.name] = cache_key(self.inputs[model.name])
        return self.keys[model.name]

    def lookup(self, model: ModelConfig) -> Analysed | None:
        """The model's cached analysis, marked with the night it came from, or None (a miss, or an entry not to trust)."""
        file = self.folder / f"{self.key_of(model)}.json"
        try:
            entry = json.loads(file.read_text(encoding="utf-8"))
            report_json = entry["report"]
            if entry["format"] != CACHE_FORMAT or entry["key"] != self.key_of(model) or entry["sha256"] != _sha256(report_json.encode("utf-8")):
                return None
            report = Report.from_json(report_json)
            night = str(entry["date"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError, ReportFormatError):  # unreadable, partial or foreign: a miss, never an error
            return None
        return Analysed(model.name, report=report, reused_from=night)

    def remember(self, model: ModelConfig, result: Analysed) -> None:
        """Hold a fresh, successful analysis for :meth:`commit` (failures are never cached)."""
        if result.report is None or result.reused_from is not None:
            return
        key = self.key_of(model)
        report_json = result.report.to_json()
        entry = {"format": CACHE_FORMAT, "key": key, "date": self.date, "name": model.name, "inputs": self.inputs[model.name]}
        entry.update(report=report_json, sha256=_sha256(report_json.encode("utf-8")))
        self.pending[key] = json.dumps(entry) + "\n"

    def commit(self, write: Callable[[Path, str], object]) -> int:
        """Write the held entries with ``write`` (the CLI's atomic writer); the number written."""
        for key, content in sorted(self.pending.items()):
            write(self.folder / f"{key}.json", content)
        count = len(self.pending)
        self.pending.clear()
        return count
