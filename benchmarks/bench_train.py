"""Benchmark ``--train`` against its budgets (issue 13: the whole training step).

1. GPT-2 (12 layers, from config): ``analyze --train`` costs at most 3x the
   forward-only analysis of the same model, measured in the same process,
   alternating, best of N (both load the model from its config the same way).
2. A Llama config of ~7B parameters (transformers' LlamaConfig defaults) with
   ``--train`` is analysed in at most 45 s with at most 4 GB peak RSS in a fresh
   process, imports included: the training step runs on fake tensors, so no
   weight, gradient or optimizer state is allocated.

Usage: python benchmarks/bench_train.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

RATIO_BUDGET = 3.0
LLAMA_SECONDS_BUDGET = 45.0
LLAMA_RSS_BUDGET_GB = 4.0


def gpt2_ratio(repeats: int) -> dict[str, float]:
    from neuronprobe.analysis import AnalyzeOptions, analyze_spec
    from neuronprobe.training import TrainOptions

    forward_times, train_times = [], []
    analyze_spec("hf:gpt2", AnalyzeOptions(backend="static"))  # warm-up: imports and first-call caches
    for _ in range(repeats):
        t = time.perf_counter()
        analyze_spec("hf:gpt2", AnalyzeOptions(backend="static"))
        forward_times.append(time.perf_counter() - t)
        t = time.perf_counter()
        report = analyze_spec("hf:gpt2", AnalyzeOptions(backend="static", train=TrainOptions()))
        train_times.append(time.perf_counter() - t)
    assert report.train is not None and not report.findings
    best_forward, best_train = min(forward_times), min(train_times)
    return {"forward_s": best_forward, "train_s": best_train, "ratio": best_train / best_forward, "ops": report.summary.ops_total}


def llama_7b() -> dict[str, float]:
    code = (
        "import time, resource, os\n"
        "os.environ.setdefault('HF_HUB_OFFLINE', '1')\n"
        "t = time.perf_counter()\n"
        "from neuronprobe.analysis import AnalyzeOptions, analyze_spec\n"
        "from neuronprobe.loaders.resolve import build_hf_config\n"
        "from neuronprobe.training import TrainOptions\n"
        "cfg = build_hf_config('llama', [])\n"
        "params = cfg.vocab_size * cfg.hidden_size * 2 + cfg.num_hidden_layers * (4 * cfg.hidden_size**2 + 3 * cfg.hidden_size * cfg.intermediate_size)\n"
        "r = analyze_spec('hf:llama', AnalyzeOptions(backend='static', train=TrainOptions()))\n"
        "dt = time.perf_counter() - t\n"
        "p = r.summary.phases\n"
        "print(dt, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, params, r.summary.ops_total, len(r.findings), "
        "p['backward'].ops_total, p['optimizer'].ops_total)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    seconds, rss_kib, params, ops, findings, backward, optimizer = out.stdout.split()
    return {
        "seconds": float(seconds),
        "peak_rss_gb": int(rss_kib) / 1024 / 1024,
        "params_b": int(params) / 1e9,
        "ops": int(ops),
        "findings": int(findings),
        "backward_ops": int(backward),
        "optimizer_ops": int(optimizer),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    ratio = gpt2_ratio(args.repeats)
    llama = llama_7b()
    print(
        f"GPT-2 (12 layers): forward-only analyze {ratio['forward_s']:.2f} s, --train {ratio['train_s']:.2f} s, "
        f"ratio {ratio['ratio']:.2f}x (budget {RATIO_BUDGET}x), {ratio['ops']} op calls"
    )
    print(
        f"Llama {llama['params_b']:.1f}B config --train: {llama['seconds']:.1f} s end to end (budget {LLAMA_SECONDS_BUDGET} s), "
        f"peak RSS {llama['peak_rss_gb']:.2f} GB (budget {LLAMA_RSS_BUDGET_GB} GB), {llama['ops']} op calls "
        f"({llama['backward_ops']} backward, {llama['optimizer_ops']} optimizer), {llama['findings']} findings"
    )
    print(json.dumps({"gpt2": ratio, "llama7b": llama}))
    ok = ratio["ratio"] <= RATIO_BUDGET and llama["seconds"] <= LLAMA_SECONDS_BUDGET and llama["peak_rss_gb"] <= LLAMA_RSS_BUDGET_GB
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
