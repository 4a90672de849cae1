"""Continuous batching: replay a timed trace step by step, then choose batch and sequence buckets jointly.

Replay. Requests join in arrival order when a slot is free (at most ``max_batch`` at once),
run one decode step per tick and leave after their last one (O-1 decode steps; prefill is
not modelled as a step). When nothing runs, the clock jumps to the next arrival. Each
step records the batch size, the longest required length in the batch (the runtimes pick
the sequence bucket from it) and the real KV tokens the step needs (the sum over the batch).
A tick lasts ``1 / tokens_per_second``, or the fitted ``--step-times`` model at the step's
longest length. The replay does not depend on the ladder, so every ladder is scored on the
same steps.

Joint ladders. A step with n sequences whose longest needs r runs in the smallest batch
bucket B >= n and the sequence bucket E of r under the runtime's rule; it reads B x E KV
tokens. With the batch ladder fixed, the best sequence ladder is the exact 1-D problem of
:mod:`.optimal` on the r histogram weighted by B (the weights are integers, so the solver
is reused unchanged); with the sequence ladder fixed, the best batch ladder is the same
1-D problem on the n histogram weighted by E. For a graph budget G and each split
a x s <= G, :func:`plan_batches` alternates the two exact solves until the cost stops
falling, and keeps the best split. When one batch bucket is the only choice (batch 1,
a budget of one graph per sequence bucket, NxD Inference with speculation) the answer is
exact; otherwise it is a heuristic whose gap to brute force is measured on small inputs (tests/test_buckets_decode_schedule.py, benchmarks/bench_decode.py).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from neuronprobe.errors import InputError
from neuronprobe.shape_buckets.costs import TOKENS, assign
from neuronprobe.shape_buckets.decode_rules import RuntimeRule, StepModel
from neuronprobe.shape_buckets.optimal import candidate_edges, solve
from neuronprobe.vocabulary import Fit, ServingRuntime

MAX_ALTERNATIONS = 20


@dataclass
class Replay:
    start: np.ndarray  # float64 seconds at which each step starts
    batch: np.ndarray  # int64 sequences in the step
    longest: np.ndarray  # int64 longest required length in the step
    real: np.ndarray  # int64 real KV tokens the step needs (sum over the batch of length + speculation)
    real_sq: np.ndarray  # float64 sum over the batch of the squared lengths (for a step-time model with an E^2 term)
    requests: int
    duration: float

    @property
    def steps(self) -> int:
        return int(self.batch.size)


# The most decode steps one replay of continuous batching walks (about a minute in Python).
MAX_REPLAY_STEPS = 2**25


def _too_many_steps(needs: str) -> str:
    return f"the replay needs {needs} decode steps; neuronprobe replays at most {MAX_REPLAY_STEPS:,} (MAX_REPLAY_STEPS): sample the trace or raise --max-batch"


def replay(
    prompts: np.ndarray,
    outputs: np.ndarray,
    arrivals: np.ndarray,
    max_batch: int,
    shift: int,
    step_seconds: float | None = None,
    step_model: StepModel | None = None,
) -> Replay:
    """Replay the requests through continuous batching (module docstring).

    ``shift`` (the speculation length) is added to each attention length to get the
    required length, which is also the KV the step attends. One of ``step_seconds`` and
    ``step_model`` (in seconds) sets the tick.
    """
    if max_batch < 1:
        raise InputError(f"--max-batch {max_batch}: use a whole number >= 1")
    # The replay walks one decode step at a time: bounded before it starts (the fewest steps the
    # trace can take, every batch full) and while it runs.
    fewest = -(-int(np.maximum(np.asarray(outputs, dtype=np.int64) - 1, 0).sum()) // max_batch)
    if fewest > MAX_REPLAY_STEPS:
        raise InputError(_too_many_steps(f"at least {fewest:,}"))
    order = np.argsort(np.asarray(arrivals, dtype=np.float64), kind="stable")
    arr = np.asarray(arrivals, dtype=np.float64)[order].tolist()
    p = np.asarray(prompts, dtype=np.int64)[order].tolist()
    o = np.asarray(outputs, dtype=np.int64)[order].tolist()
    n = len(arr)
    starts: list[float] = []
    batch: list[int] = []
    longest: list[int] = []
    real: list[int] = []
    real_sq: list[float] = []
    ends: list[tuple[int, int]] = []  # (last step, key) of each running request; min-heap on the last step
    tops: list[tuple[int, int]] = []  # (-key, last step): lazy max-heap of keys
    key_sum = 0  # sum of keys of running requests; a request's length at step s is key + s
    key_sq = 0  # sum of their squares: sum (key + s)^2 = key_sq + 2 s key_sum + b s^2
    i = 0
    t = 0.0 if n == 0 else arr[0]
    s = 0
    dt = step_seconds
    if dt is None and step_model is None:
        raise InputError("the replay needs a step time: --tokens-per-second or --step-times")

    def tick(length: int) -> float:
        assert step_model is not None
        return float(step_model.at(np.array([length]))[0])

    push, pop = heapq.heappush, heapq.heappop
    while True:
        while i < n and len(ends) < max_batch and arr[i] <= t:
            if o[i] >= 2:
                key = p[i] + 1 + shift - s
                last = s + o[i] - 2
                push(ends, (last, key))
                push(tops, (-key, last))
                key_sum += key
                key_sq += key * key
            i += 1
        if not ends:
            if i >= n:
                break
            t = max(t, arr[i])
            continue
        while tops[0][1] < s:
            pop(tops)
        b = len(ends)
        top = s - tops[0][0]
        starts.append(t)
        batch.append(b)
        longest.append(top)
        real.append(key_sum + b * s)
        real_sq.append(float(key_sq + 2 * s * key_sum + b * s * s))
        t += dt if dt is not None else tick(top)
        s += 1
        if s > MAX_REPLAY_STEPS:
            raise InputError(_too_many_steps(f"more than {MAX_REPLAY_STEPS:,}"))
        while ends and ends[0][0] < s:
            gone = pop(ends)[1]
            key_sum -= gone
            key_sq -= gone * gone
    return Replay(
        np.asarray(starts, dtype=np.float64),
        np.asarray(batch, dtype=np.int64),
        np.asarray(longest, dtype=np.int64),
        np.asarray(real, dtype=np.int64),
        np.asarray(real_sq, dtype=np.float64),
        n,
        (t - arr[0]) if n else 0.0,
    )


@dataclass(frozen=True)
class Plan:
    batch_buckets: list[int]
    seq_buckets: list[int]
    padded: int  # sum over steps of B x E
    method: str

    @property
    def graphs(self) -> int:
        return len(self.batch_buckets) * len(self.seq_buckets)


def seq_fit(rule: RuntimeRule, batch_buckets: list[int]) -> Fit:
    """NxD Inference picks (batch, seq) pairs with an inclusive sequence fit once batch buckets are on."""
    if rule.runtime == ServingRuntime.NXDI and len(batch_buckets) > 1:
        return Fit.INCLUSIVE
    return rule.fit


def plan_cost(batch: np.ndarray, longest: np.ndarray, weights: np.ndarray, batch_buckets: list[int], seq_buckets: list[int], rule: RuntimeRule) -> int:
    """Sum over (n, r) step groups of weight x B(n) x E(r); the groups must all fit."""
    bb = np.asarray(batch_buckets, dtype=np.int64)
    sb = np.asarray(seq_buckets, dtype=np.int64)
    bi = assign(batch, bb, Fit.INCLUSIVE)
    si = assign(longest, sb, seq_fit(rule, batch_buckets))
    if (bi >= bb.size).any() or (si >= sb.size).any():
        raise InputError("a step does not fit the largest batch or sequence bucket")
    return int(np.sum(weights * bb[bi] * sb[si]))


def _best_seq(batch: np.ndarray, longest: np.ndarray, weights: np.ndarray, batch_buckets: list[int], k: int, top: int, rule: RuntimeRule) -> list[int]:
    fit = seq_fit(rule, batch_buckets)
    bb = np.asarray(batch_buckets, dtype=np.int64)
    w = weights * bb[assign(batch, bb, Fit.INCLUSIVE)]
    values, inverse = np.unique(longest, return_inverse=True)
    counts = np.bincount(inverse, weights=w).astype(np.int64)
    cands = candidate_edges(values, top, fit, rule.multiple_of, None)
    return solve(values, counts, cands, TOKENS, k)[-1].edges


def _best_batch(batch: np.ndarray, longest: np.ndarray, weights: np.ndarray, seq_buckets: list[int], k: int, max_batch: int, rule: RuntimeRule) -> list[int]:
    sb = np.asarray(seq_buckets, dtype=np.int64)
    # The sequence fit depends on whether batch buckets are on (NxD Inference); with k > 1 they are.
    fit = seq_fit(rule, [0, 1] if k > 1 else [0])
    w = weights * sb[assign(longest, sb, fit)]
    values, inverse = np.unique(batch, return_inverse=True)
    counts = np.bincount(inverse, weights=w).astype(np.int64)
    cands = candidate_edges(values, max_batch, Fit.INCLUSIVE, None, None)
    return solve(values, counts, cands, TOKENS, k)[-1].edges


def step_groups(rep: Replay) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct (batch, longest) pairs of the replay with how many steps have each."""
    pairs = np.stack([rep.batch, rep.longest], axis=1)
    uniq, counts = np.unique(pairs, axis=0, return_counts=True)
    return uniq[:, 0].astype(np.int64), uniq[:, 1].astype(np.int64), counts.astype(np.int64)


