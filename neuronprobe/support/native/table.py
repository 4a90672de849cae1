"""The native (TorchNeuron) support table: which aten overloads have a Neuron kernel, which run on the host.

Three sources, one shape (:class:`NativeTable`), and the report says which answered and how old it is:

* **bundled** (``support/data/native_table.json``): built by ``scripts/build_native_table.py`` from
  TorchNeuron's public development source at one commit, resolved through torch's dispatch table;
* **installed** (``${XDG_CACHE_HOME:-~/.cache}/neuronprobe/native-table.json``): written by
  ``neuronprobe setup native-table`` on a Neuron host from the installed release's own registrations
  (``torch._C._dispatch_get_registrations_for_dispatch_key("PrivateUse1")``); used when present;
* **a release's table** (``--support-table FILE``): TorchNeuron's ``docs/torch_api_compatibility.md``
  (rows ``Y`` / ``CPU_FALLBACK`` naming the aten op and the dtypes that fall back / ``N``) laid over
  the bundled table, or a JSON file in the installed table's format.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import date
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from neuronprobe.errors import InputError, InternalError

TABLE_FILE = "native-table.json"
# The largest table file read (a release's torch_api_compatibility.md and the bundled JSON are ~100 KB):
# read through the bounded reader, so a FIFO or a link to /dev/zero given as --support-table is one sentence.
MAX_TABLE_BYTES = 16 * 1024 * 1024
STATUSES = ("Y", "CPU_FALLBACK", "N")
_DTYPES = ("float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool", "complex64", "complex128")


@dataclass(frozen=True)
class NativeTable:
    """What TorchNeuron does with each aten overload (keys as ``OpCall.key``: ``add.Tensor``, ``relu``)."""

    origin: str  # bundled | installed | file
    release: str  # the release the facts describe, in words
    dated: str  # ISO date of the facts (the source commit, the dump, the release table)
    where: str  # the file or repository@commit it was read from
    neuron_kernel: frozenset[str]
    registered_cpu_fallback: frozenset[str] = frozenset()
    composite: frozenset[str] = frozenset()
    no_kernel: frozenset[str] = frozenset()
    silent_fallback: frozenset[str] = frozenset()
    host_kernels: Mapping[str, str] = field(default_factory=dict)
    dtype_fallback: Mapping[str, frozenset[str]] = field(default_factory=dict)  # op key -> dtypes that fall back
    unsupported: frozenset[str] = frozenset()  # N in a release's table (aten base names)
    provenance: tuple[str, ...] = ()

    def age_days(self, today: date | None = None) -> int | None:
        """Days between the facts and ``today`` (None when the table carries no date)."""
        try:
            return ((today or date.today()) - date.fromisoformat(self.dated)).days
        except ValueError:
            return None

    def label(self, today: date | None = None) -> str:
        """One line for the report: which table answered, what it describes and how old it is."""
        age = self.age_days(today)
        old = f", {age} days old" if age is not None else ", undated"
        return f"native table ({self.origin}: {self.where}; {self.release}; facts of {self.dated or '?'}{old})"


def _table_from_doc(doc: Mapping[str, Any], origin: str, where: str) -> NativeTable:
    try:
        source = doc.get("source", {})
        return NativeTable(
            origin=origin,
            release=str(doc["release"]),
            dated=str(source.get("date") or doc.get("dated", "")),
            where=where if origin != "bundled" else f"{source['repository']}@{str(source['commit'])[:8]}",
            neuron_kernel=frozenset(doc["neuron_kernel"]),
            registered_cpu_fallback=frozenset(doc.get("registered_cpu_fallback", ())),
            composite=frozenset(doc.get("composite", ())),
            no_kernel=frozenset(doc.get("no_kernel", ())),
            silent_fallback=frozenset(doc.get("silent_fallback", ())),
            host_kernels=dict(doc.get("host_kernels", {})),
            dtype_fallback={k: frozenset(v) for k, v in doc.get("dtype_fallback", {}).items()},
            provenance=tuple(doc.get("provenance", ())),
        )
    except (KeyError, TypeError, AttributeError) as exc:
        raise InputError(f"{where}: not a native support table (missing or malformed {exc})") from None


@lru_cache(maxsize=1)
def bundled() -> NativeTable:
    """The table built from TorchNeuron's public source (a malformed bundled file is a neuronprobe bug)."""
    text = resources.files("neuronprobe.support").joinpath("data", "native_table.json").read_text(encoding="utf-8")
    try:
        return _table_from_doc(json.loads(text), "bundled", "support/data/native_table.json")
    except InputError as exc:
        raise InternalError(f"the bundled native table is invalid: {exc}") from None


def installed_path(environ: Mapping[str, str] | None = None) -> Path:
    """``${XDG_CACHE_HOME:-~/.cache}/neuronprobe/native-table.json``: where ``setup native-table`` writes."""
    env = os.environ if environ is None else environ
    return Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "neuronprobe" / TABLE_FILE


def read_json_table(path: Path, origin: str = "file") -> NativeTable:
    """A table in neuronprobe's own format (what ``setup native-table`` writes)."""
    from neuronprobe.files import read_input_text

    text = read_input_text(path, "native support table", cap=MAX_TABLE_BYTES)
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InputError(f"{path}: cannot read the native support table ({exc})") from None
    if not isinstance(doc, dict):
        raise InputError(f"{path}: not a native support table (a JSON object is expected)")
    return _table_from_doc(doc, origin, str(path))


