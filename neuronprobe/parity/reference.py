"""Frozen references (issue 25, point 4): outputs saved once on a declared backend, compared, never recomputed.

The migration practice (../shared/research/serving.md, "Numerical parity"): generate the
reference tensors once, on a backend you name, commit them, and compare every later run
against them with per-dtype tolerances and a top-1 stability check, instead of re-running
a reference that drifts with the code it is meant to check.

A reference is a folder of two files:

* ``outputs.safetensors``: the model's final outputs (``output``, ``output['logits']``,
  ...) and, with ``--per-module``, every module's output in execution order
  (``module:encoder.layer.0``);
* ``manifest.json``: the backend the tensors were produced on (:class:`ReferenceBackend`),
  their dtype, the torch / torch-xla / Neuron SDK versions, the model's hash (the model
  file's sha256; for ``hf:`` the config's canonical JSON), the inputs' hash, the
  tolerances, the tensors' names in order, and the sha256 of ``outputs.safetensors``.

The library never writes: :func:`reference_files` returns the two files' bytes (the
manifest last, so that a folder whose tensors were replaced without its manifest is
caught by the hash), and the CLI writes them with its atomic writer. :func:`load_reference`
reads and checks a folder, :func:`check_identity` refuses one made for another model,
other inputs or (without ``cross_backend``) another backend, and :func:`compare_reference`
compares with ``torch.testing.assert_close``.
"""

from __future__ import annotations

import hashlib
import json
import math
import platform
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuronprobe.backends.outputs import named_outputs
from neuronprobe.errors import InputError
from neuronprobe.file_reads import file_sha256
from neuronprobe.jsonio import dumps
from neuronprobe.limits import MAX_DIM
from neuronprobe.report.schema.reference import ReferenceComparison, TensorCheck, Top1Check
from neuronprobe.vocabulary import ReferenceBackend, ReferenceTensorKind

MANIFEST_NAME = "manifest.json"
TENSORS_NAME = "outputs.safetensors"
FORMAT = "neuronprobe-reference"
FORMAT_VERSION = 1
MODULE_PREFIX = "module:"  # safetensors key of a per-module tensor; final outputs are keyed by their own name

# Starting tolerances per dtype, (rtol, atol): the migration guidance this project follows
# (../shared/research/serving.md, "Numerical parity": fp32 1e-5/1e-7, fp16 1e-3/1e-5, bf16 1e-2/1e-3).
DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    "float32": (1e-5, 1e-7),
    "float16": (1e-3, 1e-5),
    "bfloat16": (1e-2, 1e-3),
}
# Integer and boolean outputs (token ids, masks) must be equal.
EXACT = (0.0, 0.0)
# float64: torch.testing.assert_close's own default for the dtype (torch/testing/_comparison.py, _DTYPE_PRECISIONS).
FLOAT64 = (1e-7, 1e-7)

NEVER_RECOMPUTED = "a frozen reference is never recomputed"
# What a reference folder's files may weigh: a manifest lists tensors (kilobytes); the tensors are a
# model's outputs (logits of a long batch are hundreds of MiB).
MAX_MANIFEST_BYTES = 16 * 2**20
MAX_TENSORS_BYTES = 8 * 2**30


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float


@dataclass(frozen=True)
class RunIdentity:
    """What a reference is valid for: the model, its inputs, and the backend that produced the tensors."""

    model: str  # the spec as given (a path, hf:gpt2, tv:resnet18)
    model_hash: str  # "sha256:<hex>"
    model_hash_of: str  # what was hashed, in words
    inputs_hash: str
    backend: ReferenceBackend = ReferenceBackend.CPU_FP32
    fake: bool = False  # the backend was the test fake of the Neuron SDK
    versions: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ReferenceTensor:
    """A tensor of a reference, as the manifest lists it."""

    name: str
    kind: ReferenceTensorKind
    key: str  # its key in outputs.safetensors
    dtype: str
    shape: tuple[int, ...]


