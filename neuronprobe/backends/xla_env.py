"""The xla-cpu backend's environment: torch 2.9 + torch-xla 2.9 in an interpreter of its own.

neuronprobe itself runs on a current torch; the trn1 stack is torch 2.9 +
torch-xla 2.9 (+ neuronx-cc). The first two install from PyPI and run on a
plain CPU, but not next to neuronprobe's torch, so they live in a managed
virtual environment:

* ``neuronprobe setup xla-cpu`` creates it at
  ``${XDG_CACHE_HOME:-~/.cache}/neuronprobe/xla-cpu`` (``--path`` to choose),
  installs ``requirements/xla-cpu.txt`` into ``<path>/venv``, imports torch and
  torch_xla there, checks their versions, and only then writes the completeness
  marker ``<path>/complete.json``. A folder without the marker is a partial
  environment (an interrupted or failed set-up): named, never used.
  Set-up builds only in a folder it stamped itself (``.neuronprobe-xla-env``, a
  random token the marker repeats): a ``complete.json`` and a ``venv/`` that some
  other tool left are not taken for its own (:func:`ownership_problem`).
* ``NEURONPROBE_XLA_PYTHON`` points at any interpreter that already has the
  stack (a trn1 DLAMI's environment, a CI image); it is checked, not trusted.

Nothing here imports torch: the checks run the target interpreter.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import secrets
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from neuronprobe.errors import BackendUnavailable, InputError
from neuronprobe.files import read_input_text

PYTHON_ENV = "NEURONPROBE_XLA_PYTHON"
DIR_ENV = "NEURONPROBE_XLA_ENV"  # the managed environment's folder, instead of the default one
MARKER = "complete.json"
VENV_DIR = "venv"
LOCK_FILE = ".setup.lock"
# The stack the backend stands for: the trn1 release of torch-neuronx 2.9 runs on these.
REQUIRED_VERSIONS = {"torch": "2.9", "torch-xla": "2.9"}
PLACEHOLDER_TEXT = "WRONG PACKAGE"
# A metadata probe imports nothing heavy (well under a second, about 1 s on a loaded CI host);
# an interpreter that does not answer in 6 s is reported as such, so that `doctor` and `auto`
# answer within seconds. The full probe imports torch and torch_xla and builds one XLA tensor
# (a few seconds; minutes on a cold disk). A probe is killed with every process it started.
METADATA_PROBE_TIMEOUT_S = 6
IMPORT_PROBE_TIMEOUT_S = 300
# `setup` writes this first into a new or empty folder: JSON with a random token, which the
# completeness marker records again. A folder is the set-up's own only when its stamp holds a token
# and the marker (if any) the same one; a `complete.json` and a `venv/` alone are someone else's.
OWNER_FILE = ".neuronprobe-xla-env"
MAX_MARKER_BYTES = 1 << 20  # the marker and the stamp are a few hundred bytes
# What neuronprobe <= the token stamp wrote: accepted only in the default location, for a venv whose
# marker names that venv's own interpreter (the environment this machine already set up).
LEGACY_OWNER_TEXT = "created by `neuronprobe setup xla-cpu`: its environment lives here\n"
TOKEN_CHARS = 32
SETUP_HINT = "run `neuronprobe setup xla-cpu`"

STATE_READY = "ready"
STATE_MISSING = "missing"
STATE_PARTIAL = "partial"
STATE_OUTDATED = "outdated"
STATE_BROKEN = "broken"

# Run inside the target interpreter: versions from package metadata and whether an
# installed torch/torch_xla is a placeholder that raises on import. Imports nothing big.
_METADATA_PROBE = r"""
import importlib.metadata as md, importlib.util as u, json, sys
out = {"python": sys.version.split()[0], "executable": sys.executable, "versions": {}, "placeholder": [], "missing": []}
for mod, dist in (("torch", "torch"), ("torch_xla", "torch-xla"), ("transformers", "transformers")):
    try:
        out["versions"][dist] = md.version(dist)
    except Exception:
        pass
    try:
        spec = u.find_spec(mod)
    except Exception:
        spec = None
    if spec is None:
        out["missing"].append(dist)
        continue
    try:
        head = open(spec.origin, encoding="utf-8", errors="replace").read(4096) if spec.origin else ""
    except OSError:
        head = ""
    if "WRONG PACKAGE" in head:
        out["placeholder"].append(dist)
