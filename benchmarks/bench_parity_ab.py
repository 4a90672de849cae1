"""Parity's cost against an earlier commit's, alternated in one process (issue 35.5).

On a shared machine two bench runs minutes apart see different loads (the forward alone swung
from 0.07 to 2 s in one hour), so a ratio of ratios says little. This loads the earlier commit's
``neuronprobe/parity/{drift,emulate,metrics,run}.py`` next to this tree's (``git show REV:PATH``,
the rest of the package shared), builds GPT-2 from config once, and alternates: a plain forward,
then the parity work of one tree, for N pairs. It prints the best wall and CPU seconds of each and
asserts, pair by pair, that the two trees' tables are the same to the last bit (every module's
statistics, the output's agreement), so a speed-up that changed a number fails here.

Usage: python benchmarks/bench_parity_ab.py [--rev main] [--pairs 6] [--precisions default|hard|SPEC;SPEC]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import types
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))

import bench_parity

REPO = Path(__file__).resolve().parent.parent
PARITY = REPO / "neuronprobe" / "parity"


def _earlier(rev: str) -> tuple[types.ModuleType, types.ModuleType, types.ModuleType]:
    """The earlier commit's drift, emulate and run modules (run bound to that commit's drift, emulate and metrics)."""
    mods = {}
    for name in ("drift", "emulate", "metrics", "run"):
        source = subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:neuronprobe/parity/{name}.py"], capture_output=True, text=True, check=True).stdout
        mod = types.ModuleType(f"earlier_{name}")
        mod.__file__ = str(PARITY / f"{name}.py")  # the frame rule reads the file name: neuronprobe's own
        sys.modules[mod.__name__] = mod
        exec(compile(source, mod.__file__, "exec"), mod.__dict__)
        mods[name] = mod
    mods["run"].drift, mods["run"].emulate, mods["run"].metrics = mods["drift"], mods["emulate"], mods["metrics"]
    return mods["drift"], mods["emulate"], mods["run"]


def _precisions(name: str) -> list:
    from neuronprobe.parity.precision import parse_precision

    return bench_parity._precisions(name) if name in ("default", "hard") else [parse_precision(s) for s in name.split(";")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rev", default="main")
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--precisions", default="default")
    ns = parser.parse_args()

    import torch

    from neuronprobe.parity import drift, emulate
    from neuronprobe.parity import run as this_run

    trees = {ns.rev: _earlier(ns.rev), "this tree": (drift, emulate, this_run)}
    real, inputs, _ = bench_parity._gpt2()
    module, precisions, strip = real.module, _precisions(ns.precisions), "model."
    args, kwargs = inputs[0]

    def forward() -> tuple[float, float]:
        t, cpu = time.perf_counter(), time.process_time()
        with torch.no_grad():
            module(*args, **kwargs)
        return time.perf_counter() - t, time.process_time() - cpu

    def work(d: types.ModuleType, e: types.ModuleType, r: types.ModuleType) -> tuple[float, float, list]:
        t, cpu = time.perf_counter(), time.process_time()
        with torch.no_grad():
            refs = [d.record_reference(module, r._call(module, a, k, 0), strip=strip) for a, k in inputs]
        casts = e.WeightCasts()
        runs = [r.run_precision(module, inputs, refs, p, strip=strip, casts=casts) for p in precisions]
        tables = [(x.modules, x.output, x.first_exceeding, x.agreement) for x in runs]  # PrecisionRun.seconds left out
        return time.perf_counter() - t, time.process_time() - cpu, tables

    forward()
    forwards: list[tuple[float, float]] = []
    seconds: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
    for _ in range(ns.pairs):
        tables = []
        for name, mods in trees.items():
            forwards.append(forward())
            wall, cpu, table = work(*mods)
            seconds[name].append((wall, cpu))
            tables.append(repr(table))
        assert tables[0] == tables[1], "the two trees' drift tables differ"
    fw, fc = min(w for w, _ in forwards), min(c for _, c in forwards)
    print(f"load average {os.getloadavg()}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}, {ns.pairs} pairs, tables identical in every pair")
    print(f"forward: wall {fw:.4f} s, CPU {fc:.4f} s")
    for name, values in seconds.items():
        wall, cpu = min(w for w, _ in values), min(c for _, c in values)
        print(f"{name}: parity wall {wall:.3f} s ({wall / fw:.2f}x), CPU {cpu:.3f} s ({cpu / fc:.2f}x)")


if __name__ == "__main__":
    main()
