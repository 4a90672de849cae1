"""Which Neuron PyTorch stack is installed, found without importing it.

Importing ``torch_neuronx`` or ``torch_xla`` is slow (seconds), can start the
Neuron runtime, and on a machine with the PyPI placeholder raises. Detection
therefore only *locates* the packages (``importlib.util.find_spec`` on
top-level names, which imports nothing) and reads a few small files:

* the PyPI placeholder: its ``__init__.py`` raises ``ImportError("WRONG PACKAGE ...")``;
* the test fake (``tests/fake_backend``): every fake package carries ``__neuronprobe_fake__ = True``;
* the XLA-era ``torch-neuronx`` (trn1/inf2): exports ``trace`` and ``analyze``
  (and has an ``xla_impl/`` folder);
* the native TorchNeuron backend (trn2/trn3): exports ``get_fallback_ops``
  (and has ``neuron_dynamo_backend/`` or ``python_ops/``).

Nothing here raises: every odd state becomes a :class:`Detection` whose
``problem`` says, in one sentence, why the live backend cannot run.
"""

from __future__ import annotations

import glob
import importlib.machinery
import importlib.metadata
import importlib.util
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

FAKE_MARKER = "__neuronprobe_fake__"
PLACEHOLDER_TEXT = "WRONG PACKAGE"
NEURON_REPO_URL = "https://pip.repos.neuron.amazonaws.com"
INSTALL_HINT = (
    f"install the Neuron stack from the Neuron package repository (pip install --extra-index-url {NEURON_REPO_URL} "
    "-r requirements/neuron.txt), or use the Neuron DLAMI's PyTorch virtual environment"
)
# Only the head of a package's __init__.py is read: the exports and markers are at
# the top, and a large file must not make detection slow.
MAX_SOURCE_BYTES = 256 * 1024
# The PyPI placeholder is the only torch-neuronx release on PyPI, version 1.0.
PLACEHOLDER_VERSION = "1.0"

# (import name, distribution name); the report's version keys are the distribution names.
PACKAGES: dict[str, str] = {
    "torch": "torch",
    "torch_neuronx": "torch-neuronx",
    "torch_xla": "torch-xla",
    "neuronxcc": "neuronx-cc",
    "libneuronxla": "libneuronxla",
}

STACK_XLA = "xla"
STACK_NATIVE = "native"
STACK_PLACEHOLDER = "placeholder"
STACK_PARTIAL = "partial"
STACK_UNKNOWN = "unknown"
STACK_NONE = "none"
LIVE_STACKS = frozenset({STACK_XLA, STACK_NATIVE})

_VERSION = re.compile(r"""^\s*(?:__version__|version|VERSION)\s*(?::\s*str\s*)?=\s*['"]([^'"]+)['"]""", re.M)
_XLA_EXPORTS = (re.compile(r"\btrace\b"), re.compile(r"\banalyze\b"))
_NATIVE_EXPORT = re.compile(r"\bget_fallback_ops\b")
_FAKE = re.compile(rf"^\s*{FAKE_MARKER}\s*=\s*True", re.M)


@dataclass
class PackageInfo:
    """One located package: where it is and what its files say."""

    name: str  # import name
    found: bool = False
    path: str | None = None  # the package folder (or module file)
    version: str | None = None
    fake: bool = False
    placeholder: bool = False
    error: str | None = None  # why it could not be located, when find_spec raised
    source: str = ""  # head of __init__.py (not reported)


@dataclass
class Detection:
    """What :func:`detect` found: the stack kind, versions, and whether it can run live."""

    stack: str  # xla | native | placeholder | partial | unknown | none
    fake: bool = False
    versions: dict[str, str] = field(default_factory=dict)  # distribution name -> version
    paths: dict[str, str] = field(default_factory=dict)  # import name -> location
    problem: str | None = None  # one short sentence: why the live backend cannot run
    hint: str = ""  # what to do about it
    notes: list[str] = field(default_factory=list)
    devices: int = 0  # /dev/neuron* device files

    @property
    def usable(self) -> bool:
        """A stack the live backend can drive (real or the test fake)."""
        return self.stack in LIVE_STACKS and self.problem is None

    @property
    def is_real(self) -> bool:
        """The real Neuron SDK: usable and not the test fake."""
        return self.usable and not self.fake

    @property
    def kind_label(self) -> str:
        return {
            STACK_XLA: "XLA-era torch-neuronx (trace/analyze, trn1/inf2)",
            STACK_NATIVE: "native TorchNeuron (get_fallback_ops, trn2/trn3)",
            STACK_PLACEHOLDER: "the PyPI placeholder torch-neuronx",
            STACK_PARTIAL: "a partial Neuron stack",
            STACK_UNKNOWN: "an unrecognised torch-neuronx",
            STACK_NONE: "no Neuron SDK",
        }[self.stack]

    def summary(self, with_hint: bool = False) -> str:
        """One line: what was detected (and, with_hint, what to do), for errors and the hardware test tier."""
        if self.problem:
            line = self.problem
        else:
            line = self.kind_label
            if self.versions.get("torch-neuronx"):
                line += f", torch-neuronx {self.versions['torch-neuronx']}"
        if self.fake:
            line += " (the test fake from tests/fake_backend, not hardware)"
        if with_hint and self.hint:
            line += f"; {self.hint}"
        return line


# --- locating packages --------------------------------------------------------------