print(json.dumps(out))
"""

# The verification after an install: the stack imports and runs one op on the XLA CPU device.
_IMPORT_PROBE = r"""
import json, os
os.environ.setdefault("PJRT_DEVICE", "CPU")
import torch, torch_xla
t = (torch.ones(2, device=torch_xla.device()) * 2).sum()
torch_xla.sync()
assert float(t.cpu()) == 4.0
print(json.dumps({"torch": torch.__version__, "torch-xla": torch_xla.__version__}))
"""


@dataclass
class XlaEnv:
    """Where the xla-cpu interpreter is and whether it can be used."""

    state: str  # ready | missing | partial | outdated | broken
    python: str | None = None
    path: str | None = None  # the managed folder (None for NEURONPROBE_XLA_PYTHON)
    source: str = "managed"  # "managed" | PYTHON_ENV
    versions: dict[str, str] = field(default_factory=dict)
    problem: str | None = None  # one sentence: why it cannot be used
    setup_seconds: float | None = None  # the first-time set-up time, from the marker
    reused: bool = False  # setup_env found it complete and installed nothing

    @property
    def usable(self) -> bool:
        return self.state == STATE_READY and self.python is not None

    def summary(self) -> str:
        if self.usable:
            where = f"{PYTHON_ENV}={self.python}" if self.source == PYTHON_ENV else str(self.path)
            stack = ", ".join(f"{k} {v}" for k, v in sorted(self.versions.items()))
            return f"ready at {where} ({stack})"
        return self.problem or self.state


def default_env_path(environ: Mapping[str, str] | None = None) -> Path:
    """``${XDG_CACHE_HOME:-~/.cache}/neuronprobe/xla-cpu``: one copy per user and machine.

    ``NEURONPROBE_XLA_ENV`` names another folder (a CI cache volume; the test suite's own).
    """
    env = os.environ if environ is None else environ
    if env.get(DIR_ENV, "").strip():
        return Path(env[DIR_ENV].strip()).expanduser()
    cache = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "neuronprobe" / "xla-cpu"


def requirements_file() -> Path:
    """``requirements/xla-cpu.txt`` of this checkout: the pins the managed environment is built from."""
    return Path(__file__).resolve().parents[2] / "requirements" / "xla-cpu.txt"


def requirements_digest(path: Path) -> str:
    """The marker records which pins an environment was built from; new pins make it outdated.

    Only the requirement lines count: editing a comment does not force a 7 GB reinstall.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return ""
    pins = [ln.split("#", 1)[0].strip() for ln in text.splitlines()]
    return hashlib.sha256("\n".join(p for p in pins if p).encode("utf-8")).hexdigest()[:16]


def venv_python(path: Path) -> Path:
    return path / VENV_DIR / "bin" / "python"


def check_versions(versions: dict[str, str]) -> str | None:
    """A sentence naming the wrong or missing package, or None when the stack is the trn1 one."""
    for dist, wanted in REQUIRED_VERSIONS.items():
        have = versions.get(dist)
        if have is None:
            return f"{dist} is not installed"
        base = have.split("+", 1)[0]
        if not (base == wanted or base.startswith(wanted + ".")):
            return f"{dist} is {have}, not {wanted}.x (the trn1 stack)"
    return None


# The largest probe output read back: the reply is one short JSON line.
MAX_PROBE_OUTPUT = 1 << 20


# Interpreters that did not answer a probe, and when: asked again within UNRESPONSIVE_TTL_S, the
# answer is the same at once (doctor and auto each look up the environment more than once).
UNRESPONSIVE_TTL_S = 60.0
_unresponsive: dict[tuple[str, str], float] = {}


def _run_probe(python: str, code: str, timeout: float) -> tuple[dict | None, str]:
    key = (python, code)
    since = _unresponsive.get(key)
    if since is not None and time.monotonic() - since < UNRESPONSIVE_TTL_S:
        return None, f"{python} did not answer within {timeout:g} s"
    try:
        return _probe(python, code, timeout)
    except _Unresponsive as exc:
        _unresponsive[key] = time.monotonic()
        return None, str(exc)


class _Unresponsive(Exception):
    pass


def _probe(python: str, code: str, timeout: float) -> tuple[dict | None, str]:
    """Run ``code`` in ``python``; its last stdout line is a JSON object. (data, why-not).

    The interpreter runs in a session of its own: at the timeout it is killed with every
    process it started (a wrapper script's children would otherwise hold its pipes open).
    """
    from neuronprobe.process.supervisor import kill_tree

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.setdefault("PJRT_DEVICE", "CPU")
    try:
        proc = subprocess.Popen(
            [python, "-c", code],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
    except OSError as exc:
        return None, f"{python} cannot be run ({exc.strerror or exc})"
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_tree(proc.pid)
        proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.communicate(timeout=1)
        raise _Unresponsive(f"{python} did not answer within {timeout:g} s") from None
    stdout = out[-MAX_PROBE_OUTPUT:].decode("utf-8", "replace")
    stderr = err[-MAX_PROBE_OUTPUT:].decode("utf-8", "replace")
    lines = [ln for ln in stdout.splitlines() if ln.strip()]
    if proc.returncode != 0 or not lines:
        tail = [ln for ln in stderr.strip().splitlines() if ln.strip()]
        return None, f"{python} failed: {tail[-1][:300] if tail else f'exit code {proc.returncode}'}"
    try:
        data = json.loads(lines[-1])
    except (json.JSONDecodeError, RecursionError):
        return None, f"{python} printed no result"
    if not isinstance(data, dict):
        return None, f"{python} printed a reply of the wrong shape (a JSON {type(data).__name__}, not an object)"
    return data, ""


def _string_map(value: object) -> dict[str, str] | None:
    """A JSON object of strings (package versions), else None."""
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        return None
    return dict(value)


def _string_list(value: object) -> list[str] | None:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return None
    return list(value)


def inspect_python(python: str, source: str = PYTHON_ENV, path: str | None = None) -> XlaEnv:
    """Check an interpreter from its package metadata (fast: nothing big is imported)."""
    if not Path(python).exists():
        return XlaEnv(STATE_BROKEN, python, path, source, problem=f"{source}: {python} does not exist")
    data, why = _run_probe(python, _METADATA_PROBE, METADATA_PROBE_TIMEOUT_S)
    if data is None:
        return XlaEnv(STATE_BROKEN, python, path, source, problem=f"{source}: {why}")
    found = _string_map(data.get("versions")), _string_list(data.get("placeholder")), _string_list(data.get("missing"))
    if any(part is None for part in found):
        bad = next(name for name, part in zip(("versions", "placeholder", "missing"), found, strict=True) if part is None)
        return XlaEnv(
            STATE_BROKEN,
            python,
            path,
            source,
            problem=f"{source}: {python} printed a reply of the wrong shape (`{bad}` is missing or not what the probe sends); is it a Python interpreter?",
        )
    versions, placeholder, missing_dists = found
    assert versions is not None and placeholder is not None and missing_dists is not None
    if placeholder:
        names = " and ".join(placeholder)
        return XlaEnv(
            STATE_BROKEN,
            python,
            path,
            source,
            versions,
            problem=f"{source}: {python} has the PyPI placeholder {names}, whose import raises ImportError('WRONG PACKAGE ...')",
        )
    missing = [d for d in missing_dists if d in REQUIRED_VERSIONS]
    if missing:
        return XlaEnv(
            STATE_BROKEN,
            python,
            path,
            source,
            versions,
            problem=f"{source}: {python} has no {' and no '.join(missing)} (the xla-cpu backend needs torch 2.9 and torch-xla 2.9)",
        )
    wrong = check_versions(versions)
    if wrong:
        return XlaEnv(STATE_BROKEN, python, path, source, versions, problem=f"{source}: {python}: {wrong}")
    return XlaEnv(STATE_READY, python, path, source, versions)


def _read_small(file: Path) -> str | None:
    """A marker or stamp of the folder, or None: through the bounded reader (a FIFO or /dev/zero put there never hangs)."""
    try:
        return read_input_text(file, "marker", cap=MAX_MARKER_BYTES)
    except InputError:  # missing, not a regular file, too large, not UTF-8, or not readable by this user
        if file.exists() and not os.access(file, os.R_OK):  # the folder cannot be read: not an interrupted set-up
            raise PermissionError(errno.EACCES, "Permission denied", str(file)) from None
        return None


def _read_marker(path: Path) -> dict | None:
    text = _read_small(path / MARKER)  # PermissionError passes: "incomplete" would be the wrong fix to suggest
    try:
        data = json.loads(text) if text is not None else None
    except (ValueError, RecursionError):  # not JSON, nested without end
        return None
    return data if isinstance(data, dict) else None


def _marker_problem(marker: dict) -> str | None:
    """What is wrong with a completeness marker's fields (it is then no proof of completeness), or None."""
    if _string_map(marker.get("versions")) is None:
        return "`versions` is not an object of package versions"
    if not isinstance(marker.get("requirements"), str):
        return "`requirements` is not a string"
    seconds = marker.get("setup_seconds")
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float))):
        return "`setup_seconds` is not a number"
    return None


