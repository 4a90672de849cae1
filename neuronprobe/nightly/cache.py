"""The nightly's result cache: a model whose inputs did not change reuses its last report.

The cache folder is not trusted. Anyone who can write it (another user, a CI cache
restored from another branch) could otherwise decide what the night reports. So:

* **Authenticated entries.** An entry is ``<cache>/<key>.json`` holding a body (the
  key's inputs, the night, the files the analysis read and the report) and an
  HMAC-SHA256 of that body under a secret key kept outside the cache folder
  (:func:`load_secret`: ``$NEURONPROBE_CACHE_KEY``, a CI secret; else a per-machine
  key file created 0600 on first use under ``${XDG_CONFIG_HOME:-~/.config}/neuronprobe``).
  An entry whose HMAC does not verify (edited, forged, written under another key)
  is a miss, never an error. Without a usable key the cache is off and says why.
* **Written by completed runs.** Entries are kept in memory during the night and
  written only after the night's own files (:meth:`ResultCache.commit`): a run killed
  before that leaves no entry. Each is written under a lock of the cache folder and
  created with a create-only link (complete or absent): two nightlies sharing the cache
  never overwrite each other's entry. A valid entry already there for the same key is
  kept; only one that no longer verifies (stale, forged, partial) is replaced.
* **A key that covers what the model reads.** The key (:func:`cache_inputs`) is the
  model file's bytes and those of the files it imports from beside it (its
  ``import`` statements, recursively), the files and folders named in the model's
  ``cache_inputs`` (by content), the ``hf:``/``tv:``/``timm:`` spec and its ``set``,
  the traffic files' bytes and every option, the neuronprobe version, the rule table
  version, the backend and the versions of the installed stack (torch, torch-xla,
  torch-neuronx, neuronx-cc, transformers, torchvision, timm). On top of the key,
  the worker records every file Python code opened for reading during the analysis
  (:mod:`neuronprobe.file_reads`); the entry stores their hashes and is reused only
  while each still has that content (or is still absent). A model whose analysis
  read a file that cannot be hashed (a pipe, a device), or that was not analysed in
  a recording worker, is not cached, and the night says so.

What the cache cannot see: a file opened by native code (a Rust or C++ reader such
as safetensors) raises no audit event. Name such files in ``cache_inputs``. A model
file whose analysis loaded a known native reader (:data:`neuronprobe.file_reads.NATIVE_READERS`)
and whose config names no ``cache_inputs`` is not cached, and the night says so.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import os
import secrets
import stat
from pathlib import Path
from typing import Any

from neuronprobe.errors import InputError, ReportFormatError
from neuronprobe.file_reads import FileReads, file_sha256
from neuronprobe.files import folder_lock, read_input, write_atomic, write_new
from neuronprobe.loaders.resolve import local_imports  # the model file's own imports (also the output guard's inputs)
from neuronprobe.nightly.run import Analysed, ModelConfig, NightlyConfig, is_named_spec, request_of
from neuronprobe.report.model import Report

# 2: entries carry an HMAC and the files the analysis read (format 1 entries are misses).
# 3: entries of model files that loaded a native reader without cache_inputs are no longer written; the
# format is in the key and in the MAC's context, so a format-2 entry (maybe such a model's) is a miss.
CACHE_FORMAT = 3
DEFAULT_CACHE_DIR = ".cache"  # inside the reports folder: the cache of that history
# The installed distributions whose versions change an analysis (absent ones count as absent).
STACK_DISTRIBUTIONS = ("torch", "torch-xla", "torch-neuronx", "neuronx-cc", "libneuronxla", "transformers", "torchvision", "timm")
KEY_ENV = "NEURONPROBE_CACHE_KEY"  # the secret, e.g. from a CI secret: at least MIN_KEY_CHARS characters
KEY_FILE_NAME = "cache.key"  # under ${XDG_CONFIG_HOME:-~/.config}/neuronprobe/, created 0600 on first use
MIN_KEY_CHARS = 32
_MAC_CONTEXT = f"neuronprobe result cache entry v{CACHE_FORMAT}\0".encode()  # a key used elsewhere cannot sign an entry by accident


_INSTALLED_DIRS = frozenset({"site-packages", "dist-packages"})


UNVERIFIABLE = "unverifiable"  # the inputs key listing the inputs that are not regular files (FIFOs, devices)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _file_hash(path: Path, unverifiable: list[str]) -> str | None:
    """A file's sha256, read 1 MiB at a time (a 20 GB trace needs no memory); None when it does not exist.

    A FIFO, a device or an unreadable file is never read: it goes to ``unverifiable`` (the key
    computation runs in the command's own process, where a FIFO without a writer would block
    the night for ever), and a model with such an input is neither cached nor reused.
    """
    try:
        return file_sha256(str(path))
    except OSError:
        unverifiable.append(str(path))
        return None


# --- the secret ------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Secret:
    """The HMAC key, or why there is none (then the cache is off)."""

    key: bytes | None
    source: str  # where the key came from, or why there is none (a sentence for the log)


def key_file_path() -> Path:
    config_home = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(config_home) / "neuronprobe" / KEY_FILE_NAME


def _within(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
    except ValueError:
        return False
    return True


def load_secret(cache_folder: Path) -> Secret:
    """The cache's HMAC key: ``$NEURONPROBE_CACHE_KEY``, else the per-machine key file (made on first use).

    The key file is refused (cache off) when it is not a regular file of this user,
    readable by others, too short, or inside the cache folder (whoever writes the
    cache could then sign entries).
    """
    env = os.environ.get(KEY_ENV, "")
    if env:
        if len(env) < MIN_KEY_CHARS:
            return Secret(None, f"${KEY_ENV} is shorter than {MIN_KEY_CHARS} characters (try `openssl rand -hex 32`)")
        return Secret(env.encode("utf-8"), f"${KEY_ENV}")
    path = key_file_path()
    if _within(path, cache_folder):
        return Secret(None, f"its key file {path} is inside the cache folder, where whoever writes the cache could read it")
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600), "w", encoding="ascii") as fh:
            fh.write(secrets.token_hex(32) + "\n")
    except FileExistsError:
        pass
    except OSError as exc:
        return Secret(None, f"cannot create its key file {path} ({exc.strerror or exc})")
    try:
        info = os.lstat(path)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
            return Secret(None, f"its key file {path} is not a regular file owned by this user")
        if info.st_mode & 0o077:
            return Secret(None, f"its key file {path} is readable or writable by others (chmod 600 it)")
        key = path.read_bytes().strip()
    except OSError as exc:
        return Secret(None, f"cannot read its key file {path} ({exc.strerror or exc})")
    if len(key) < MIN_KEY_CHARS:
        return Secret(None, f"its key file {path} holds fewer than {MIN_KEY_CHARS} characters")
    return Secret(key, str(path))


def sign(key: bytes, body: str) -> str:
    return hmac.new(key, _MAC_CONTEXT + body.encode("utf-8"), hashlib.sha256).hexdigest()


def stack_versions() -> dict[str, str | None]:
    from importlib import metadata

    out: dict[str, str | None] = {}
    for dist in STACK_DISTRIBUTIONS:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


def _content_hash(path: Path, unverifiable: list[str]) -> dict[str, str | None]:
    """A file's sha256, or every file's under a folder (relative name -> sha256), for ``cache_inputs``."""
    if path.is_dir():
        return {str(p.relative_to(path)): _file_hash(p, unverifiable) for p in sorted(path.rglob("*")) if p.is_file()}
    return {"": _file_hash(path, unverifiable)}


def cache_inputs(model: ModelConfig, config: NightlyConfig, require_backend: str | None, stack: dict[str, str | None]) -> dict[str, Any]:
    """What one model's analysis depends on, as JSON-able data (its hash is the cache key)."""
    from neuronprobe.loaders.resolve import pythonpath_entries
    from neuronprobe.nightly.requests import key_values
    from neuronprobe.nightly.shards import rules_version
    from neuronprobe.version import __version__

    files: dict[str, str | None] = {}
    unverifiable: list[str] = []
    # The analysis imports from these too (path = [...], then the user's PYTHONPATH; an installed
    # site-packages there is the stack, versioned below, not the model's own code).
    roots = [*model.path, *(p for p in pythonpath_entries() if Path(p).name not in _INSTALLED_DIRS)]
    if not is_named_spec(model.model):
        for file in local_imports(Path(model.model), [Path(r) for r in roots]):
            files[str(file)] = _file_hash(file, unverifiable)
    declared = {str(p): _content_hash(Path(p), unverifiable) for p in model.cache_inputs}
    traffic = dataclasses.asdict(model.traffic)
    for key in ("shapes", "lengths"):
        if traffic.get(key) is not None:
            path = Path(traffic[key])
            traffic[key] = {"path": str(path), "sha256": _file_hash(path, unverifiable)}
    inputs: dict[str, Any] = {
        "format": CACHE_FORMAT,
        "model": model.model,
        "files": files,
        "cache_inputs": declared,
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
        "options": key_values(request_of(model, config)),  # every other option of the request (sdk, rules, decode_trace, env, ...)
    }
    if unverifiable:  # only then: the keys of models with regular inputs stay what they were
        inputs[UNVERIFIABLE] = sorted(set(unverifiable))
    return inputs