@dataclass
class FrozenReference:
    """A reference folder, read and checked: its manifest and its tensors (CPU, in the manifest's order)."""

    folder: str
    identity: RunIdentity
    dtype: str
    tolerances: dict[str, Tolerance]
    entries: list[ReferenceTensor]
    tensors: dict[str, Any]  # key -> torch.Tensor

    @property
    def per_module(self) -> bool:
        return any(e.kind is ReferenceTensorKind.MODULE for e in self.entries)


# --- identity: hashes and versions ------------------------------------------------------


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def canonical_json(value: Any) -> bytes:
    """One byte string per JSON value: sorted keys, no spaces, UTF-8 (what the hashes are taken of)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode("utf-8")


def model_hash(loaded: Any) -> tuple[str, str]:
    """``(sha256, what was hashed)`` of the model a :class:`~neuronprobe.loaders.resolve.LoadedModel` was built from.

    A model file: its bytes. ``hf:``: the canonical JSON of the config the module was built
    with (after ``--set`` and any shrinking), without ``transformers_version``, which the
    manifest's versions carry. ``tv:``/``timm:``: the name (the architecture is the library's;
    its version is in the versions). A module given as an object: its printed structure.
    """
    path = getattr(loaded, "path", None)
    source = str(getattr(loaded, "source", ""))
    digest = file_sha256(str(path)) if path is not None and Path(path).is_file() else None  # read 1 MiB at a time, never a FIFO
    if path is not None and digest is not None:
        return f"sha256:{digest}", f"the model file {Path(path).name}"
    # the transformers model's config: on the module, or on the model inside neuronprobe's wrapper
    config = next((m.config for m in loaded.module.modules() if hasattr(getattr(m, "config", None), "to_dict")), None)
    if source.startswith("hf:") and config is not None:
        data = {k: v for k, v in config.to_dict().items() if k != "transformers_version"}
        return _sha256(canonical_json(data)), "the config's canonical JSON"
    if source.startswith(("tv:", "timm:")):
        return _sha256(source.encode("utf-8")), f"the name {source}"
    return _sha256(str(loaded.module).encode("utf-8")), "the module's printed structure"


def inputs_hash(args: Any, kwargs: Any) -> str:
    """sha256 over the inputs: each leaf's path, and for a tensor its dtype, shape and bytes (else its repr)."""
    import torch

    from neuronprobe._torch.pytree import leaves_with_names

    digest = hashlib.sha256()
    for path, leaf in leaves_with_names((tuple(args), dict(kwargs))):
        digest.update(path.encode("utf-8") + b"\0")
        if isinstance(leaf, torch.Tensor):
            digest.update(f"{leaf.dtype}{tuple(leaf.shape)}".encode() + b"\0")
            if leaf.device.type != "meta":
                flat = leaf.detach().to("cpu").contiguous().reshape(-1)
                digest.update(flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b"")
        else:
            digest.update(repr(leaf).encode("utf-8"))
        digest.update(b"\1")
    return "sha256:" + digest.hexdigest()


def current_versions(backend: ReferenceBackend, extra: Mapping[str, str | None] | None = None) -> dict[str, str]:
    """The versions a reference records: python, torch and neuronprobe here, plus what ``extra`` names
    (torch-xla, torch-neuronx, neuronx-cc from the backend that ran; transformers, torchvision, timm)."""
    import torch

    from neuronprobe.version import __version__

    versions = {"python": platform.python_version(), "torch": str(torch.__version__), "neuronprobe": __version__}
    for name, value in (extra or {}).items():
        if value:
            versions[name] = str(value)
    return versions


def model_library_versions(source: str) -> dict[str, str | None]:
    """The version of the library that defines a named architecture (transformers, torchvision, timm)."""
    import importlib.metadata

    dist = {"hf:": "transformers", "tv:": "torchvision", "timm:": "timm"}
    for prefix, name in dist.items():
        if source.startswith(prefix):
            try:
                return {name: importlib.metadata.version(name)}
            except importlib.metadata.PackageNotFoundError:
                return {}
    return {}


# --- naming outputs -------------------------------------------------------------------------