def inspect_managed(path: Path, requirements: Path | None = None) -> XlaEnv:
    """The managed environment's state from its marker (no subprocess: cheap enough for every run)."""
    python = venv_python(path)
    if not path.exists():
        return XlaEnv(STATE_MISSING, None, str(path), problem=f"no xla-cpu environment at {path}; {SETUP_HINT}")
    try:
        marker = _read_marker(path)
    except PermissionError as exc:  # said as it is, where doctor and --backend auto show the state
        return XlaEnv(
            STATE_BROKEN, str(python), str(path), problem=f"the xla-cpu environment at {path} cannot be read ({exc.strerror}); give neuronprobe access to it"
        )
    if marker is None:
        return XlaEnv(
            STATE_PARTIAL,
            str(python),
            str(path),
            problem=f"the xla-cpu environment at {path} is incomplete (no {MARKER}: an interrupted or failed set-up); {SETUP_HINT} again",
        )
    malformed = _marker_problem(marker)
    if malformed:
        return XlaEnv(
            STATE_PARTIAL,
            str(python),
            str(path),
            problem=f"the xla-cpu environment at {path} is incomplete ({path / MARKER}: {malformed}); {SETUP_HINT} again",
        )
    versions = _string_map(marker["versions"]) or {}
    seconds = marker.get("setup_seconds")
    if not python.exists():
        return XlaEnv(
            STATE_BROKEN,
            str(python),
            str(path),
            versions=versions,
            problem=f"the xla-cpu environment at {path} has lost its interpreter {python}; {SETUP_HINT} again",
        )
    wanted = requirements_digest(requirements or requirements_file())
    if wanted and marker.get("requirements") != wanted:
        return XlaEnv(
            STATE_OUTDATED,
            str(python),
            str(path),
            versions=versions,
            problem=f"the xla-cpu environment at {path} was built from other pins than requirements/xla-cpu.txt; {SETUP_HINT} again",
        )
    return XlaEnv(STATE_READY, str(python), str(path), versions=versions, setup_seconds=float(seconds) if isinstance(seconds, (int, float)) else None)


