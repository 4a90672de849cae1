"""Benchmark numerical parity (issue 25, point 8) against its budgets.

1. GPT-2 from config (12 layers, real random weights, batch 1 x 32 tokens): the parity work, the fp32
   reference with its per-module hooks plus three emulated precisions each compared module by module
   (and the dominant-op pass where a module exceeds the tolerance), costs at most 4x one fp32 forward
   with no hooks, measured in the same process, alternating, best of N. Building the model is not
   part of either side (it is reported on its own).
2. Memory: the peak resident memory the parity work adds over the loaded model stays within 2x the
   model's fp32 weights (a fresh process; ``ru_maxrss`` after the parity minus the RSS before it).
3. A Llama config with 7B dimensions (transformers' LlamaConfig defaults): what parity does with it
   (builds it shrunken to run with real weights on the CPU, and says so) and how long it takes.

Precisions (``--precisions``): ``default`` is ``neuronprobe parity``'s default set (the pre-2.27 compiler
default, bf16 served, the 2.27+ default); ``hard`` is three that each change the numbers
(matmult/bf16, bf16 served, all/fp8_e4m3).

Usage: python benchmarks/bench_parity.py [--repeats 3] [--precisions default|hard] [--skip-llama]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

RATIO_BUDGET = 4.0
MEMORY_BUDGET = 2.0  # x the model's fp32 weights


def _precisions(name: str) -> list:
    from neuronprobe.parity.precision import DEFAULT_PRECISIONS, parse_precision

    if name == "default":
        return list(DEFAULT_PRECISIONS)
    return [parse_precision(s) for s in ("matmult:bf16", "none,dtype=bf16", "all:fp8_e4m3")]


def _gpt2() -> tuple:
    import torch

    from neuronprobe.loaders.resolve import load_model
    from neuronprobe.parity.run import parity_inputs, real_weights

    torch.manual_seed(0)
    t = time.perf_counter()
    real = real_weights(load_model("hf:gpt2"), 0)
    real.module.eval()
    build = time.perf_counter() - t
    inputs, _ = parity_inputs(real)
    return real, inputs, build


def _parity_work(module, inputs, precisions) -> tuple[float, list]:
    """What run_parity_full does once the model is built: the reference, then each precision (wall seconds, runs)."""
    seconds, _, runs = _parity_work_timed(module, inputs, precisions)
    return seconds, runs


def _parity_work_timed(module, inputs, precisions) -> tuple[float, float, list]:
    """:func:`_parity_work` with the process's CPU seconds too (every thread): on a shared machine the CPU time
    is what the work costs, the wall time also counts the waits for a core."""
    import torch

    from neuronprobe.parity import drift, emulate
    from neuronprobe.parity.run import _call, run_precision

    strip = "model."  # hf:'s wrapper, as run_parity_full strips it
    t, cpu = time.perf_counter(), time.process_time()
    with torch.no_grad():
        refs = [drift.record_reference(module, _call(module, a, k, 0), strip=strip) for a, k in inputs]
    casts = emulate.WeightCasts()  # shared by the precisions, as run_parity_full shares them
    runs = [run_precision(module, inputs, refs, p, strip=strip, casts=casts) for p in precisions]
    return time.perf_counter() - t, time.process_time() - cpu, runs


def gpt2_ratio(repeats: int, precisions_name: str) -> dict:
    import torch

    real, inputs, build = _gpt2()
    module = real.module
    precisions = _precisions(precisions_name)
    args, kwargs = inputs[0]
    forwards, parities, forwards_cpu, parities_cpu = [], [], [], []
    runs: list = []
    with torch.no_grad():
        module(*args, **kwargs)  # warm-up
    for _ in range(repeats):
        with torch.no_grad():
            t, cpu = time.perf_counter(), time.process_time()
            module(*args, **kwargs)
            forwards.append(time.perf_counter() - t)
            forwards_cpu.append(time.process_time() - cpu)
        seconds, cpu_seconds, runs = _parity_work_timed(module, inputs, precisions)
        parities.append(seconds)
        parities_cpu.append(cpu_seconds)
    best_forward, best_parity = min(forwards), min(parities)
    return {
        "build_s": round(build, 2),
        "forward_s": round(best_forward, 4),
        "parity_s": round(best_parity, 3),
        "ratio": round(best_parity / best_forward, 2),
        "forward_cpu_s": round(min(forwards_cpu), 4),
        "parity_cpu_s": round(min(parities_cpu), 3),
        "cpu_ratio": round(min(parities_cpu) / min(forwards_cpu), 2),
        "modules": len(runs[0].modules),
        "per_precision": {
            r.precision.label: {
                "seconds": r.seconds,
                "output_rel": r.output.rel if r.output else None,
                "first_exceeding": r.first_exceeding.module if r.first_exceeding else None,
                "dominant_op": r.first_exceeding.dominant_op if r.first_exceeding else None,
                "top1_same": f"{r.agreement.top1_same}/{r.agreement.rows}" if r.agreement else None,
                "greedy_divergence": r.agreement.greedy_divergence if r.agreement else None,
            }
            for r in runs
        },
    }


_MEMORY_CHILD = """
import json, os, sys, threading, time
os.environ.setdefault('HF_HUB_OFFLINE', '1')
sys.path.insert(0, {bench!r})
import bench_parity as b
real, inputs, _ = b._gpt2()
import torch
with torch.no_grad():
    real.module(*inputs[0][0], **inputs[0][1])