def default_tolerance(dtype: str) -> Tolerance:
    """The starting tolerance for a tensor of ``dtype`` (a torch dtype name without ``torch.``)."""
    if dtype in DEFAULT_TOLERANCES:
        return Tolerance(*DEFAULT_TOLERANCES[dtype])
    if dtype == "float64":
        return Tolerance(*FLOAT64)
    if not dtype.startswith(("float", "complex")):
        return Tolerance(*EXACT)
    # float8 and the like: the loosest starting point (bf16's), say so by storing it in the manifest
    return Tolerance(*DEFAULT_TOLERANCES["bfloat16"])


def resolve_tolerances(dtypes: list[str], rtol: float | None, atol: float | None, base: Mapping[str, Tolerance] | None = None) -> dict[str, Tolerance]:
    """Per dtype: ``rtol``/``atol`` where given (they apply to every dtype), else ``base`` (a manifest's), else the defaults."""
    for flag, value in (("--rtol", rtol), ("--atol", atol)):
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise InputError(f"{flag} {value}: use a number >= 0")
    out = {}
    for dtype in dict.fromkeys(dtypes):
        start = (base or {}).get(dtype) or default_tolerance(dtype)
        out[dtype] = Tolerance(start.rtol if rtol is None else rtol, start.atol if atol is None else atol)
    return out


def _dtype_name(tensor: Any) -> str:
    return str(tensor.dtype).removeprefix("torch.")


# --- writing ------------------------------------------------------------------------------


def reference_files(
    outputs: Mapping[str, Any],
    identity: RunIdentity,
    *,
    modules: Mapping[str, Any] | None = None,
    rtol: float | None = None,
    atol: float | None = None,
) -> list[tuple[str, bytes]]:
    """The files of a reference folder, ``[(name, bytes)]`` in the order to write them (the manifest last).

    ``outputs`` are the final outputs (:func:`named_outputs`), ``modules`` each module's output
    in execution order (``--per-module``). The tolerances recorded are ``rtol``/``atol`` where
    given, else the per-dtype defaults: the comparison uses them unless told otherwise.
    """
    import torch
    from safetensors.torch import save

    entries: list[ReferenceTensor] = []
    tensors: dict[str, Any] = {}
    for kind, mapping, prefix in ((ReferenceTensorKind.OUTPUT, outputs, ""), (ReferenceTensorKind.MODULE, modules or {}, MODULE_PREFIX)):
        for name, tensor in mapping.items():
            if not isinstance(tensor, torch.Tensor):
                continue
            key = prefix + name
            if key in tensors:
                raise InputError(f"two tensors of the reference are both named {key!r}")
            if tensor.layout != torch.strided:  # sparse: saved by its values (safetensors stores dense tensors)
                tensor = tensor.to_dense()
            if tensor.device.type == "meta":
                raise InputError(f"{key}: the tensor has no values (built on the meta device); a reference needs real outputs")
            # a copy of its own: safetensors refuses tensors that share storage (a module returning a view)
            tensors[key] = tensor.detach().to("cpu").contiguous().clone()
            entries.append(ReferenceTensor(name, kind, key, _dtype_name(tensor), tuple(int(d) for d in tensor.shape)))
    if not any(e.kind is ReferenceTensorKind.OUTPUT for e in entries):
        raise InputError(f"{identity.model}: the model returned no tensor, so there is nothing to freeze as a reference")
    blob = save(tensors, metadata={"format": FORMAT})
    dtypes = [e.dtype for e in entries]
    tolerances = resolve_tolerances(dtypes, rtol, atol)
    output_dtypes = {e.dtype for e in entries if e.kind is ReferenceTensorKind.OUTPUT}
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "backend": identity.backend.value,
        "backend_words": identity.backend.words,
        "fake": identity.fake,
        "dtype": ",".join(sorted(output_dtypes)),
        "model": {"spec": identity.model, "hash": identity.model_hash, "of": identity.model_hash_of},
        "inputs": {"hash": identity.inputs_hash},
        "versions": dict(sorted(identity.versions.items())),
        "tolerances": {d: {"rtol": t.rtol, "atol": t.atol} for d, t in tolerances.items()},
        "per_module": bool(modules),
        "tensors": [{"name": e.name, "kind": e.kind.value, "key": e.key, "dtype": e.dtype, "shape": list(e.shape)} for e in entries],
        "files": {TENSORS_NAME: _sha256(blob)},
    }
    text = dumps(manifest, indent=2, ensure_ascii=False) + "\n"  # the codec: never NaN
    return [(TENSORS_NAME, blob), (MANIFEST_NAME, text.encode("utf-8"))]