def find_env(environ: Mapping[str, str] | None = None) -> XlaEnv:
    """The environment ``--backend xla-cpu`` would use: ``NEURONPROBE_XLA_PYTHON``, else the managed one."""
    env = os.environ if environ is None else environ
    python = env.get(PYTHON_ENV, "").strip()
    if python:
        return inspect_python(python)
    return inspect_managed(default_env_path(env))


# --- set-up ------------------------------------------------------------------------------


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One set-up per folder at a time: parallel CI jobs on one machine share the copy."""
    import fcntl

    path.mkdir(parents=True, exist_ok=True)
    # Never truncated, never followed: a lock file is only ever empty, and a link there is not ours to open.
    fd = os.open(path / LOCK_FILE, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _stream(cmd: list[str], progress: Callable[[str], None], env: dict[str, str]) -> tuple[int, list[str]]:
    """Run a set-up command, passing its output lines to ``progress``; keep the tail for the error."""
    tail: list[str] = []
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    assert proc.stdout is not None
    for line in proc.stdout:
        line = line.rstrip()
        if line:
            tail = ([*tail, line])[-20:]
            progress(line)
    return proc.wait(), tail


def setup_env(
    path: Path | None = None,
    *,
    requirements: Path | None = None,
    progress: Callable[[str], None] = lambda line: None,
    base_python: str | None = None,
) -> XlaEnv:
    """Create (or reuse) the managed environment at ``path``; idempotent.

    A complete environment built from the same pins is reused as is. Anything else
    (absent, partial, outdated, broken) is rebuilt in place: venv, pip install,
    an import probe, then the marker. Raises BackendUnavailable (exit 2) with the
    step that failed; the marker is then absent, so the folder reads as partial.
    """
    path = (path or default_env_path()).expanduser().resolve()
    requirements = requirements or requirements_file()
    if not requirements.is_file():
        raise InputError(f"{requirements}: the xla-cpu requirements file is missing (it ships with neuronprobe's source)")
    check_setup_target(path)
    try:
        lock = _locked(path)
        lock.__enter__()
    except OSError as exc:
        raise InputError(f"{path}: cannot create the xla-cpu environment there ({exc.strerror or exc})") from None
    try:
        return _setup_locked(path, requirements, progress, base_python)
    finally:
        lock.__exit__(None, None, None)


def _own_lock(path: Path) -> set[str]:
    """``{LOCK_FILE}`` when the folder's lock file is one a set-up leaves (an empty regular file), else empty.

    Someone's own ``.setup.lock`` (with content, or a link) is not ours: it counts as a foreign file.
    """
    try:
        info = os.lstat(path / LOCK_FILE)
    except OSError:
        return set()
    return {LOCK_FILE} if stat.S_ISREG(info.st_mode) and info.st_size == 0 else set()


def _owned_entries() -> set[str]:
    return {OWNER_FILE, f"{OWNER_FILE}.tmp", MARKER, f"{MARKER}.tmp", LOCK_FILE, VENV_DIR}


def _stamp_token(path: Path) -> str | None:
    """The random token of the folder's stamp, or None (no stamp, or not one set-up wrote with a token)."""
    text = _read_small(path / OWNER_FILE)
    try:
        data = json.loads(text) if text is not None else None
    except (ValueError, RecursionError):
        return None
    token = data.get("token") if isinstance(data, dict) else None
    if isinstance(token, str) and len(token) == TOKEN_CHARS and all(c in "0123456789abcdef" for c in token):
        return token
    return None