def rss():
    with open('/proc/self/statm') as fh:
        return int(fh.read().split()[1]) * os.sysconf('SC_PAGE_SIZE')
before = rss()
peak = [before]
done = threading.Event()
def sample():
    while not done.is_set():
        peak[0] = max(peak[0], rss())
        time.sleep(0.005)
thread = threading.Thread(target=sample, daemon=True)
thread.start()
b._parity_work(real.module, inputs, b._precisions({name!r}))
done.set()
thread.join()
peak[0] = max(peak[0], rss())
weights = sum(p.numel() * 4 for p in real.module.parameters())
print(json.dumps({{"weights": weights, "rss_before": before, "peak": peak[0]}}))
"""


def gpt2_memory(precisions_name: str) -> dict:
    """In a fresh process: the peak RSS (sampled every 5 ms) the parity work adds over the model once loaded and run once."""
    code = _MEMORY_CHILD.format(bench=os.path.dirname(os.path.abspath(__file__)), name=precisions_name)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=3600, check=True)
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    added = data["peak"] - data["rss_before"]
    return {
        "weights_mb": round(data["weights"] / 2**20, 1),
        "rss_before_mb": round(data["rss_before"] / 2**20, 1),
        "peak_mb": round(data["peak"] / 2**20, 1),
        "added_mb": round(added / 2**20, 1),
        "added_over_weights": round(added / data["weights"], 2),
    }


def llama_7b() -> dict:
    """``neuronprobe parity hf:llama`` as the library runs it, in a fresh process: what it builds and how long it takes."""
    code = (
        "import json, os, resource, time\n"
        "os.environ.setdefault('HF_HUB_OFFLINE', '1')\n"
        "t = time.perf_counter()\n"
        "from neuronprobe.parity.run import ParityOptions, parity_for_spec\n"
        "r = parity_for_spec('hf:llama', ParityOptions())\n"
        "s = r.section\n"
        "print(json.dumps({'seconds': time.perf_counter() - t, 'shrunk': s.shrunk, 'max_rss_mb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,"
        " 'weights_mb': sum(p.numel() * 4 for p in r.loaded.module.parameters()) / 2**20, 'modules': len(s.runs[0].modules),"
        " 'runs': {x.precision.label: x.output.rel for x in s.runs if x.output}}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=3600, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--precisions", choices=("default", "hard"), default="hard")
    parser.add_argument("--skip-llama", action="store_true")
    parser.add_argument("--skip-memory", action="store_true")
    ns = parser.parse_args()
    results: dict = {"precisions": ns.precisions, "gpt2": gpt2_ratio(ns.repeats, ns.precisions)}
    if not ns.skip_memory:
        results["memory"] = gpt2_memory(ns.precisions)
    if not ns.skip_llama:
        results["llama_7b"] = llama_7b()
    print(json.dumps(results, indent=2))
    ok = results["gpt2"]["ratio"] <= RATIO_BUDGET
    if "memory" in results:
        ok = ok and results["memory"]["added_over_weights"] <= MEMORY_BUDGET
    print(
        f"ratio {results['gpt2']['ratio']}x (budget {RATIO_BUDGET}x)"
        + (f", memory {results['memory']['added_over_weights']}x weights (budget {MEMORY_BUDGET}x)" if "memory" in results else "")
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