def _read_head(path: Path) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read(MAX_SOURCE_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return ""


def _version_from_files(folder: Path | None, source: str) -> str | None:
    """``__version__ = '...'`` from _version.py / version.py / __init__.py, the files that travel with the package."""
    candidates: list[str] = []
    if folder is not None:
        for name in ("_version.py", "version.py"):
            candidates.append(_read_head(folder / name))
    candidates.append(source)
    for text in candidates:
        m = _VERSION.search(text)
        if m:
            return m.group(1)
    return None


def _metadata_version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except Exception:  # PackageNotFoundError, or a broken METADATA file
        return None


def locate(name: str) -> PackageInfo:
    """Find a top-level package without importing it; never raises."""
    info = PackageInfo(name=name)
    try:
        spec = importlib.util.find_spec(name)
    except ModuleNotFoundError:
        return info
    except Exception as exc:  # a broken finder, a half-installed package
        info.error = f"{type(exc).__name__}: {exc}"
        return info
    if spec is None:
        return info
    info.found = True
    origin = spec.origin if spec.origin not in (None, "namespace", "built-in", "frozen") else None
    folder: Path | None = None
    if spec.submodule_search_locations:
        locations = list(spec.submodule_search_locations)
        folder = Path(locations[0]) if locations else None
    init = Path(origin) if origin else None
    info.path = str(folder) if folder is not None else (origin or None)
    if init is not None and init.suffix == ".py":
        info.source = _read_head(init)
    info.fake = bool(_FAKE.search(info.source))
    info.placeholder = PLACEHOLDER_TEXT in info.source
    info.version = _version_from_files(folder, info.source) or _metadata_version(PACKAGES.get(name, name))
    return info


def _neuron_devices() -> int:
    return len(glob.glob("/dev/neuron[0-9]*"))


# --- classifying the stack --------------------------------------------------------------


def _torch_neuronx_flavour(info: PackageInfo) -> str:
    """xla, native or unknown, from the package's exports and folders."""
    folder = Path(info.path) if info.path and os.path.isdir(info.path) else None
    native = bool(_NATIVE_EXPORT.search(info.source))
    xla = all(p.search(info.source) for p in _XLA_EXPORTS)
    if folder is not None:
        native = native or (folder / "neuron_dynamo_backend").is_dir() or (folder / "python_ops").is_dir()
        xla = xla or (folder / "xla_impl").is_dir()
    if native and not xla:
        return STACK_NATIVE
    if xla and not native:
        return STACK_XLA
    if native and xla:  # both markers: the version decides (2.13+ is the native library)
        return STACK_NATIVE if _major_minor(info.version) >= (2, 13) else STACK_XLA
    return STACK_UNKNOWN


def _major_minor(version: str | None) -> tuple[int, int]:
    m = re.match(r"(\d+)\.(\d+)", version or "")
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def detect() -> Detection:
    """Locate the Neuron stack (no imports, no subprocesses); never raises."""
    found = {name: locate(name) for name in PACKAGES}
    versions = {PACKAGES[n]: i.version for n, i in found.items() if i.found and i.version}
    paths = {n: i.path for n, i in found.items() if i.found and i.path}
    tnx = found["torch_neuronx"]
    devices = _neuron_devices()
    notes = [f"{n}: could not be located ({i.error})" for n, i in found.items() if i.error]

    def result(stack: str, problem: str | None, fake: bool = False, hint: str = INSTALL_HINT) -> Detection:
        return Detection(stack, fake, versions, paths, problem, hint if problem else "", notes, devices)

    if not tnx.found:
        return result(STACK_NONE, "torch-neuronx is not installed")
    if tnx.placeholder or (not tnx.fake and tnx.version == PLACEHOLDER_VERSION and len(tnx.source) < 400):
        return result(
            STACK_PLACEHOLDER,
            "torch-neuronx is the PyPI placeholder, whose import raises ImportError('WRONG PACKAGE ...')",
            hint=f"pip uninstall torch-neuronx, then {INSTALL_HINT}",
        )
    flavour = _torch_neuronx_flavour(tnx)
    fake = any(i.fake for n, i in found.items() if n != "torch" and i.found)
    if not found["torch"].found:
        return result(STACK_PARTIAL, "torch-neuronx is installed but torch is not", fake)
    if flavour == STACK_UNKNOWN:
        return result(
            STACK_UNKNOWN,
            f"torch-neuronx {tnx.version or '(unknown version)'} at {tnx.path} exports neither trace/analyze "
            "(XLA-era) nor get_fallback_ops (native TorchNeuron)",
            fake,
            hint="reinstall torch-neuronx from the Neuron package repository",
        )
    if flavour == STACK_XLA:
        missing = [PACKAGES[n] for n in ("torch_xla", "neuronxcc") if not found[n].found]
        if missing:
            return result(
                STACK_PARTIAL,
                f"the XLA-era torch-neuronx is installed but {' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} missing",
                fake,
            )
        if not found["libneuronxla"].found and not fake:
            notes.append("libneuronxla is not installed: torch-xla may not see the Neuron devices")
    if not fake and devices == 0:
        notes.append("no /dev/neuron* devices: compiling works, running on a NeuronCore will not")
    return result(flavour, None, fake)


__all__ = ["FAKE_MARKER", "INSTALL_HINT", "Detection", "PackageInfo", "detect", "locate"]