def _legacy_places() -> set[Path]:
    """Where an earlier neuronprobe made its environment: the folder ``NEURONPROBE_XLA_ENV`` names now, and the
    per-user cache folder it names when unset (the place ``make xla-env`` used, also while a test suite points
    the variable elsewhere)."""
    standard = {k: v for k, v in os.environ.items() if k != DIR_ENV}
    return {default_env_path().expanduser().resolve(), default_env_path(standard).expanduser().resolve()}


def _is_legacy_default(path: Path) -> bool:
    """The environment an earlier neuronprobe set up in the default place: its old stamp, and a marker naming its own venv."""
    stamp = _read_small(path / OWNER_FILE)
    if stamp is None:
        return False
    marker = _read_marker(path)
    return (
        stamp == LEGACY_OWNER_TEXT
        and path in _legacy_places()
        and marker is not None
        and marker.get("python") == str(venv_python(path))
        and (path / VENV_DIR / "pyvenv.cfg").is_file()
    )


def ownership_problem(path: Path, entries: set[str]) -> str | None:
    """Why the existing, non-empty folder ``path`` is not the set-up's own (a sentence), or None when it is."""
    foreign = sorted(entries - _owned_entries())
    if foreign:
        shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        return f"the folder already holds files neuronprobe did not put there ({shown})"
    token = _stamp_token(path)
    if token is None:
        if _is_legacy_default(path):
            return None
        shown = ", ".join(sorted(entries - {OWNER_FILE})) or OWNER_FILE
        why = "" if OWNER_FILE not in entries else f" (its {OWNER_FILE} holds no token of a set-up)"
        return f"the folder already holds files neuronprobe did not put there ({shown}){why}"
    marker = _read_marker(path) if MARKER in entries else None
    if MARKER in entries and (marker is None or marker.get("token") != token):
        return f"its {MARKER} was not written by the set-up that stamped the folder (the tokens differ)"
    return None


