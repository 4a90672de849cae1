"""``neuronprobe cache explain``: which planned graphs will miss the compile cache at cold start, and why (issue 37.5).

A planned deployment is a manifest (JSON): the cache key's components that neuronprobe can
know before compiling, and the graphs (vLLM Neuron bucket names)::

    {"scheme": "vllm-neuron", "model": "meta-llama/Llama-3.1-8B", "dtype": "bfloat16",
     "torch_neuronx": "2.14.0", "neuronxcc": "2.22.1", "nki": "0.6.0", "compiler_args": ["-O1"],
     "target": "trn2", "tensor_parallel_size": 8, "graphs": ["prefill_s128", "decode_b8"]}

The cache side is either the manifest written when the cache was built (then every graph is
hit or miss, with the components that differ), or the cache folder itself, read per scheme:

- ``vllm-neuron`` (``vllm-neuron/docs/design/compilation/compilation_cache.md`` "Cache Key"): a
  32-character MD5 per graph over the FX graph, input dtype/shape/stride, torch_neuronx, neuronxcc
  and NKI versions, canonical compiler args, platform target and collective replica groups;
  entries ``<root>/<hash>/``. The hash cannot be recomputed without the FX graph, so a folder
  says only how many entries it holds (an empty one: every graph misses).
- ``torchneuron`` (TorchNeuron source, ``parmoham-aws/test-repo-parmoham@98154b8``:
  ``torch_neuronx/csrc/core/cache/CacheUtils.h``, ``PersistentCacheBackend.cpp``): XXH3-128 over the
  in-memory key and the HLO bytes, files ``<root>/ab/cd/<key>.neff``: counted, as above. The
  in-memory key is a SHA-256 over the StableHLO text and the I/O shapes and dtypes
  (``neuron_dynamo_backend/utils/stablehlo_utils.py``) plus the platform target, logical cores,
  optimization level and extra compiler args (``csrc/core/KernelExecution.cpp``): no version is in
  it, a new toolchain misses only where it emits another HLO (``KEY_COMPONENTS``).
- ``xla`` (torch-neuronx on torch-xla, ``shared/research/neuron_api.md`` §2.5):
  ``<root>/neuronxcc-<version>/MODULE_<graph hash>+<flags hash>/`` with ``compile_flags.json``: the
  compiler version and the flags are readable, so a graph misses when no folder has the planned
  neuronxcc version, or none of its entries has the planned flags; otherwise the graph hash (HLO)
  decides, which is unknown here. torch-xla's own persistent cache (``runtime.initialize_cache``,
  ``XLA_PERSISTENT_CACHE_PATH``) is another folder: one file per graph named by its decimal graph
  hash, flat (measured with torch-xla 2.9 on CPU); it is recognised and counted, as above.
"""

from __future__ import annotations

import itertools
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuronprobe.errors import InputError

SCHEMES = ("vllm-neuron", "torchneuron", "xla")
COMPONENTS = ("model", "dtype", "torch_neuronx", "neuronxcc", "nki", "compiler_args", "target", "tensor_parallel_size")
# The key component a manifest field stands for, where the names differ (compilation_cache.md "Cache Key").
KEY_WORDS = {"model": " (the traced graph)", "dtype": " (input dtypes)", "tensor_parallel_size": " (collective replica groups)"}
# The manifest's components each scheme's key holds (module docstring). model, dtype and TP stand for the traced
# graph, its input dtypes and its collective replica groups: every scheme hashes the graph, so they are in all three.
# A component outside a scheme's key changes the key only if it changes the graph the key hashes: "unknown", not "miss".
KEY_COMPONENTS = {
    "vllm-neuron": COMPONENTS,  # compilation_cache.md "Cache Key": all of them
    # torch_neuronx@98154b8 compile.py compute_cache_key (StableHLO text, I/O shapes and dtypes) + KernelExecution.cpp
    # GenerateCacheKey (platform target, logical cores, optimization level, extra args); CacheUtils.h: a toolchain version
    # invalidates an entry only "causing different HLO to be generated"
    "torchneuron": ("model", "dtype", "compiler_args", "target", "tensor_parallel_size"),
    # neuron_api.md 2.5: HLO hash + flags hash, the neuronxcc version in the path; the target is one of the flags
    "xla": ("model", "dtype", "neuronxcc", "compiler_args", "target", "tensor_parallel_size"),
}
MAX_MANIFEST_BYTES = 16 * 1024 * 1024
MAX_ENTRIES = 1_000_000
_HEX32 = re.compile(r"^[0-9a-f]{32}$")


