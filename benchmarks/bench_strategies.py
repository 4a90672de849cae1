"""Benchmark the capture strategies against each other (issue 12, point 6).

The same ``hf:`` model is analysed by forcing one capture way at a time
(``capture_strategies.capture_hf(..., strategies=(way,))``): meta (weights on
the meta device), fake (the meta-built model as fake CPU tensors) and
cpu-shrunk (real CPU weights on a shrunken config). One process, the ways
alternating in every round, best of N. Budget: each fallback way costs at most
3x the meta way on the same model.

Models: GPT-2 from its config (12 layers) and a mixture-of-experts model whose
meta way works (so there is a meta time to compare with).

Usage: python benchmarks/bench_strategies.py [--repeats 3] [--moe mixtral] [--moe-set num_hidden_layers=2]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

RATIO_BUDGET = 3.0


def time_strategies(model_type: str, overrides: list[str], repeats: int) -> dict[str, object]:
    from neuronprobe.analysis import AnalyzeOptions, capture_model
    from neuronprobe.capture import strategies as cs
    from neuronprobe.loaders.resolve import HF_DEFAULT_BATCH, HF_DEFAULT_SEQ_LEN, hf_build_scope

    options = AnalyzeOptions(backend="static")

    def run(loaded):  # type: ignore[no-untyped-def]
        return capture_model(loaded, options)

    times: dict[str, list[float]] = {way: [] for way in cs.HF_STRATEGIES}
    ops: dict[str, int] = {}
    with hf_build_scope():
        for _ in range(repeats):
            for way in cs.HF_STRATEGIES:
                t = time.perf_counter()
                outcome = cs.capture_hf(model_type, overrides, HF_DEFAULT_SEQ_LEN, HF_DEFAULT_BATCH, run, strategies=(way,))
                times[way].append(time.perf_counter() - t)
                if outcome.captured is None:
                    raise SystemExit(f"hf:{model_type} did not capture with {way}: {cs.give_up_reason(outcome)}")
                ops[way] = outcome.captured.nodes
    best = {way: min(ts) for way, ts in times.items()}
    return {
        "model": f"hf:{model_type}" + "".join(f" --set {o}" for o in overrides),
        "best_s": best,
        "ratio_to_meta": {way: best[way] / best[cs.META] for way in best if way != cs.META},
        "ops": ops,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--moe", default="mixtral")
    parser.add_argument("--moe-set", action="append", default=None)
    args = parser.parse_args()
    moe_set = args.moe_set if args.moe_set is not None else ["num_hidden_layers=2"]
    results = [time_strategies("gpt2", [], args.repeats), time_strategies(args.moe, moe_set, args.repeats)]
    ok = True
    for r in results:
        ratios = r["ratio_to_meta"]
        assert isinstance(ratios, dict)
        within = all(v <= RATIO_BUDGET for v in ratios.values())
        ok = ok and within
        print(json.dumps({**r, "budget": f"each fallback <= {RATIO_BUDGET}x meta", "within_budget": within}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