def check_setup_target(path: Path) -> None:
    """Refuse a ``--path`` that is not a folder neuronprobe may build in (InputError, exit 2, nothing touched).

    A regular file, or a folder under one, cannot hold the environment; a folder that
    already holds files neuronprobe did not put there (someone's own ``venv/``) is not
    replaced, deleted from, or installed into: set-up runs only in a new or empty
    folder, or in one an earlier set-up stamped as its own.
    """
    for folder in (path, *path.parents):
        if folder.exists() or folder.is_symlink():
            if not folder.is_dir():
                what = "is" if folder == path else f"lies under {folder}, which is"
                raise InputError(f"setup --path {path}: {what} not a folder")
            break
    if not path.is_dir():
        return
    try:
        entries = {entry.name for entry in path.iterdir()}
    except OSError as exc:
        raise InputError(f"setup --path {path}: cannot be read ({exc.strerror or exc})") from None
    entries -= _own_lock(path)  # a set-up stopped right after taking its lock left only that
    problem = ownership_problem(path, entries) if entries else None
    if problem:
        raise InputError(f"setup --path {path}: {problem}; give a new or empty folder (neuronprobe never installs into an environment it did not create)")


def _setup_locked(path: Path, requirements: Path, progress: Callable[[str], None], base_python: str | None) -> XlaEnv:
    """setup_env under its lock: stamp the folder, reuse a complete environment, else build it.

    Checked again under the lock (another set-up may have finished meanwhile). A new
    folder is stamped with a fresh random token before anything else is written; a
    complete environment is reused untouched (a legacy one in the default place too).
    """
    entries = {entry.name for entry in path.iterdir()} - _own_lock(path)
    problem = ownership_problem(path, entries) if entries else None
    if problem:
        raise InputError(f"setup --path {path}: {problem}; give a new or empty folder (neuronprobe never installs into an environment it did not create)")
    token = _stamp_token(path)
    current = inspect_managed(path, requirements)
    if current.usable:
        current.reused = True
        return current
    if token is None:  # a new folder, or a legacy environment to rebuild: stamp it as this set-up's own
        token = secrets.token_hex(TOKEN_CHARS // 2)
        stamp = {"token": token, "created_by": "neuronprobe setup xla-cpu", "note": "this folder's environment was created by neuronprobe"}
        _write_replace(path / OWNER_FILE, json.dumps(stamp, indent=2) + "\n")
    start = time.monotonic()
    (path / MARKER).unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_REQUIRE_VIRTUALENV")}
    python = venv_python(path)
    if not python.exists():
        progress(f"creating a virtual environment at {path / VENV_DIR}")
        code, tail = _stream([base_python or sys.executable, "-m", "venv", str(path / VENV_DIR)], progress, env)
        if code != 0:
            raise BackendUnavailable(f"creating the venv at {path / VENV_DIR} failed: {tail[-1] if tail else code}")
    progress(f"installing {requirements.name} (torch 2.9 brings its CUDA libraries: several GB)")
    code, tail = _stream([str(python), "-m", "pip", "install", "--disable-pip-version-check", "-r", str(requirements)], progress, env)
    if code != 0:
        raise BackendUnavailable(f"pip install -r {requirements} into {path / VENV_DIR} failed: {tail[-1] if tail else code}")
    progress("checking: import torch, torch_xla and one op on the XLA CPU device")
    checked = inspect_python(str(python), source="setup", path=str(path))
    if not checked.usable:
        raise BackendUnavailable(checked.problem or "the installed stack is not usable")
    data, why = _run_probe(str(python), _IMPORT_PROBE, IMPORT_PROBE_TIMEOUT_S)
    if data is None:
        raise BackendUnavailable(f"the installed stack does not run: {why}")
    seconds = round(time.monotonic() - start, 1)
    marker = {
        "token": token,  # the stamp's: this marker belongs to this folder's set-up
        "versions": checked.versions,
        "requirements": requirements_digest(requirements),
        "python": str(python),
        "setup_seconds": seconds,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    _write_replace(path / MARKER, json.dumps(marker, indent=2) + "\n")
    return XlaEnv(STATE_READY, str(python), str(path), versions=checked.versions, setup_seconds=seconds)


def _write_replace(file: Path, text: str) -> None:
    tmp = file.with_name(f"{file.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, file)


__all__ = [
    "DIR_ENV",
    "PYTHON_ENV",
    "XlaEnv",
    "default_env_path",
    "find_env",
    "inspect_managed",
    "inspect_python",
    "requirements_file",
    "setup_env",
]