def check_new_folder(folder: str | Path) -> None:
    """``--save-reference DIR``: a folder that already holds a reference is not overwritten (exit 2)."""
    if (Path(folder) / MANIFEST_NAME).exists():
        raise InputError(
            f"--save-reference {folder}: the folder already holds a reference ({MANIFEST_NAME}); "
            f"{NEVER_RECOMPUTED} in place: remove the folder first to freeze a new one"
        )


# --- reading ------------------------------------------------------------------------------


def _field(data: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = data.get(key)
    if not isinstance(value, kind):
        raise InputError(f"{where}: field {key!r} is missing or not a {getattr(kind, '__name__', 'value')}; the reference is damaged, save it again")
    return value


def load_reference(folder: str | Path) -> FrozenReference:
    """Read and check a reference folder; an :class:`InputError` (exit 2, one sentence) for anything wrong.

    A missing folder or manifest is refused, never recomputed; a manifest that does not
    describe the tensors file (a hand edit, a copy interrupted half-way) is refused.
    """
    from safetensors import SafetensorError
    from safetensors.torch import load

    base = Path(folder)
    manifest_path = base / MANIFEST_NAME
    if not base.is_dir():
        there = "exists and is not a folder" if base.exists() else "no such folder"
        raise InputError(f"--reference {folder}: {there}; {NEVER_RECOMPUTED}: save one first with --save-reference {folder}")
    if not manifest_path.exists():  # a pipe, a device or a folder in its place is refused by the bounded reader, by its kind
        raise InputError(f"--reference {folder}: no {MANIFEST_NAME} in the folder; {NEVER_RECOMPUTED}: save one first with --save-reference {folder}")
    where = str(manifest_path)
    from neuronprobe.files import read_input, read_input_text
    from neuronprobe.jsonio import loads_strict

    try:
        # Bounded: a manifest that is a FIFO or a link to /dev/zero is refused, not waited on or read for ever.
        data = loads_strict(read_input_text(manifest_path, "reference manifest", cap=MAX_MANIFEST_BYTES))
    except (ValueError, RecursionError) as exc:
        raise InputError(f"{where}: not a readable reference manifest ({type(exc).__name__}); save the reference again") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise InputError(f'{where}: not a neuronprobe reference manifest (no "format": "{FORMAT}")')
    version = data.get("format_version")
    if version != FORMAT_VERSION:
        raise InputError(f"{where}: reference format version {version!r}; this neuronprobe reads version {FORMAT_VERSION}")
    try:
        backend = ReferenceBackend(str(data.get("backend")))
    except ValueError:
        raise InputError(f"{where}: unknown backend {data.get('backend')!r}; expected one of {', '.join(ReferenceBackend.values())}") from None
    model = _field(data, "model", dict, where)
    inputs = _field(data, "inputs", dict, where)
    versions = _field(data, "versions", dict, where)
    identity = RunIdentity(
        model=str(_field(model, "spec", str, where)),
        model_hash=str(_field(model, "hash", str, where)),
        model_hash_of=str(_field(model, "of", str, where)),
        inputs_hash=str(_field(inputs, "hash", str, where)),
        backend=backend,
        fake=bool(data.get("fake", False)),
        versions={str(k): str(v) for k, v in versions.items()},
    )
    tolerances: dict[str, Tolerance] = {}
    for dtype, tol in _field(data, "tolerances", dict, where).items():
        if not isinstance(tol, dict):
            raise InputError(f"{where}: tolerances of {dtype!r} are not an object with rtol and atol")
        values = [tol.get("rtol"), tol.get("atol")]
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0 for v in values):
            raise InputError(f"{where}: tolerances of {dtype!r} need numbers rtol and atol >= 0")
        tolerances[str(dtype)] = Tolerance(float(values[0]), float(values[1]))  # type: ignore[arg-type]
    entries = []
    for i, raw in enumerate(_field(data, "tensors", list, where)):
        if not isinstance(raw, dict):
            raise InputError(f"{where}: tensors[{i}] is not an object")
        try:
            kind = ReferenceTensorKind(raw.get("kind"))
        except ValueError:
            raise InputError(f"{where}: tensors[{i}] has an unknown kind {raw.get('kind')!r}") from None
        shape = _field(raw, "shape", list, f"{where} tensors[{i}]")
        if not all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d <= MAX_DIM for d in shape):
            raise InputError(f"{where}: tensors[{i}] 'shape' must list whole numbers from 0 to {MAX_DIM}; the reference is damaged, save it again")
        entries.append(
            ReferenceTensor(
                str(_field(raw, "name", str, f"{where} tensors[{i}]")),
                kind,
                str(_field(raw, "key", str, f"{where} tensors[{i}]")),
                str(_field(raw, "dtype", str, f"{where} tensors[{i}]")),
                tuple(int(d) for d in shape),
            )
        )
    tensors_path = base / TENSORS_NAME
    if not tensors_path.exists():
        raise InputError(f"--reference {folder}: {TENSORS_NAME} is missing; {NEVER_RECOMPUTED}: save the reference again")
    blob = read_input(tensors_path, "reference tensors", cap=MAX_TENSORS_BYTES)
    expected = _field(data, "files", dict, where).get(TENSORS_NAME)
    if _sha256(blob) != expected:
        raise InputError(
            f"--reference {folder}: {TENSORS_NAME} is not the file {MANIFEST_NAME} describes (its sha256 differs): "
            "the folder was changed or copied half-way; save the reference again"
        )
    try:
        tensors = load(blob)
    except (SafetensorError, ValueError) as exc:
        raise InputError(f"--reference {folder}: {TENSORS_NAME} cannot be read ({exc}); save the reference again") from None
    for i, entry in enumerate(entries):
        if entry.key not in tensors:
            raise InputError(f"--reference {folder}: {TENSORS_NAME} lacks the tensor {entry.key!r} the manifest lists; save the reference again")
        stored = tuple(int(d) for d in tensors[entry.key].shape)
        if stored != entry.shape:  # the manifest is not hashed: a shape edited there was reported as the reference's
            raise InputError(
                f"{where}: tensors[{i}] 'shape' is {list(entry.shape)} but {TENSORS_NAME} holds {list(stored)}; the reference is damaged, save it again"
            )
    return FrozenReference(str(folder), identity, str(data.get("dtype", "")), tolerances, entries, tensors)


