"""The vLLM Neuron plan's gap to brute force (issue 37.2): exact where the problem separates, measured where it does not.

    python benchmarks/bench_serving_gap.py

The prefill ladder is an exact 1-D solve and the decode (batch x context) ladders come from
alternating exact solves (``schedule.plan_batches``), so only the decode side can miss the optimum.
Two scans of small replays, each plan compared with the best of every valid ladder set within the
same graph budget (graphs counted as the runtime compiles them: EAGLE3 families, the
``max_model_len`` fallback, prefill buckets divisible by and larger than the TP degree under
sequence parallelism), on the same modelled time (score()'s formula, unrounded):

A. max_num_seqs 4, max_model_len 512, 40 requests: every (prefill, batch, context) ladder set
   enumerated; budgets 3-14; plain, EAGLE3 (2 speculative tokens), TP 8 sequence-parallel; 8 seeds.
B. max_num_seqs 8, max_model_len 1024, 120 requests: prefill and decode costs add and only the
   graph count couples them, so the optimum is min over k of (best k-bucket prefill ladder) + (best
   decode ladder set in the graphs left), the decode side enumerated over every batch and context
   ladder; budgets 4-26; plain and EAGLE3; 6 seeds.
C. As B with max_num_seqs 16, max_model_len 512, 300 requests (more distinct batch sizes, the
   alternation's hard side): batch ladders over the observed batch sizes; budgets 4-32; 6 seeds.

Prints every case whose gap is not 0 and a summary line per scan. A negative gap would mean the
enumeration missed a valid ladder (a bug in this script).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import itertools  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from neuronprobe.shape_buckets.costs import TOKENS, assign  # noqa: E402
from neuronprobe.shape_buckets.optimal import candidate_edges, solve  # noqa: E402
from neuronprobe.shape_buckets.serving_plan import TimeModel, Traffic, choose  # noqa: E402
from neuronprobe.shape_buckets.vllm_neuron import Clock, SchedulerConfig, replay_vllm_neuron  # noqa: E402
from neuronprobe.shape_buckets.vllm_neuron_rules import Deployment, check_neuron_config, graph_count  # noqa: E402
from neuronprobe.vocabulary import Fit  # noqa: E402


def _ladders(values: list[int], top: int) -> list[list[int]]:
    cands = sorted({v for v in values if v < top})
    return [[*c, top] for r in range(len(cands) + 1) for c in itertools.combinations(cands, r)]


def _prefill_seconds(tr: Traffic, tm: TimeModel, T: list[int]) -> float:
    t = np.asarray(T)
    return float(np.sum(tr.prefill_counts * t[assign(tr.prefill_values, t, Fit.INCLUSIVE)])) / tm.prefill_tokens_per_second


def _decode_seconds(tr: Traffic, dep: Deployment, tm: TimeModel, B: list[int], ctx: list[int]) -> float:
    s = dep.scheduler
    b, e = np.asarray(B), np.asarray([*ctx, s.max_model_len])
    kv = float(np.sum(tr.weights * b[assign(tr.batch, b, Fit.INCLUSIVE)] * e[assign(tr.ctx, e, Fit.INCLUSIVE)]))
    return tm.decode_step_seconds * ((1 - tm.kv_share) * float(tr.weights.sum()) + tm.kv_share * kv / (s.max_num_seqs * s.max_model_len))


def _planned(tr: Traffic, dep: Deployment, tm: TimeModel, budget: int) -> float:
    got, _ = choose(tr, dep, tm, budget, None, [], 8)
    assert sum(graph_count(dep, got.prefill_buckets, got.batch_buckets, got.context_buckets)) <= budget
    cfg = {"num_batched_tokens_buckets": got.prefill_buckets, "num_seqs_buckets": got.batch_buckets}
    if got.context_buckets:
        cfg["decode_context_length_buckets"] = got.context_buckets
    assert not check_neuron_config(cfg, dep)
    return _prefill_seconds(tr, tm, got.prefill_buckets) + _decode_seconds(tr, dep, tm, got.batch_buckets, got.context_buckets)


def _report(name: str, gaps: list[float], seconds: float) -> None:
    g = np.array(gaps)
    print(f"{name}: {g.size} cases, gap > 0 in {(g > 1e-12).sum()}, max {g.max():.4%}, mean {g.mean():.4%}, min {g.min():.4%} ({seconds:.0f} s)")


def scan_a() -> None:
    gaps, t0 = [], time.perf_counter()
    tm = TimeModel(0.1, 1000.0, 0.5)
    for S, budgets, spec, tp in [(4, [3, 4, 6, 8, 10], 0, 1), (8, [4, 6, 8, 12], 0, 1), (4, [5, 8, 11, 14], 2, 1), (4, [4, 6, 8], 0, 8)]:
        for budget in budgets:
            for seed in range(8):
                rng = np.random.default_rng(seed)
                n = 40
                cfg = SchedulerConfig(64, S, 512, num_speculative_tokens=spec)
                arrivals = np.sort(rng.uniform(0, 30 * S / 4, n))
                rep = replay_vllm_neuron(rng.choice([8, 20, 40, 64, 100, 150], n), rng.integers(2, 60, n), arrivals, cfg, Clock(0.1, 1000.0))
                dep = Deployment(cfg, tp, tp > 1)
                tr = Traffic.from_replay(rep)
                pre = [v for v in range(tp + 1, 64) if v % tp == 0] if tp > 1 else [int(v) for v in tr.prefill_values]
                ctx_values = [int(c) for c in np.unique((tr.ctx + 127) // 128 * 128)]
                best = min(
                    _prefill_seconds(tr, tm, T) + _decode_seconds(tr, dep, tm, B, E[:-1])
                    for T in _ladders(pre, 64)
                    for B in _ladders(list(range(1, S)), S)
                    for E in _ladders(ctx_values, 512)
                    if sum(graph_count(dep, T, B, E[:-1])) <= budget
                )
                gap = (_planned(tr, dep, tm, budget) - best) / best
                gaps.append(gap)
                if abs(gap) > 1e-12:
                    print(f"  A: max_num_seqs {S}, budget {budget}, speculation {spec}, TP {tp}, seed {seed}: gap {gap:.4%}")
    _report("A (every ladder set)", gaps, time.perf_counter() - t0)


def scan_b() -> None:
    gaps, t0 = [], time.perf_counter()
    tm = TimeModel(0.05, 2000.0, 0.5)
    for spec in (0, 2):
        fp, fd = (2, 3) if spec else (1, 1)
        for seed in range(6):
            rng = np.random.default_rng(100 + seed)
            n = 120
            cfg = SchedulerConfig(256, 8, 1024, num_speculative_tokens=spec)
            rep = replay_vllm_neuron(rng.integers(10, 600, n), rng.integers(2, 300, n), np.sort(rng.uniform(0, 60, n)), cfg, Clock(0.05, 2000.0))
            dep = Deployment(cfg)
            tr = Traffic.from_replay(rep)
            sols = solve(tr.prefill_values, tr.prefill_counts, candidate_edges(tr.prefill_values, 256, Fit.INCLUSIVE), TOKENS, 256)
            best_prefill = {s.k: _prefill_seconds(tr, tm, s.edges) for s in sols}
            best_decode: dict[int, float] = {}
            ctx_values = [int(c) for c in np.unique((tr.ctx + 127) // 128 * 128)]
            for B in _ladders(list(range(1, 8)), 8):
                for E in _ladders(ctx_values, 1024):
                    g = len(B) * len(E) * fd
                    best_decode[g] = min(best_decode.get(g, float("inf")), _decode_seconds(tr, dep, tm, B, E[:-1]))
            for budget in (8, 11, 14, 20, 26) if spec else (4, 6, 8, 12, 16, 24):
                fits = [best_prefill[k] + d for k in best_prefill for g, d in best_decode.items() if k * fp + g <= budget]
                if not fits:
                    continue
                best = min(fits)
                gap = (_planned(tr, dep, tm, budget) - best) / best
                gaps.append(gap)
                if abs(gap) > 1e-12:
                    print(f"  B: budget {budget}, speculation {spec}, seed {seed}: gap {gap:.4%}")
    _report("B (prefill + decode split)", gaps, time.perf_counter() - t0)


def scan_c() -> None:
    gaps, t0 = [], time.perf_counter()
    tm = TimeModel(0.05, 2000.0, 0.5)
    for seed in range(6):
        rng = np.random.default_rng(200 + seed)
        n = 300
        cfg = SchedulerConfig(256, 16, 512)
        rep = replay_vllm_neuron(rng.integers(10, 400, n), rng.integers(2, 100, n), np.sort(rng.uniform(0, 40, n)), cfg, Clock(0.05, 4000.0))
        dep = Deployment(cfg)
        tr = Traffic.from_replay(rep)
        sols = solve(tr.prefill_values, tr.prefill_counts, candidate_edges(tr.prefill_values, 256, Fit.INCLUSIVE), TOKENS, 256)
        best_prefill = {s.k: _prefill_seconds(tr, tm, s.edges) for s in sols}
        best_decode: dict[int, float] = {}
        ctx_values = [int(c) for c in np.unique((tr.ctx + 127) // 128 * 128)]
        # An optimal batch ladder's edges are observed batch sizes (lowering an edge to the largest size it serves costs nothing).
        for B in _ladders(sorted({int(b) for b in tr.batch}), 16):
            for E in _ladders(ctx_values, 512):
                g = len(B) * len(E)
                best_decode[g] = min(best_decode.get(g, float("inf")), _decode_seconds(tr, dep, tm, B, E[:-1]))
        for budget in (4, 6, 8, 10, 12, 16, 20, 24, 32):
            best = min(best_prefill[k] + d for k in best_prefill for g, d in best_decode.items() if k + g <= budget)
            gap = (_planned(tr, dep, tm, budget) - best) / best
            gaps.append(gap)
            if abs(gap) > 1e-12:
                print(f"  C: budget {budget}, seed {seed}: gap {gap:.4%}")
    _report("C (max_num_seqs 16)", gaps, time.perf_counter() - t0)


if __name__ == "__main__":
    scan_a()
    scan_b()
    scan_c()