@dataclass
class GraphVerdict:
    graph: str
    verdict: str  # hit / miss / unknown
    why: list[str] = field(default_factory=list)


@dataclass
class Explanation:
    scheme: str
    cache: str
    entries: int
    graphs: list[GraphVerdict]
    source: str
    notes: list[str] = field(default_factory=list)


def _read_json(path: Path, what: str) -> dict[str, Any]:
    from neuronprobe.files import read_input_text

    text = read_input_text(path, what, cap=MAX_MANIFEST_BYTES)  # bounded: regular files only, never a hang
    try:
        data = json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        raise InputError(f"{path}: not a readable JSON {what}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: the {what} must be a JSON object")
    return data


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")  # NaN / Infinity: refused like any other malformed JSON


def read_manifest(path: Path) -> dict[str, Any]:
    """A deployment manifest; one sentence naming the field that is wrong."""
    data = _read_json(path, "manifest")
    scheme = data.get("scheme")
    if scheme not in SCHEMES:
        raise InputError(f"{path}: field 'scheme' must be one of {', '.join(SCHEMES)}")
    graphs = data.get("graphs")
    if not isinstance(graphs, list) or not graphs or not all(isinstance(g, str) and 0 < len(g) <= 200 for g in graphs):
        raise InputError(f"{path}: field 'graphs' must be a non-empty list of graph names")
    for key in COMPONENTS:
        value = data.get(key)
        if key == "tensor_parallel_size":
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1024):
                raise InputError(f"{path}: field 'tensor_parallel_size' must be a whole number between 1 and 1024")
        elif key == "compiler_args":
            if value is not None and (not isinstance(value, list) or not all(isinstance(a, str) for a in value)):
                raise InputError(f"{path}: field 'compiler_args' must be a list of strings")
        elif value is not None and not isinstance(value, str):
            raise InputError(f"{path}: field {key!r} must be a string")
    return data


def _differs(plan: dict[str, Any], cache: dict[str, Any], keys: tuple[str, ...] = COMPONENTS) -> list[str]:
    out = []
    for key in keys:
        a, b = plan.get(key), cache.get(key)
        if key == "compiler_args":
            a, b = sorted(a or []), sorted(b or [])  # canonicalized args (compilation_cache.md)
        if a != b:
            out.append(f"{key}{KEY_WORDS.get(key, '')}: planned {a!r}, cache {b!r}")
    return out


def explain(plan_path: Path, cache_path: Path) -> Explanation:
    """Per planned graph: hit, miss (with the differing key components) or unknown (module docstring)."""
    plan = read_manifest(plan_path)
    scheme = str(plan["scheme"])
    if not cache_path.exists():
        raise InputError(f"{cache_path}: no such cache folder or manifest")
    if not (cache_path.is_file() or cache_path.is_dir()):  # a FIFO or a device: neither a manifest nor a folder
        raise InputError(f"{cache_path}: --cache must be a compile cache folder or a manifest file, not a pipe or a device")
    if cache_path.is_file():
        cache = read_manifest(cache_path)
        if cache["scheme"] != scheme:
            raise InputError(f"{cache_path}: a {cache['scheme']} cache cannot serve a {scheme} deployment")
        in_key = KEY_COMPONENTS[scheme]
        common = _differs(plan, cache, in_key)
        outside = [
            f"{d} (not in the {scheme} key: a miss only if it changes the traced graph)"
            for d in _differs(plan, cache, tuple(k for k in COMPONENTS if k not in in_key))
        ]
        present = set(cache["graphs"])
        rows = []
        for g in plan["graphs"]:
            why = list(common) + ([] if g in present else ["input shapes: no graph of this bucket in the cache"])
            rows.append(GraphVerdict(g, "miss" if why else "unknown" if outside else "hit", why or outside))
        return Explanation(scheme, str(cache_path), len(present), rows, "manifest")
    if scheme == "xla":
        return _explain_xla(plan, cache_path)
    entries = _count(cache_path, scheme)
    if entries == 0:
        rows = [GraphVerdict(g, "miss", ["the cache folder holds no compiled graph"]) for g in plan["graphs"]]
    else:
        reason = f"{scheme} keys are hashes over the traced graph: {entries} entries here, none attributable without it"
        rows = [GraphVerdict(g, "unknown", [reason]) for g in plan["graphs"]]
    notes = ["write a manifest when the cache is built and pass it as the cache side for a per-component answer"]
    return Explanation(scheme, str(cache_path), entries, rows, "folder", notes)


