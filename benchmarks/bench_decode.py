"""Benchmark decode (token-generation) buckets on real traffic, and their speed.

    python benchmarks/bench_decode.py [TRACE.csv ...] [--model hf:llama] [--target trn1] [--output FILE.md]

1. Decode overhead on each trace (e.g. the Azure LLM inference traces 2023, ``_conv.csv`` /
   ``_code.csv``; columns ContextTokens, GeneratedTokens, TIMESTAMP), NxD Inference's strict
   fit, batch 1: padded KV reads and modelled step time of NxD Inference's default ladder
   against the exact ladder with as many graphs, and at k = 4, 8, 16; held-out: fitted on the
   first half of the hour (time order), scored on the second half.
2. Continuous batching: the trace replayed at ``--max-batch`` with ``--tokens-per-second``,
   the joint batch x sequence plan within ``--max-graphs`` against the default ladder without
   batch buckets; the replay's wall time.
3. Speed: 10^6 synthetic requests end to end (CSV file read + propose, batch 1, K = 16), one
   core. Goal: <= 2 s. The replay of the one-hour trace: goal <= 5 s.
4. The joint plan's gap to brute force on small random inputs (the heuristic case).

The step model is bytes per core per step (weights once + KV per token) of ``--model`` at the
smallest TP degree that fits on ``--target``: decode at batch 1 is bound by reading the weights.
The Azure traces are CC-BY 4.0 (github.com/Azure/AzurePublicDataset); they are read from the
path given and never copied into this repository.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse  # noqa: E402
import itertools  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from neuronprobe.shape_buckets.decode import propose_decode_buckets  # noqa: E402
from neuronprobe.shape_buckets.decode_rules import RULES  # noqa: E402
from neuronprobe.shape_buckets.decode_trace import read_decode_trace  # noqa: E402
from neuronprobe.shape_buckets.schedule import plan_batches, plan_cost, replay  # noqa: E402
from neuronprobe.vocabulary import ServingRuntime  # noqa: E402

ATTRIBUTION = (
    "Azure LLM inference trace 2023 (CC-BY 4.0, github.com/Azure/AzurePublicDataset); "
    'Patel et al., "Splitwise: Efficient Generative LLM Inference Using Phase Splitting", ISCA 2024.'
)
SPEED_GOAL_S = 2.0
REPLAY_GOAL_S = 5.0


def _pin_one_core() -> str:
    if hasattr(os, "sched_setaffinity"):
        cpu = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpu})
        return f"pinned to CPU {cpu}"
    return "not pinned"


def _pct(x: float | None) -> str:
    return "" if x is None else f"{x:.1f}%"


def bench_trace(path: Path, model: str | None, target: str, max_batch: int, tps: float, max_graphs: int) -> list[str]:
    trace = read_decode_trace(path)
    name = path.stem.replace("AzureLLMInferenceTrace_", "")
    p = propose_decode_buckets(trace, 16, model=model, target=target)
    default = p.baselines[0]
    g = default.graphs
    by_k = {c.graphs: c for c in p.curve}
    held = propose_decode_buckets(trace, g, model=model, target=target, holdout=0.5)
    hp, hd = held.holdout.ladders["proposed"], held.holdout.ladders[default.name]
    same = by_k[g]
    ratio = default.kv_overhead / same.kv_overhead if same.kv_overhead else float("inf")
    rows = [
        f"| {name} | {len(trace):,} | {p.decode_steps:,} | {p.max_len:,} | {g} | {_pct(default.kv_overhead)} / {_pct(default.step_overhead)} "
        f"| {_pct(same.kv_overhead)} / {_pct(same.step_overhead)} | {ratio:.1f}x | "
        + " | ".join(f"{_pct(by_k[k].kv_overhead)} / {_pct(by_k[k].step_overhead)}" for k in (4, 8, 16))
        + f" | {_pct(hd.kv_overhead)} | {_pct(hp.kv_overhead)} |"
    ]
    start = time.perf_counter()
    cb = propose_decode_buckets(trace, g, model=model, target=target, max_batch=max_batch, tokens_per_second=tps, max_graphs=max_graphs)
    cb_s = time.perf_counter() - start
    start = time.perf_counter()
    assert trace.arrivals is not None
    replay(trace.prompts, trace.outputs, trace.arrivals, max_batch, 0, step_seconds=1.0 / tps)
    replay_s = time.perf_counter() - start
    same_g = propose_decode_buckets(trace, g, model=model, target=target, max_batch=max_batch, tokens_per_second=tps, max_graphs=g).batch_plan
    assert same_g is not None
    same_g.name = f"proposed within {g} graphs (the default's count)"
    plans = [cb.batch_plan, same_g, *cb.batch_baselines]
    cb_rows = [
        f"| {name} | {pl.name} | {pl.batch_buckets} | {len(pl.seq_buckets)} | {pl.graphs} | {_pct(pl.kv_overhead)} | {_pct(pl.step_overhead)} | {pl.method} |"
        for pl in plans
        if pl is not None
    ]
    held_cb = propose_decode_buckets(trace, g, model=model, target=target, max_batch=max_batch, tokens_per_second=tps, max_graphs=max_graphs, holdout=0.5)
    assert held_cb.holdout is not None
    for plan_name, sc in held_cb.holdout.batch_plans.items():
        cb_rows.append(f"| {name} | held out: {plan_name} (fitted on the first half hour) | | | | {_pct(sc.kv_overhead)} | {_pct(sc.step_overhead)} | |")
    t = cb.timeline
    assert t is not None
    cb_rows.append(
        f"| {name} | replay: {t.steps:,} steps, mean batch {t.mean_batch:.2f}, {t.duration_s:,.0f} s simulated | replay {replay_s:.2f} s "
        f"(goal {REPLAY_GOAL_S:.0f} s) | whole propose with replay and plan {cb_s:.2f} s | | | | |"
    )
    mem = p.memory
    mem_line = ""
    if mem is not None:
        mem_line = f"  memory ({model}, {target}, bucket {mem.bucket} x batch {mem.batch}): smallest TP {mem.smallest_tp}; step model: {p.step_model}"
    detail = f"  {name}: proposed at {g} graphs {same.edges}; NxDI default {default.edges}"
    return [*rows, "@@", *cb_rows, "@@", detail + ("\n" + mem_line if mem_line else "")]


def bench_speed(n: int, repeat: int) -> list[str]:
    rng = np.random.default_rng(0)
    prompts = np.clip(np.round(rng.lognormal(6.5, 1.0, n)), 1, 32768).astype(np.int64)
    outputs = np.clip(np.round(rng.lognormal(4.5, 1.2, n)), 1, 8192).astype(np.int64)
    stamps = np.cumsum(rng.exponential(3600 / n, n))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.csv"
        with path.open("w", encoding="utf-8") as fh:
            fh.write("time,ContextTokens,GeneratedTokens\n")
            fh.writelines(f"{t:.4f},{p},{o}\n" for t, p, o in zip(stamps.tolist(), prompts.tolist(), outputs.tolist(), strict=True))
        times, cpu = [], []
        for _ in range(repeat):
            start, start_cpu = time.perf_counter(), time.process_time()
            proposal = propose_decode_buckets(read_decode_trace(path), 16)
            times.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
    return [
        f"| requests | decode steps | distinct lengths | K | wall, best of {repeat} (s) | CPU, best of {repeat} (s) | goal (s) |",
        "|---|---|---|---|---|---|---|",
        f"| {n:,} (CSV file, read + propose) | {proposal.decode_steps:,} | {proposal.distinct_positions:,} | 16 | {min(times):.2f} "
        f"| {min(cpu):.2f} | {SPEED_GOAL_S:.0f} |",
        "",
        f"Load average while measuring: {os.getloadavg()[0]:.1f} (a 2-core machine shared with other jobs: wall time includes waiting).",
    ]


def bench_gap(cases: int, seed: int) -> list[str]:
    rule = RULES[ServingRuntime.NXDI]
    rng = np.random.default_rng(seed)
    gaps = []
    for _ in range(cases):
        max_batch, top, budget = int(rng.integers(2, 5)), 14, int(rng.integers(2, 8))
        n = int(rng.integers(4, 12))
        nb = rng.integers(1, max_batch + 1, n)
        nl = rng.integers(1, top + 1, n)
        nb[0], nl[0] = max_batch, top
        w = rng.integers(1, 9, n)
        plan = plan_batches(nb, nl, w, rule, max_batch, top, budget)
        best = None
        for r in range(max_batch):
            for combo in itertools.combinations(range(1, max_batch), r):
                bl = [*combo, max_batch]
                for s in range(budget // len(bl)):
                    for sc in itertools.combinations(range(1, top), s):
                        cost = plan_cost(nb, nl, w, bl, [*sc, top], rule)
                        best = cost if best is None else min(best, cost)
        assert best is not None
        gaps.append(plan.padded / best - 1)
    g = np.asarray(gaps)
    return [
        f"{cases} random instances (batch <= 4, lengths <= 14, budget 2-7 graphs, NxDI rules): the heuristic is optimal in "
        f"{100 * np.mean(g == 0):.0f}% of them; mean gap {100 * g.mean():.2f}%, worst {100 * g.max():.2f}%."
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("traces", nargs="*", type=Path)
    parser.add_argument("--model", default="hf:llama", help="config for the step model and memory fit (default: LlamaConfig's 7B defaults)")
    parser.add_argument("--target", default="trn1")
    parser.add_argument("--max-batch", type=int, default=32)
    parser.add_argument("--tokens-per-second", type=float, default=40.0)
    parser.add_argument("--max-graphs", type=int, default=16)
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--gap-cases", type=int, default=200)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    pin = _pin_one_core()
    lines = [
        "## Decode buckets: speed (one process, one core)",
        "",
        f"{platform.processor() or platform.machine()}, Python {platform.python_version()}, numpy {np.__version__}; {pin}.",
        "",
        *bench_speed(args.n, args.repeat),
    ]
    if args.traces:
        head = [
            "",
            "## Decode overhead at batch 1, NxD Inference strict fit",
            "",
            "Each cell: padded KV reads / modelled step time, over the real lengths. Step model: bytes per core per step "
            f"of {args.model} on {args.target} at the smallest TP that fits. Held-out: fitted on the first half hour, scored on the second.",
            "",
            "| trace | requests | decode steps | max | graphs | NxDI default | exact, same graphs | less overhead | exact k=4 | exact k=8 | exact k=16 "
            "| held-out default | held-out exact |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        cb_head = [
            "",
            f"## Continuous batching: replay at max batch {args.max_batch}, {args.tokens_per_second:g} steps/s, budget {args.max_graphs} graphs",
            "",
            "| trace | plan | batch buckets | seq buckets | graphs | padded KV | step time | method |",
            "|---|---|---|---|---|---|---|---|",
        ]
        rows, cb_rows, details = [], [], []
        for path in args.traces:
            out = bench_trace(path, args.model, args.target, args.max_batch, args.tokens_per_second, args.max_graphs)
            i, j = out.index("@@"), len(out) - 1 - out[::-1].index("@@")
            rows += out[:i]
            cb_rows += out[i + 1 : j]
            details += out[j + 1 :]
        lines += head + rows + ["", *details] + cb_head + cb_rows
    lines += ["", "## Joint batch x sequence plan against brute force", "", *bench_gap(args.gap_cases, 11)]
    if args.traces:
        lines += ["", f"Data: {ATTRIBUTION}"]
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if args.output:
        args.output.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