@dataclass(frozen=True)
class CompatRow:
    """One row of a release's ``torch_api_compatibility.md``."""

    api: str  # torch.sort, torch.Tensor.add_, torch.nn.functional.gelu
    status: str  # Y | CPU_FALLBACK | N
    aten: tuple[str, ...]  # aten ops the row names (CPU_FALLBACK rows name the op that falls back)
    dtypes: frozenset[str]  # the dtypes that fall back, when the row names any
    note: str


def parse_compat(text: str, where: str) -> tuple[list[CompatRow], str, str]:
    """The rows, the release (``torch-neuronx 2.13.3``) and the date a release's table states."""
    rows = []
    for raw in text.splitlines():
        cells = [c.strip().strip("`") for c in raw.strip().strip("|").split("|")] if raw.lstrip().startswith("|") else []
        if len(cells) < 2 or cells[1] not in STATUSES:
            continue
        note = " | ".join(cells[2:])
        aten = tuple(a.removeprefix("aten::") for a in re.findall(r"aten::[\w.]+", note))
        dtypes = frozenset(d for d in _DTYPES if re.search(rf"\b{d}\b", note))
        rows.append(CompatRow(cells[0], cells[1], aten, dtypes, note))
    if not rows:
        raise InputError(f"{where}: no rows with a status of Y, CPU_FALLBACK or N: not a torch_api_compatibility.md table")
    version = re.search(r"torch-neuronx\s+v?(\d+(?:\.\d+)+)", text)
    dated = re.search(r"(?i)(?:generated|updated|regenerated)\D{0,20}(20\d\d-\d\d-\d\d)", text) or re.search(r"\b(20\d\d-\d\d-\d\d)\b", text)
    return rows, (f"torch-neuronx {version.group(1)}" if version else "an unnamed torch-neuronx release"), dated.group(1) if dated else ""


def _base(key: str) -> str:
    return key.split(".")[0]


def overlay_compat(base: NativeTable, text: str, where: str, mtime: date | None = None) -> NativeTable:
    """``base`` corrected by a release's compatibility table: its verdicts win where it names an op.

    ``CPU_FALLBACK`` rows name the aten op (all of its overloads when the name has none) and, when
    coverage differs by dtype, the dtypes that fall back; ``Y`` rows name a public API, whose aten
    base name then has a Neuron kernel; ``N`` rows are not supported on the device at all.
    """
    rows, release, dated = parse_compat(text, where)
    every = base.neuron_kernel | base.registered_cpu_fallback | base.composite | base.no_kernel
    kernels, fallbacks = set(base.neuron_kernel), set(base.registered_cpu_fallback)
    dtype_fallback = dict(base.dtype_fallback)
    unsupported: set[str] = set()
    named_fallback: set[str] = set()
    for row in rows:
        if row.status == "CPU_FALLBACK":
            for op in row.aten:
                keys = {k for k in every if k == op or ("." not in op and _base(k) == op)} or {op}
                for k in keys:
                    if row.dtypes:
                        dtype_fallback[k] = row.dtypes
                        kernels.add(k)
                    else:
                        named_fallback.add(k)
    for row in rows:
        name = row.api.rsplit(".", 1)[-1]
        if row.status == "Y" and "host" not in row.note.lower():
            kernels |= {k for k in base.no_kernel | base.composite | base.registered_cpu_fallback if _base(k) == name} - named_fallback
        elif row.status == "N":
            unsupported.add(name)
    kernels -= named_fallback
    fallbacks = (fallbacks | named_fallback) - kernels
    return replace(
        base,
        origin="file",
        release=release,
        dated=dated or (mtime.isoformat() if mtime else ""),
        where=where,
        neuron_kernel=frozenset(kernels),
        registered_cpu_fallback=frozenset(fallbacks),
        no_kernel=frozenset(base.no_kernel - kernels - fallbacks),
        dtype_fallback=dtype_fallback,
        unsupported=frozenset(unsupported),
        provenance=(f"{where}: {release}'s torch_api_compatibility.md ({len(rows)} rows), laid over {base.where}", *base.provenance),
    )


def read_support_table(path: Path) -> NativeTable:
    """``--support-table FILE``: a release's ``torch_api_compatibility.md``, or a table in JSON."""
    if path.suffix.lower() == ".json":
        return read_json_table(path)
    from neuronprobe.files import read_input_text

    text = read_input_text(path, "support table", cap=MAX_TABLE_BYTES)
    try:
        mtime = date.fromtimestamp(path.stat().st_mtime)
    except OSError as exc:
        raise InputError(f"{path}: cannot read the support table ({exc})") from None
    return overlay_compat(bundled(), text, str(path), mtime)


def native_table(support_table: Path | None = None, environ: Mapping[str, str] | None = None) -> NativeTable:
    """The table that answers: ``--support-table``, else the installed release's, else the bundled one."""
    if support_table is not None:
        return read_support_table(support_table)
    path = installed_path(environ)
    if path.is_file():
        return read_json_table(path, "installed")
    return bundled()
