"""Benchmark the core analysis against its budgets (issue: core analysis).

1. GPT-2 (12 layers, from config): ``neuronprobe.analyze`` costs at most 2x a
   bare non-strict ``torch.export.export`` of the same model, measured in the
   same process, alternating, best of N.
2. A Llama config of ~7B parameters (transformers' LlamaConfig defaults) is
   analysed in at most 15 s with at most 3 GB peak RSS, in a fresh process.

Usage: python benchmarks/bench_analyze.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

RATIO_BUDGET = 2.0
LLAMA_SECONDS_BUDGET = 15.0
LLAMA_RSS_BUDGET_GB = 3.0


def gpt2_ratio(repeats: int) -> dict[str, float]:
    import torch

    import neuronprobe
    from neuronprobe.loaders.resolve import load_model

    loaded = load_model("hf:gpt2")
    export_times, analyze_times = [], []
    for _ in range(repeats):
        t = time.perf_counter()
        torch.export.export(loaded.module, loaded.args, loaded.kwargs, strict=False)
        export_times.append(time.perf_counter() - t)
        t = time.perf_counter()
        neuronprobe.analyze(loaded.module, loaded.kwargs, backend="static", name="gpt2")
        analyze_times.append(time.perf_counter() - t)
    best_export, best_analyze = min(export_times), min(analyze_times)
    return {"export_s": best_export, "analyze_s": best_analyze, "ratio": best_analyze / best_export}


def llama_7b() -> dict[str, float]:
    code = (
        "import time, resource, os\n"
        "os.environ.setdefault('HF_HUB_OFFLINE', '1')\n"
        "t = time.perf_counter()\n"
        "import neuronprobe\n"
        "from neuronprobe.analysis import AnalyzeOptions, analyze_spec\n"
        "from neuronprobe.loaders.resolve import build_hf_config\n"
        "cfg = build_hf_config('llama', [])\n"
        "params = cfg.vocab_size * cfg.hidden_size * 2 + cfg.num_hidden_layers * (4 * cfg.hidden_size**2 + 3 * cfg.hidden_size * cfg.intermediate_size)\n"
        "r = analyze_spec('hf:llama', AnalyzeOptions(backend='static'))\n"
        "dt = time.perf_counter() - t\n"
        "print(dt, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, params, r.summary.ops_total, r.summary.support_percentage)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    seconds, rss_kib, params, ops, support = out.stdout.split()
    return {
        "seconds": float(seconds),
        "peak_rss_gb": int(rss_kib) / 1024 / 1024,
        "params_b": int(params) / 1e9,
        "ops": int(ops),
        "support": float(support),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    ratio = gpt2_ratio(args.repeats)
    llama = llama_7b()
    print(f"GPT-2 (12 layers): bare export {ratio['export_s']:.2f} s, analyze {ratio['analyze_s']:.2f} s, ratio {ratio['ratio']:.2f}x (budget {RATIO_BUDGET}x)")
    print(
        f"Llama {llama['params_b']:.1f}B config: {llama['seconds']:.1f} s end to end (budget {LLAMA_SECONDS_BUDGET} s), "
        f"peak RSS {llama['peak_rss_gb']:.2f} GB (budget {LLAMA_RSS_BUDGET_GB} GB), {llama['ops']} op calls, "
        f"support {llama['support']}%"
    )
    print(json.dumps({"gpt2": ratio, "llama7b": llama}))
    ok = ratio["ratio"] <= RATIO_BUDGET and llama["seconds"] <= LLAMA_SECONDS_BUDGET and llama["peak_rss_gb"] <= LLAMA_RSS_BUDGET_GB
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
