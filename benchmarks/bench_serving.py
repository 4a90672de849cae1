"""Benchmark vLLM Neuron serving plans (issue 37) on the Azure LLM inference traces 2023, and the planner's speed.

    python benchmarks/bench_serving.py [--data ../shared/data/azure-llm-inference-2023] [--compile-times tests/data/serving/compile_times.csv]

1. Per trace (``_conv.csv``, ``_code.csv``; read from the path given, never copied; CC-BY 4.0,
   github.com/Azure/AzurePublicDataset): vLLM Neuron's scheduler replayed with
   max_num_batched_tokens 8192, max_num_seqs 32, max_model_len 16384; padded prefill tokens,
   decode KV padding and modelled time of the plugin's default ladders against the plan at the
   same graph count, and at a compile budget (calibrated with ``--compile-times``: the fixture's
   figures are illustrative, not a measurement of a real compile).
2. Speed: 10^6 synthetic requests (lengths resampled from the conversation trace, Poisson
   arrivals at 50 requests/s), replay + plan, one core.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from neuronprobe.shape_buckets.decode_trace import read_decode_trace, trace_from_arrays  # noqa: E402
from neuronprobe.shape_buckets.serving import propose_serving_plan  # noqa: E402

ENGINE = dict(max_num_batched_tokens=8192, max_num_seqs=32, max_model_len=16384)


def _line(name: str, x) -> str:
    return (
        f"| {name} | {x.graphs} | {x.prefill_padded_tokens} | {x.prefill_overhead:.1f}% | {x.kv_overhead:.1f}% | {x.time_overhead:.1f}% | "
        f"{'-' if x.compile_seconds is None else f'{x.compile_seconds / 60:.1f}'} |"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "azure-llm-inference-2023"))
    ap.add_argument("--compile-times", default=str(Path(__file__).resolve().parents[1] / "tests" / "data" / "serving" / "compile_times.csv"))
    ap.add_argument("--budget-minutes", type=float, default=20.0)
    ap.add_argument("--requests", type=int, default=1_000_000)
    args = ap.parse_args()
    data = Path(args.data)
    print("| trace / ladders | graphs | padded prefill tokens | prefill padding | decode KV padding | modelled time over unpadded | compile min |")
    print("|---|---|---|---|---|---|---|")
    conv = None
    for name in ("conv", "code"):
        trace = read_decode_trace(data / f"AzureLLMInferenceTrace_{name}.csv")
        conv = trace if name == "conv" else conv
        t0 = time.perf_counter()
        plan = propose_serving_plan(trace, **ENGINE)
        dt = time.perf_counter() - t0
        budget = propose_serving_plan(trace, **ENGINE, max_graphs=32, compile_budget_minutes=args.budget_minutes, compile_times=args.compile_times)
        assert plan.proposed is not None and budget.proposed is not None
        print(_line(f"{name}: vllm-neuron default", budget.baselines[0]))  # the same replay; its compile minutes from the budget run
        same = budget.baselines[1] if len(budget.baselines) > 1 else plan.proposed  # choose() at the default's graphs, priced
        assert same.prefill_buckets == plan.proposed.prefill_buckets and same.batch_buckets == plan.proposed.batch_buckets
        print(_line(f"{name}: plan at the same graphs", same))
        print(_line(f"{name}: plan at {args.budget_minutes:g} compile min", budget.proposed))
        print(f"<!-- {name}: {len(trace)} requests, {plan.prefill_steps} prefill + {plan.decode_steps} decode steps, planned in {dt:.2f} s -->")
    assert conv is not None
    rng = np.random.default_rng(0)
    n = args.requests
    idx = rng.integers(0, len(conv), n)
    arrivals = np.cumsum(rng.exponential(1 / 50.0, n))
    big = trace_from_arrays(conv.prompts[idx], conv.outputs[idx], arrivals, "synthetic")
    t0 = time.perf_counter()
    plan = propose_serving_plan(big, **ENGINE)
    print(f"\nplan for {n} requests (replay + search): {time.perf_counter() - t0:.1f} s; {plan.prefill_steps} prefill + {plan.decode_steps} decode steps")


if __name__ == "__main__":
    main()
