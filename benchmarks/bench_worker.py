"""Benchmark: what the killable analysis worker adds to `neuronprobe analyze hf:gpt2` (issue 16).

Budget: the worker adds at most max(1 s, 15%) to the analysis of GPT-2 compared
with the same analysis in-process. Both sides run as the command runs them: a
fresh interpreter that has not imported torch, which either analyses in its own
process or forks the worker (which imports torch, analyses, and sends the Report
back as JSON; the parent rebuilds the Report and serialises it again). Runs
alternate, in one benchmark process, best of N each.

Usage: python benchmarks/bench_worker.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

ABSOLUTE_BUDGET_S = 1.0
RELATIVE_BUDGET = 0.15

_COMMON = (
    "import json, time\nt = time.perf_counter()\nfrom neuronprobe.analysis import AnalyzeOptions, analyze_spec\noptions = AnalyzeOptions(backend='static')\n"
)
IN_PROCESS = _COMMON + ("text = analyze_spec('hf:gpt2', options).to_json()\nprint(json.dumps({'seconds': time.perf_counter() - t, 'bytes': len(text)}))\n")
WORKER = _COMMON + (
    "from neuronprobe.process.worker import WorkerLimits, analyze_in_worker\n"
    "report = analyze_in_worker('hf:gpt2', lambda: analyze_spec('hf:gpt2', options), WorkerLimits())\n"
    "text = report.to_json()\n"
    "print(json.dumps({'seconds': time.perf_counter() - t, 'bytes': len(text)}))\n"
)


def _run(code: str) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=600)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    inside, worker = [], []
    for _ in range(args.repeats):
        inside.append(_run(IN_PROCESS))
        worker.append(_run(WORKER))
    best_in = min(r["seconds"] for r in inside)
    best_worker = min(r["seconds"] for r in worker)
    median_in = statistics.median(r["seconds"] for r in inside)
    median_worker = statistics.median(r["seconds"] for r in worker)
    added = best_worker - best_in
    budget = max(ABSOLUTE_BUDGET_S, RELATIVE_BUDGET * best_in)
    result = {
        "in_process_s": round(best_in, 3),
        "worker_s": round(best_worker, 3),
        "added_s": round(added, 3),
        "added_pct": round(100 * added / best_in, 1),
        "median_in_process_s": round(median_in, 3),
        "median_worker_s": round(median_worker, 3),
        "budget_s": round(budget, 3),
        "report_bytes": worker[0]["bytes"],
        "repeats": args.repeats,
        "cpus": os.cpu_count(),
    }
    print(json.dumps(result, indent=2))
    ok = added <= budget
    print(f"worker overhead {added:+.2f} s ({result['added_pct']:+.1f}%), budget {budget:.2f} s: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