def check_identity(reference: FrozenReference, current: RunIdentity, cross_backend: bool = False) -> None:
    """Refuse (exit 2) a reference made for another model or other inputs, or on another backend unless ``cross_backend``."""
    then = reference.identity
    folder = reference.folder
    if then.model_hash != current.model_hash:
        raise InputError(
            f"--reference {folder}: the model changed since the reference was saved ({then.model_hash_of}: "
            f"{then.model_hash[:19]}... then, {current.model_hash[:19]}... now); {NEVER_RECOMPUTED}: "
            f"save a new one with --save-reference if the change is intended"
        )
    if then.inputs_hash != current.inputs_hash:
        raise InputError(
            f"--reference {folder}: the inputs changed since the reference was saved (sha256 {then.inputs_hash[7:19]}... then, "
            f"{current.inputs_hash[7:19]}... now); compare on the inputs it was made with, or save a new reference"
        )
    if not cross_backend and (then.backend is not current.backend or then.fake != current.fake):
        raise InputError(
            f"--reference {folder}: produced on {_backend_label(then)}, this run is on {_backend_label(current)}; "
            "a reference is compared on the backend it was produced on: add --cross-backend to compare anyway (reported, never gated)"
        )


def _backend_label(identity: RunIdentity) -> str:
    return f"{identity.backend.value} (the test fake)" if identity.fake else identity.backend.value