def cache_key(inputs: dict[str, Any]) -> str:
    return _sha256(json.dumps(inputs, sort_keys=True).encode("utf-8"))


def reads_unchanged(files: dict[str, str | None]) -> bool:
    """Every file the analysis read still has the content it had (or is still absent)."""
    for path, digest in files.items():
        try:
            if file_sha256(path) != digest:
                return False
        except OSError:
            return False
    return True


MAX_ENTRY_BYTES = 256 * 2**20  # an entry larger than this is not one neuronprobe wrote: a miss, not a read to the end


class ResultCache:
    """Lookups during the night; new entries held until :meth:`commit` (after the night's files are written).

    ``secret`` defaults to :func:`load_secret`; without a key every lookup misses and
    nothing is stored (:attr:`off` says why). :attr:`notes` collects the sentences the
    night prints about the cache (a model not stored, and why).
    """

    def __init__(self, folder: Path, config: NightlyConfig, require_backend: str | None, date: str, secret: Secret | None = None) -> None:
        self.folder = Path(folder)
        self.date = date
        self.config = config
        self.require_backend = require_backend
        self.secret = secret if secret is not None else load_secret(self.folder)
        self.stack = stack_versions()
        self.keys: dict[str, str] = {}
        self.inputs: dict[str, dict[str, Any]] = {}
        self.pending: dict[str, str] = {}  # key -> entry JSON
        self.notes: list[str] = []

    @property
    def off(self) -> str | None:
        """Why the cache is off (no usable key), or None."""
        return None if self.secret.key is not None else f"the result cache is off: {self.secret.source}"

    def key_of(self, model: ModelConfig) -> str:
        if model.name not in self.keys:
            self.inputs[model.name] = cache_inputs(model, self.config, self.require_backend, self.stack)
            self.keys[model.name] = cache_key(self.inputs[model.name])
        return self.keys[model.name]

    def lookup(self, model: ModelConfig) -> Analysed | None:
        """The model's cached analysis, marked with the night it came from, or None (a miss, or an entry not to trust)."""
        if self.secret.key is None:
            return None
        key = self.key_of(model)
        if self.inputs[model.name].get(UNVERIFIABLE):
            return None  # an input with no content to hash: nothing cached can be vouched for
        found = self._verified(key)
        if found is None:
            return None
        report, night = found
        return Analysed(model.name, report=report, reused_from=night)

    def _verified(self, key: str) -> tuple[Report, str] | None:
        """The report and night of the entry for ``key`` if it verifies and its reads are unchanged, else None."""
        assert self.secret.key is not None
        file = self.folder / f"{key}.json"
        try:
            # Bounded: regular files only (a FIFO or a device planted in the cache is a miss, never a hang).
            entry = json.loads(read_input(file, "result cache entry", cap=MAX_ENTRY_BYTES).decode("utf-8"))
            body_text = entry["body"]
            if entry["format"] != CACHE_FORMAT or not hmac.compare_digest(str(entry["hmac"]), sign(self.secret.key, body_text)):
                return None
            body = json.loads(body_text)
            if body["key"] != key or not reads_unchanged(dict(body["reads"])):
                return None
            return Report.from_json(body["report"]), str(body["date"])
        except (
            InputError,
            OSError,
            ValueError,
            KeyError,
            TypeError,
            AttributeError,
            ReportFormatError,
        ):  # unreadable, partial or foreign: a miss, never an error
            return None

    def remember(self, model: ModelConfig, result: Analysed) -> None:
        """Hold a fresh, successful analysis for :meth:`commit` (failures are never cached).

        Only an analysis whose reads were recorded, each one hashable, is held: for any
        other the cache cannot know what the report depends on, and says so.
        """
        if self.secret.key is None or result.report is None or result.reused_from is not None:
            return
        reads = result.reads
        if not isinstance(reads, FileReads):
            self.notes.append(f"{model.name}: not cached: its analysis did not run in a worker that records the files it reads")
            return
        if reads.unverifiable:
            self.notes.append(f"{model.name}: not cached: it read {reads.unverifiable[0]}, which is not a regular file the cache can hash")
            return
        native = reads.native_readers
        if native and not is_named_spec(model.model) and not model.cache_inputs:
            self.notes.append(
                f"{model.name}: not cached: its code loaded {', '.join(native)}, which open files in native code where the cache cannot see them; "
                "name the files it reads in cache_inputs (the model file itself when it reads none)"
            )
            return
        key = self.key_of(model)
        if self.inputs[model.name].get(UNVERIFIABLE):
            self.notes.append(f"{model.name}: not cached: {self.inputs[model.name][UNVERIFIABLE][0]} is not a regular file the cache can hash")
            return
        body = {"key": key, "date": self.date, "name": model.name, "inputs": self.inputs[model.name]}
        body.update(reads=dict(sorted(reads.files.items())), report=result.report.to_json())
        body_text = json.dumps(body)
        entry = {"format": CACHE_FORMAT, "body": body_text, "hmac": sign(self.secret.key, body_text)}
        self.pending[key] = json.dumps(entry) + "\n"

    def commit(self) -> int:
        """Write the held entries; the number written.

        Under :func:`neuronprobe.files.folder_lock` of the cache folder, so another
        nightly sharing the cache writes before or after, never in between. A new entry
        is created with :func:`neuronprobe.files.write_new` (a create-only link: complete
        or absent). Where an entry for the key exists already, another run's entry that
        still verifies is kept (it is as good as ours, and it is not ours to replace);
        only one that no longer verifies is replaced, atomically.
        """
        if not self.pending or self.secret.key is None:
            self.pending.clear()
            return 0
        written = 0
        with folder_lock(self.folder, "result cache"):
            for key, content in sorted(self.pending.items()):
                file = self.folder / f"{key}.json"
                try:
                    try:
                        write_new(file, content.encode("utf-8"))
                    except FileExistsError:
                        if self._verified(key) is not None:
                            continue  # another run's valid entry for the same inputs: kept
                        write_atomic(file, content)  # stale, forged or partial: replaced whole (never a non-file)
                except OSError as exc:
                    raise InputError(f"result cache {file}: cannot write ({exc.strerror or exc}); the night's own files are written") from None
                written += 1
        self.pending.clear()
        return written
