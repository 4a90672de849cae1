"""Continuous-batching replay and joint batch x sequence buckets (issue 24, point 3)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from neuronprobe.shape_buckets.decode_rules import RULES, decode_bucket
from neuronprobe.shape_buckets.schedule import plan_batches, plan_cost, replay, step_groups
from neuronprobe.vocabulary import ServingRuntime

# (arrival s, prompt, output): A and B fill the batch of 2; C waits for B; D produces only its
# prefill token (no decode step) but still queues; E arrives after an idle gap.
FIVE = [(0.0, 10, 4), (0.0, 20, 3), (1.0, 5, 3), (1.5, 30, 1), (5.0, 8, 2)]


def _five(max_batch=2, shift=0):
    arr, p, o = (np.array(col) for col in zip(*FIVE, strict=True))
    return replay(p, o, arr, max_batch, shift, step_seconds=1.0)


def test_five_requests_replay_step_by_step():
    rep = _five()
    assert rep.start.tolist() == [0.0, 1.0, 2.0, 3.0, 5.0]  # idle from 4 s until E arrives at 5 s
    assert rep.batch.tolist() == [2, 2, 2, 1, 1]
    assert rep.longest.tolist() == [21, 22, 13, 7, 9]  # B at 21, 22; then A at 13 with C at 6; C at 7; E at 9
    assert rep.real.tolist() == [11 + 21, 12 + 22, 13 + 6, 7, 9]
    assert rep.real_sq.tolist() == [11**2 + 21**2, 12**2 + 22**2, 13**2 + 6**2, 49, 81]
    assert rep.duration == 6.0 and rep.requests == 5
    # the bucket each step runs in under NxD Inference's strict rule with the ladder 8, 16, 32
    assert [decode_bucket(x, [8, 16, 32], "nxdi") for x in rep.longest.tolist()] == [32, 32, 16, 8, 16]


def test_replay_with_room_for_everyone_and_speculation_shift():
    rep = _five(max_batch=8, shift=2)
    assert rep.batch.tolist() == [2, 3, 2, 1]  # C joins at 1 s and is done with A at 3 s
    assert rep.longest.tolist() == [23, 24, 15, 11]
    assert rep.start.tolist() == [0.0, 1.0, 2.0, 5.0]


def _brute_plan(nb, nl, w, rule, max_batch, top, budget, seq_candidates):
    best = None
    batch_sets = [[*c, max_batch] for r in range(max_batch) for c in itertools.combinations(range(1, max_batch), r)]
    for bl in batch_sets:
        for r in range(budget // len(bl)):
            for combo in itertools.combinations(seq_candidates, r):
                sl = [*combo, top]
                cost = plan_cost(nb, nl, w, bl, sl, rule)
                best = cost if best is None else min(best, cost)
    return best


def _random_steps(rng, max_batch, top):
    n = int(rng.integers(3, 9))
    nb = rng.integers(1, max_batch + 1, n)
    nl = rng.integers(1, top + 1, n)
    nl[0] = top
    nb[0] = max_batch
    w = rng.integers(1, 6, n)
    return nb.astype(np.int64), nl.astype(np.int64), w.astype(np.int64)


@pytest.mark.parametrize("runtime", [ServingRuntime.NXDI, ServingRuntime.TNX])
def test_joint_plan_against_brute_force_on_small_inputs(runtime):
    """Batch 1 (one batch bucket): exact. Otherwise never below brute force, and within the gap measured here."""
    rule = RULES[runtime]
    rng = np.random.default_rng(7)
    gaps = []
    for _ in range(60):
        max_batch, top, budget = int(rng.integers(1, 5)), 12, int(rng.integers(1, 7))
        nb, nl, w = _random_steps(rng, max_batch, top)
        plan = plan_batches(nb, nl, w, rule, max_batch, top, budget)
        best = _brute_plan(nb, nl, w, rule, max_batch, top, budget, list(range(1, top)))
        assert plan.graphs <= budget
        assert plan.padded == plan_cost(nb, nl, w, plan.batch_buckets, plan.seq_buckets, rule)
        assert plan.padded >= best
        if max_batch == 1 or budget == 1:
            assert plan.method == "exact" and plan.padded == best
        gaps.append(plan.padded / best - 1)
    # measured with this seed: the heuristic finds the optimum in most cases; the worst gap stays small
    assert np.mean([g == 0 for g in gaps]) >= 0.8
    assert max(gaps) <= 0.10


def test_step_groups_count_each_batch_and_length_pair():
    rep = _five(max_batch=8)
    nb, nl, w = step_groups(rep)
    assert sorted(zip(nb.tolist(), nl.tolist(), w.tolist(), strict=True)) == [(1, 9, 1), (2, 13, 1), (2, 21, 1), (3, 22, 1)]
