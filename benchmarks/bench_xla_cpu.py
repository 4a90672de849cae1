"""Benchmark the xla-cpu backend (issue 10).

1. GPT-2 (12 layers, from config, ``hf:gpt2``) analysed end to end with
   ``--backend xla-cpu`` (capture + static classification + the torch-xla 2.9
   worker: import, build, one observed forward on the XLA CPU device, HLO checks),
   budget 60 s on a 2-core machine; and its ratio to ``--backend static`` on the
   same model, measured in the same process, alternating, best of N.
2. The environment's first-time set-up time: read from the marker that
   ``neuronprobe setup xla-cpu`` wrote (it times venv + pip install + the import check).

Needs the environment: ``neuronprobe setup xla-cpu`` (or NEURONPROBE_XLA_PYTHON).
Usage: python benchmarks/bench_xla_cpu.py [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

XLA_SECONDS_BUDGET = 60.0


def gpt2(repeats: int) -> dict[str, float | int | str]:
    from neuronprobe.analysis import AnalyzeOptions, analyze_spec

    static_times, xla_times = [], []
    report = None
    for _ in range(repeats):
        t = time.perf_counter()
        analyze_spec("hf:gpt2", AnalyzeOptions(backend="static"))
        static_times.append(time.perf_counter() - t)
        t = time.perf_counter()
        report = analyze_spec("hf:gpt2", AnalyzeOptions(backend="xla-cpu"))
        xla_times.append(time.perf_counter() - t)
    assert report is not None
    static_s, xla_s = min(static_times), min(xla_times)
    observed = [f for f in report.findings if f.origin == "observed"]
    return {
        "static_s": round(static_s, 2),
        "xla_cpu_s": round(xla_s, 2),
        "ratio": round(xla_s / static_s, 1),
        "observe_step": report.backend.steps.get("observe", ""),
        "observed_findings": len(observed),
        "ops": report.summary.ops_total,
    }


def setup_seconds() -> float | None:
    from neuronprobe.backends.xla_env import find_env

    return find_env().setup_seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    result = {"gpt2": gpt2(args.repeats), "first_setup_s": setup_seconds()}
    print(json.dumps(result, indent=2))
    xla_s = float(result["gpt2"]["xla_cpu_s"])
    verdict = "within" if xla_s <= XLA_SECONDS_BUDGET else "OVER"
    print(
        f"GPT-2 through xla-cpu: {xla_s:.1f} s ({verdict} the {XLA_SECONDS_BUDGET:g} s budget), "
        f"{result['gpt2']['ratio']}x the static backend ({result['gpt2']['static_s']} s)"
    )


if __name__ == "__main__":
    main()
