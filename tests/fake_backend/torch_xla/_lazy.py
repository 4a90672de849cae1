"""FAKE lazy execution: record ops, cut graphs at mark_step, compile each new graph once.

A graph's identity is the sequence of (op, input shapes): a new batch size or
sequence length is a new graph, as in torch-xla. Each new graph is "compiled"
through the Neuron persistent cache: an existing ``MODULE_*`` entry with
``model.done`` is a persistent-cache hit, otherwise a new entry is written.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import fake_neuron_common as common

DEFAULT_CACHE = "/var/tmp/neuron-compile-cache"
FAKE_COMPILE_NS = 1_500_000  # what a fake compile "took"

COUNTERS: dict[str, int] = {}
METRICS: dict[str, list[tuple[float, float]]] = {}
_COMPILED: set[str] = set()  # the in-process JIT cache


def device() -> Any:
    import torch

    common.recorder()
    return torch.device("cpu")


def _bump(name: str, by: int = 1) -> None:
    COUNTERS[name] = COUNTERS.get(name, 0) + by


def cache_dir() -> Path:
    """Where the Neuron persistent cache is: --cache_dir in NEURON_CC_FLAGS wins over NEURON_COMPILE_CACHE_URL."""
    flags = shlex.split(os.environ.get("NEURON_CC_FLAGS", ""))
    for i, flag in enumerate(flags):
        if flag.startswith("--cache_dir="):
            return Path(flag.split("=", 1)[1])
        if flag == "--cache_dir" and i + 1 < len(flags):
            return Path(flags[i + 1])
    return Path(os.environ.get("NEURON_COMPILE_CACHE_URL") or DEFAULT_CACHE)


def _flags_hash() -> str:
    flags = " ".join(f for f in shlex.split(os.environ.get("NEURON_CC_FLAGS", "")) if not f.startswith("--cache_dir"))
    return hashlib.md5(flags.encode()).hexdigest()[:8]


def _compile(graph_hash: str, ops: list[tuple[str, str]]) -> None:
    from neuronxcc import __version__ as cc_version

    fixture = common.fixture()
    entry = cache_dir() / f"neuronxcc-{cc_version}" / f"MODULE_{graph_hash}+{_flags_hash()}"
    if (entry / "model.done").exists():
        print(f"INFO ||NEURON_CACHE||: Using a cached neff at {entry}/model.neff. Exiting with a successfully compiled graph.", file=sys.stderr)
        return
    entry.mkdir(parents=True, exist_ok=True)
    (entry / "model.hlo_module.pb").write_text(json.dumps([op for op, _ in ops]), encoding="utf-8")
    (entry / "compile_flags.json").write_text(json.dumps(shlex.split(os.environ.get("NEURON_CC_FLAGS", ""))), encoding="utf-8")
    print(
        f"INFO ||NEURON_CC_WRAPPER||: Call compiler with cmd: neuronx-cc compile --framework=XLA "
        f"{entry}/model.hlo_module.pb --output {entry}/model.neff --target=trn1 --verbose=35",
        file=sys.stderr,
    )
    errors = [(op, common.lookup(op, fixture.get("compile_errors", {}))) for op, _ in ops]
    errors = [(op, e) for op, e in errors if e is not None]
    if errors:
        for op, error in errors:
            print(f"[{error.get('code', 'NCC_EVRF001')}] {error.get('message', op)}", file=sys.stderr)
        (entry / "model.neff").write_bytes(b"")  # a cached failed neff
        (entry / "model.done").write_text("", encoding="utf-8")
        status = int(fixture.get("compile_status", 70))
        raise RuntimeError(
            "Bad StatusOr access: INTERNAL: RunNeuronCCImpl: error condition error != 0: "
            f"<class 'subprocess.CalledProcessError'>: Command '['neuronx-cc', 'compile', '{entry}/model.hlo_module.pb']' "
            f"returned non-zero exit status {status}."
        )
    (entry / "model.neff").write_bytes(b"FAKE-NEFF\n")
    (entry / "model.done").write_text("", encoding="utf-8")
    print("INFO ||NEURON_CC_WRAPPER||: Compiler status PASS", file=sys.stderr)


def mark_step() -> None:
    ops = common.recorder().take()
    _bump("MarkStep")
    if not ops:
        return
    if common.hangs("run"):
        common.hang_forever()
    fixture = common.fixture()
    device_ops = []
    for op, signature in ops:
        if common.lookup(op, fixture.get("fallback_ops", [])):
            _bump(op)  # torch-xla's fallback counter: the dispatcher name, aten::<op>[.<overload>]
        else:
            _bump("xla::" + re.sub(r"^aten::", "", op).split(".")[0])
            device_ops.append((op, signature))
    graph_hash = hashlib.sha256(json.dumps(device_ops).encode()).hexdigest()[:20]
    if graph_hash in _COMPILED:
        _bump("CachedCompile")
    else:
        _bump("UncachedCompile")
        METRICS.setdefault("CompileTime", []).append((time.time(), float(FAKE_COMPILE_NS)))
        _compile(graph_hash, device_ops)
        _COMPILED.add(graph_hash)
    _bump("ExecuteComputation")