# --- comparing ------------------------------------------------------------------------------


def _check_tensor(entry: ReferenceTensor, expected: Any, actual: Any, tolerance: Tolerance) -> TensorCheck:
    import torch

    check = TensorCheck(
        name=entry.name,
        kind=entry.kind,
        dtype=entry.dtype,
        shape=list(entry.shape),
        rtol=tolerance.rtol,
        atol=tolerance.atol,
        total=int(expected.numel()),
    )
    if actual is None:
        check.passed = False
        check.detail = "this run has no such tensor"
        return check
    actual = actual.detach().to("cpu")
    if tuple(actual.shape) != tuple(expected.shape):
        check.passed = False
        check.detail = f"shape {tuple(actual.shape)} now, {tuple(expected.shape)} in the reference"
        return check
    try:
        torch.testing.assert_close(actual, expected, rtol=tolerance.rtol, atol=tolerance.atol, check_dtype=False, equal_nan=True)
    except AssertionError as exc:
        check.passed = False
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        check.detail = " ".join(lines[:2]) or "not close"  # "Tensor-likes are not close! Mismatched elements: 3 / 8 (37.5%)"
    if expected.numel() and (expected.is_floating_point() or actual.is_floating_point()):
        a, e = actual.to(torch.float64), expected.to(torch.float64)
        diff = (a - e).abs()
        both_nan = a.isnan() & e.isnan()
        diff = torch.where(both_nan, torch.zeros_like(diff), diff)
        diff = torch.where(diff.isnan(), torch.full_like(diff, math.inf), diff)  # a nan on one side only
        check.max_abs = float(diff.max())
        nonzero = e != 0
        check.max_rel = float((diff[nonzero] / e[nonzero].abs()).max()) if bool(nonzero.any()) else 0.0
        check.mismatched = int((diff > tolerance.atol + tolerance.rtol * e.abs()).sum())
    elif expected.numel():
        check.mismatched = int((actual != expected).sum())
        check.max_abs = float(check.mismatched > 0)
    return check


def top1_check(name: str, expected: Any, actual: Any) -> Top1Check | None:
    """The arg-max over the last dimension, reference vs run; None for a tensor without a class dimension."""
    if actual is None or not expected.is_floating_point() or expected.dim() == 0 or expected.shape[-1] < 2 or tuple(actual.shape) != tuple(expected.shape):
        return None
    ref = expected.reshape(-1, expected.shape[-1]).argmax(dim=-1)
    now = actual.detach().to("cpu").reshape(-1, expected.shape[-1]).argmax(dim=-1)
    changed = (ref != now).nonzero()
    return Top1Check(tensor=name, positions=int(ref.numel()), changed=int(changed.numel()), first_changed=int(changed[0, 0]) if changed.numel() else None)


