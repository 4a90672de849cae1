"""The proposal is the exact optimum: equal to brute force, and its invariants hold.

The brute force here shares no code with the library: it enumerates every allowed
integer edge set, places each length by the rule written out in plain Python, and
sums the cost in exact integer/fraction arithmetic.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neuronprobe.shape_buckets import CostModel, bucket_for, propose_buckets
from neuronprobe.shape_buckets.optimal import candidate_edges, solve

# Measured-cost coefficients are multiples of 1/4 so float arithmetic stays exact and
# the comparison with the brute force can be exact too.
COSTS = {
    "tokens": (Fraction(1), Fraction(0)),
    "attention": (Fraction(0), Fraction(1)),
    "0.75,0.25": (Fraction(3, 4), Fraction(1, 4)),
    "2.5,0": (Fraction(5, 2), Fraction(0)),
}


def _place(length: int, edges: list[int], fit: str) -> int | None:
    """The bucket a length runs in, written out: None when it fits no bucket."""
    for i, edge in enumerate(edges):
        last = i == len(edges) - 1
        if fit == "inclusive" and length <= edge:
            return edge
        if fit == "strict" and (length < edge or (last and length == edge)):
            return edge
    return None


def _brute_force(lengths, k, max_len, fit, multiple_of, min_bucket, cost):
    a, b = COSTS[cost]
    f = lambda x: a * x + b * x * x  # noqa: E731
    allowed = [e for e in range(1, max_len) if (multiple_of is None or e % multiple_of == 0) and (min_bucket is None or e >= min_bucket)]
    best = None
    for r in range(k):
        for combo in itertools.combinations(allowed, r):
            edges = [*combo, max_len]
            total = Fraction(0)
            for length in lengths:
                edge = _place(length, edges, fit)
                assert edge is not None  # the last edge covers every length in these cases
                total += f(edge) - f(length)
            # fewest edges first, then smaller edges from the top down (the documented tie rule)
            key = (total, len(edges), tuple(reversed(edges)))
            if best is None or key < best[0]:
                best = (key, edges)
    return best[0][0], best[1]


@st.composite
def small_cases(draw):
    lengths = draw(st.lists(st.integers(1, 24), min_size=1, max_size=12))
    fit = draw(st.sampled_from(["inclusive", "strict"]))
    multiple_of = draw(st.sampled_from([None, None, 2, 3, 4]))
    min_bucket = draw(st.sampled_from([None, None, 3, 8]))
    cost = draw(st.sampled_from(sorted(COSTS)))
    k = draw(st.integers(1, 4))
    step = multiple_of or 1
    floor = max(max(lengths), min_bucket or 1)
    max_len = -(-floor // step) * step + step * draw(st.integers(0, 2))
    return lengths, k, max_len, fit, multiple_of, min_bucket, cost


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_cases())
def test_every_k_equals_brute_force_for_every_cost_and_constraint(case):
    lengths, k, max_len, fit, multiple_of, min_bucket, cost = case
    proposal = propose_buckets(lengths, k, cost=cost, max_len=max_len, fit=fit, multiple_of=multiple_of, min_bucket=min_bucket)
    for point in proposal.curve:
        want_cost, want_edges = _brute_force(lengths, point.k, max_len, fit, multiple_of, min_bucket, cost)
        assert Fraction(point.cost) == want_cost, (point, want_edges)
        assert point.edges == want_edges


def _plain_dp(values, counts, cands, cost: CostModel, k):
    """The textbook O(k m^2) DP over the same candidates, to check divide and conquer at larger sizes."""
    f = lambda x: cost.a * x + cost.b * x * x  # noqa: E731
    edges, cover = cands.edges.tolist(), [0, *cands.cover.tolist()]
    m = len(edges)
    pre_c = np.concatenate(([0], np.cumsum(counts))).tolist()
    pre_s = np.concatenate(([0], np.cumsum([c * f(v) for v, c in zip(values.tolist(), counts.tolist(), strict=False)]))).tolist()

    def w(a, b):
        return f(edges[b - 1]) * (pre_c[cover[b]] - pre_c[cover[a]]) - (pre_s[cover[b]] - pre_s[cover[a]])

    prev = [w(0, b) if b else 0 for b in range(m + 1)]
    out = [prev[m]]
    for j in range(2, min(k, m) + 1):
        cur = [0] * (m + 1)
        for b in range(j, m + 1):
            cur[b] = min(prev[a] + w(a, b) for a in range(j - 1, b))
        prev = cur
        out.append(prev[m])
    return out


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(1, 3000), min_size=2, max_size=300),
    st.sampled_from(["inclusive", "strict"]),
    st.sampled_from([None, 16, 128]),
    st.sampled_from(["tokens", "attention"]),
)
def test_divide_and_conquer_matches_the_plain_dp_on_larger_histograms(lengths, fit, multiple_of, cost):
    from neuronprobe.shape_buckets.costs import parse_cost

    values, counts = np.unique(lengths, return_counts=True)
    top = int(-(-values[-1] // (multiple_of or 1)) * (multiple_of or 1))
    cands = candidate_edges(values, top, fit, multiple_of)
    model = parse_cost(cost)
    got = [s.cost for s in solve(values, counts, cands, model, 12)]
    assert got == pytest.approx(_plain_dp(values, counts, cands, model, 12), rel=0, abs=0)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(1, 5000), min_size=1, max_size=200),
    st.integers(1, 12),
    st.sampled_from(["inclusive", "strict"]),
    st.sampled_from(["tokens", "attention", "0.5,0.125"]),
)
def test_invariants_hold_on_random_traffic(lengths, k, fit, cost):
    proposal = propose_buckets(lengths, k, fit=fit, cost=cost)
    longest = max(lengths)
    assert proposal.edges[-1] == longest == proposal.max_len  # the maximum is covered
    assert proposal.beyond_last == 0
    previous = None
    for point in proposal.curve:
        assert point.edges == sorted(set(point.edges))  # sorted and unique
        assert point.edges[-1] == longest
        assert len(point.edges) == point.k
        if previous is not None:  # more buckets never pad more
            assert point.cost <= previous.cost
            if cost == "tokens":
                assert point.overhead.tokens <= previous.overhead.tokens
            if cost == "attention":
                assert point.overhead.attention <= previous.overhead.attention
        previous = point
    # The reported cost and overhead are what bucket_for gives, length by length.
    a, b = (1, 0) if cost == "tokens" else (0, 1) if cost == "attention" else (0.5, 0.125)
    f = lambda x: a * x + b * x * x  # noqa: E731
    placed = [bucket_for(n, proposal.edges, fit=fit) for n in lengths]
    assert all(edge >= n for edge, n in zip(placed, lengths, strict=False))
    assert sum(f(e) - f(n) for e, n in zip(placed, lengths, strict=False)) == pytest.approx(proposal.cost, rel=1e-12)
    tokens = 100 * (sum(placed) - sum(lengths)) / sum(lengths)
    assert proposal.overhead.tokens == pytest.approx(tokens, abs=1e-4)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 400), min_size=1, max_size=80), st.integers(1, 6))
def test_strict_edges_never_pad_a_length_equal_to_its_edge_into_that_edge(lengths, k):
    proposal = propose_buckets(lengths, k, fit="strict")
    for n in lengths:
        edge = bucket_for(n, proposal.edges, fit="strict")
        assert edge > n or edge == proposal.edges[-1]
    # and the same edges read inclusively never cost more: every length fits at least as low
    inclusive = [bucket_for(n, proposal.edges, fit="inclusive") for n in lengths]
    strict = [bucket_for(n, proposal.edges, fit="strict") for n in lengths]
    assert all(i <= s for i, s in zip(inclusive, strict, strict=False))


def test_ties_break_toward_smaller_edges():
    # Lengths 1, 2, 3 with two buckets: [1, 3] and [2, 3] both waste one token.
    proposal = propose_buckets([1, 2, 3], 2)
    assert proposal.cost == 1
    assert proposal.edges == [1, 3]


def test_the_whole_curve_is_returned_and_k_is_the_largest_without_a_compile_cost():
    proposal = propose_buckets([100, 200, 300, 400, 500, 600], 4)
    assert [p.k for p in proposal.curve] == [1, 2, 3, 4]
    assert proposal.k == 4 and proposal.chosen_by == "max_buckets"