def _count(root: Path, scheme: str) -> int:
    n = 0
    for dirpath, dirnames, filenames in os.walk(root):
        if scheme == "vllm-neuron":
            n += sum(1 for d in dirnames if _HEX32.match(d))
            dirnames[:] = []  # entries are the top level
        else:
            n += sum(1 for f in filenames if f.endswith(".neff"))
        if n > MAX_ENTRIES:
            raise InputError(f"{root}: more than {MAX_ENTRIES} cache entries; point at one model's cache")
        if len(Path(dirpath).relative_to(root).parts) > 3:
            dirnames[:] = []
    return n


def _explain_xla(plan: dict[str, Any], root: Path) -> Explanation:
    version = plan.get("neuronxcc")
    versions = sorted(p.name.removeprefix("neuronxcc-") for p in root.iterdir() if p.is_dir() and p.name.startswith("neuronxcc-"))
    if not versions:
        hashed = _torch_xla_entries(root)
        if hashed:
            reason = f"a torch-xla persistent cache (XLA_PERSISTENT_CACHE_PATH): {hashed} graph(s) keyed by their graph hash, none attributable without the traced graph"
            note = "the Neuron compile cache (NEURON_CC_FLAGS --cache_dir, default /var/tmp/neuron-compile-cache) is the folder with neuronxcc-<version>/"
            return Explanation("xla", str(root), hashed, [GraphVerdict(g, "unknown", [reason]) for g in plan["graphs"]], "folder", [note])
    entries: list[Path] = []
    for v in versions:
        entries += [p for p in (root / f"neuronxcc-{v}").iterdir() if p.is_dir() and p.name.startswith("MODULE_")]
    rows: list[GraphVerdict] = []
    if version not in versions:
        why = [f"neuronxcc: planned {version!r}, the cache holds {', '.join(versions) or 'no compiler version'}"]
        return Explanation("xla", str(root), len(entries), [GraphVerdict(g, "miss", why) for g in plan["graphs"]], "folder")
    flags_seen: set[tuple[str, ...]] = set()
    for entry in (p for p in entries if p.parent.name == f"neuronxcc-{version}"):
        f = entry / "compile_flags.json"
        if f.is_file():
            data = _read_json_list(f)
            if data is not None:
                flags_seen.add(tuple(sorted(data)))
    planned = tuple(sorted(plan.get("compiler_args") or []))
    if flags_seen and planned not in flags_seen:
        nearest = min(flags_seen, key=lambda s: len(set(s) ^ set(planned)))
        why = [f"compiler_args: planned {list(planned)}, the closest cached entry has {list(nearest)}"]
        rows = [GraphVerdict(g, "miss", why) for g in plan["graphs"]]
    else:
        rows = [GraphVerdict(g, "unknown", ["compiler version and flags match; the graph hash needs the HLO"]) for g in plan["graphs"]]
    return Explanation("xla", str(root), len(entries), rows, "folder")


def _torch_xla_entries(root: Path) -> int:
    """Files of a torch-xla persistent cache folder (flat, each named by a decimal graph hash); 0 when the folder is not one."""
    names = [p.name for p in itertools.islice(root.iterdir(), MAX_ENTRIES + 1)]
    if len(names) > MAX_ENTRIES:
        raise InputError(f"{root}: more than {MAX_ENTRIES} cache entries; point at one model's cache")
    if names and all(n.isdigit() for n in names) and all((root / n).is_file() for n in names):
        return len(names)
    return 0


def _read_json_list(path: Path) -> list[str] | None:
    """A cache entry's flag list, or None for one that is not (unreadable, a pipe, too large, not JSON): not a hang, not an error."""
    from neuronprobe.files import read_input_text

    try:
        data = json.loads(read_input_text(path, "compile_flags.json", cap=MAX_MANIFEST_BYTES))
    except (InputError, ValueError, RecursionError):
        return None
    return [str(x) for x in data] if isinstance(data, list) else None


def render_explanation(e: Explanation) -> list[str]:
    hits = sum(g.verdict == "hit" for g in e.graphs)
    misses = sum(g.verdict == "miss" for g in e.graphs)
    lines = [f"{e.scheme} cache {e.cache} ({e.source}, {e.entries} entries): {hits} hit, {misses} miss, {len(e.graphs) - hits - misses} unknown"]
    for g in e.graphs:
        lines.append(f"  {g.verdict:7} {g.graph}" + (f"  ({'; '.join(g.why)})" if g.why else ""))
    lines += [f"note: {n}" for n in e.notes]
    return lines