def compare_reference(
    reference: FrozenReference | str | Path,
    outputs: Mapping[str, Any],
    current: RunIdentity,
    *,
    modules: Mapping[str, Any] | None = None,
    module_lines: Mapping[str, tuple[str | None, int | None]] | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    cross_backend: bool = False,
) -> ReferenceComparison:
    """This run's ``outputs`` (and per-module ``modules``) against a frozen reference.

    Refuses (:class:`InputError`) what :func:`check_identity` refuses. Every tensor is checked
    with ``torch.testing.assert_close`` at the manifest's tolerances for its dtype, unless
    ``rtol``/``atol`` override them; the model's first output that has a class dimension gets
    a top-1 check. The result names the first tensor and the first module that do not match;
    ``module_lines`` (module path -> the user's file and line) places the module.
    """
    ref = reference if isinstance(reference, FrozenReference) else load_reference(reference)
    check_identity(ref, current, cross_backend)
    cross = ref.identity.backend is not current.backend or ref.identity.fake != current.fake
    if ref.per_module and modules is None and not cross:
        raise InputError(f"--reference {ref.folder}: the reference holds per-module outputs; this run must keep them too (add --per-module)")
    # a device run has final outputs only: across backends, a per-module reference is compared on its outputs
    entries = [e for e in ref.entries if e.kind is ReferenceTensorKind.OUTPUT or modules is not None]
    tolerances = resolve_tolerances([e.dtype for e in entries], rtol, atol, ref.tolerances)
    checks: list[TensorCheck] = []
    top1: list[Top1Check] = []
    for entry in entries:
        now = (outputs if entry.kind is ReferenceTensorKind.OUTPUT else modules or {}).get(entry.name)
        expected = ref.tensors[entry.key]
        check = _check_tensor(entry, expected, now, tolerances[entry.dtype])
        if entry.kind is ReferenceTensorKind.MODULE and module_lines and entry.name in module_lines:
            check.file, check.line = module_lines[entry.name]
        checks.append(check)
        if entry.kind is ReferenceTensorKind.OUTPUT and not top1:
            found = top1_check(entry.name, expected, now)
            if found is not None:
                top1.append(found)
    first = next((c for c in checks if not c.passed), None)
    first_module = next((c for c in checks if not c.passed and c.kind is ReferenceTensorKind.MODULE), None)
    passed = first is None and not any(t.changed for t in top1)
    comparison = ReferenceComparison(
        reference=ref.folder,
        produced_on=ref.identity.backend,
        compared_on=current.backend,
        produced_fake=ref.identity.fake,
        compared_fake=current.fake,
        cross_backend=cross,
        model=ref.identity.model,
        model_hash=ref.identity.model_hash,
        model_hash_of=ref.identity.model_hash_of,
        inputs_hash=ref.identity.inputs_hash,
        versions_then=dict(ref.identity.versions),
        versions_now=dict(current.versions),
        tensors=checks,
        top1=top1,
        first_mismatch=first.name if first else None,
        first_mismatch_module=first_module.name if first_module else None,
        passed=passed,
    )
    comparison.summary = comparison_sentence(comparison)
    return comparison


def comparison_sentence(c: ReferenceComparison) -> str:
    """One sentence: matches or not, the first module that does not, top-1 changes, and whether it gates."""
    outputs = [t for t in c.tensors if t.kind is ReferenceTensorKind.OUTPUT]
    bad = [t for t in c.tensors if not t.passed]
    changed = sum(t.changed for t in c.top1)
    where = f"{c.produced_on.value} reference {c.reference}"
    if c.passed:
        text = f"matches the {where}: {len(c.tensors)} tensor(s) within tolerance"
    else:
        parts = []
        if bad:
            parts.append(f"{len(bad)} of {len(c.tensors)} tensor(s) outside tolerance")
        if c.first_mismatch_module:
            module = next(t for t in c.tensors if t.name == c.first_mismatch_module and t.kind is ReferenceTensorKind.MODULE)
            place = f" ({module.file}:{module.line})" if module.file else ""
            parts.append(f"first module that differs: {c.first_mismatch_module}{place}")
        elif c.first_mismatch:
            parts.append(f"first output that differs: {c.first_mismatch}")
        if changed:
            top = c.top1[0]
            parts.append(f"top-1 changed at {changed} of {top.positions} position(s) of {top.tensor}")
        elif not bad and not outputs:
            parts.append("no output to compare")
        text = f"differs from the {where}: " + "; ".join(parts)
    if c.cross_backend:
        text += f" (cross-backend: produced on {c.produced_on.value}{' (test fake)' if c.produced_fake else ''}, compared on {c.compared_on.value}{' (test fake)' if c.compared_fake else ''}; reported, not gated)"
    return text


__all__ = [
    "DEFAULT_TOLERANCES",
    "MANIFEST_NAME",
    "TENSORS_NAME",
    "FrozenReference",
    "ReferenceTensor",
    "RunIdentity",
    "Tolerance",
    "canonical_json",
    "check_identity",
    "check_new_folder",
    "compare_reference",
    "comparison_sentence",
    "current_versions",
    "default_tolerance",
    "inputs_hash",
    "load_reference",
    "model_hash",
    "model_library_versions",
    "named_outputs",
    "reference_files",
    "resolve_tolerances",
    "top1_check",
]