def plan_batches(
    batch: np.ndarray,
    longest: np.ndarray,
    weights: np.ndarray,
    rule: RuntimeRule,
    max_batch: int,
    top: int,
    max_graphs: int,
    allow_batch_buckets: bool = True,
) -> Plan:
    """The batch and sequence ladders with at most ``max_graphs`` graphs that read the least padded KV (module docstring)."""
    best: Plan | None = None
    distinct_b = int(np.unique(batch).size)
    splits = range(1, min(max_graphs, max_batch, distinct_b if distinct_b else 1) + 1) if allow_batch_buckets else range(1, 2)
    for a in splits:
        s = max_graphs // a
        if s < 1:
            continue
        if a == 1:
            bl = [max_batch]
            sl = _best_seq(batch, longest, weights, bl, s, top, rule)
            cost = plan_cost(batch, longest, weights, bl, sl, rule)
        else:
            sl = [top]
            bl = _best_batch(batch, longest, weights, sl, a, max_batch, rule)
            cost = plan_cost(batch, longest, weights, bl, sl, rule)
            for _ in range(MAX_ALTERNATIONS):
                sl2 = _best_seq(batch, longest, weights, bl, s, top, rule)
                bl2 = _best_batch(batch, longest, weights, sl2, a, max_batch, rule)
                cost2 = plan_cost(batch, longest, weights, bl2, sl2, rule)
                if cost2 >= cost:
                    break
                bl, sl, cost = bl2, sl2, cost2
        # Exact only when one batch bucket is the only split: the sequence ladder alone is then free.
        plan = Plan(bl, sl, cost, "exact" if len(splits) == 1 else "heuristic")
        if best is None or (plan.padded, plan.graphs) < (best.padded, best.graphs):
            best = plan
    assert best is not None
    return best


def thin(values: np.ndarray, stride: int, how: str) -> list[int]:
    """Every ``stride`` consecutive steps as one point: their maximum (``max``) or first value."""
    if stride <= 1:
        return [int(x) for x in values.tolist()]
    n = values.size
    pad = (-n) % stride
    if how == "max":
        padded = np.concatenate([values, np.full(pad, values.min() if n else 0, dtype=values.dtype)])
        return [int(x) for x in padded.reshape(-1, stride).max(axis=1).tolist()]
    return [int(x) for x in values[::stride].tolist()]
