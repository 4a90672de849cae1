"""The exact optimum: the k bucket edges that minimise total padding cost, for every k <= K.

Problem. The traffic is a histogram: distinct lengths ``v_1 < ... < v_n`` with counts
``c_i``. A ladder is a sorted set of edges whose last edge is the required maximum;
each length runs in its bucket (see :func:`neuronprobe.shape_buckets.costs.assign`)
and wastes ``f(E) - f(L)``. Minimise the total waste with at most k edges.

Candidates. In an optimal ladder every edge but the last is the *smallest allowed*
edge that covers some observed length (otherwise lowering it keeps every item in
the same bucket and strictly cuts the waste). So the only candidates are, for each
observed length ``v``: ``v`` (inclusive fit) or ``v + 1`` (strict fit: NxD Inference
sends a length equal to an edge one bucket up), rounded up to ``--multiple-of`` and
raised to ``--min-bucket``. Candidates that cover the same set collapse to the smallest.
This keeps the search exact over the constrained edge set while making it small
(``m <= n``).

DP. With candidate cover counts ``P`` and prefix sums ``C`` (counts) and ``S``
(counts * f), one bucket from candidate ``a`` (exclusive) to ``b`` costs
``w(a, b) = f(e_b) * (C[P_b] - C[P_a]) - (S[P_b] - S[P_a])`` in O(1), and
``D_j[b] = min_{a < b} D_{j-1}[a] + w(a, b)``. Because ``f`` and ``C`` are
non-decreasing, ``w`` satisfies the quadrangle inequality
``w(a,b) + w(a',b') <= w(a,b') + w(a',b)`` for ``a <= a' <= b <= b'`` (the ``S``
terms cancel and ``(f(e_b) - f(e_b')) * (C[P_a'] - C[P_a]) <= 0`` remains), so the
leftmost optimal split is monotone in ``b`` and divide-and-conquer finds it exactly
with O(m log m) evaluations per layer. The recursion runs breadth-first so that each
level is one vectorised numpy pass. Layer j's value at ``b = m`` is the optimum for
exactly j buckets, so one run gives the whole curve.

Ties. The leftmost (smallest) predecessor is kept at every step, so among optimal
ladders the one returned has the smallest last-but-one edge, then the smallest edge
before it, and so on: ties break toward smaller edges.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import overload

import numpy as np

from neuronprobe.defaults import DEFAULT_FIT
from neuronprobe.errors import InputError
from neuronprobe.shape_buckets.costs import INT64_SAFE_BOUND, CostModel
from neuronprobe.vocabulary import Fit

FITS: tuple[str, ...] = Fit.values()


def check_fit(fit: str) -> Fit:
    """The fit rule named by ``fit``; one sentence naming the choices otherwise (library and CLI alike)."""
    try:
        return Fit(fit)
    except ValueError:
        raise InputError(f"--fit {fit!r}: use {' or '.join(FITS)}") from None


@dataclass(frozen=True)
class Candidates:
    """The edges an optimal ladder can use, with how many distinct lengths each covers."""

    edges: np.ndarray  # sorted int64; the last one is max_len
    # cover[i] = distinct lengths in the buckets up to edges[i]; strictly increasing,
    # except that the last edge (max_len) covers the same as the one before when that
    # one already covers every length (max_len above the longest length).
    cover: np.ndarray


@dataclass(frozen=True)
class Solution:
    k: int
    edges: list[int]
    cost: float  # total padding cost, sum c * (f(E) - f(L)), in the cost model's units


@overload
def round_up(x: int, multiple: int) -> int: ...
@overload
def round_up(x: np.ndarray, multiple: int) -> np.ndarray: ...
def round_up(x: int | np.ndarray, multiple: int) -> int | np.ndarray:
    """The smallest multiple of ``multiple`` that is ``>= x``."""
    return -(-x // multiple) * multiple


def candidate_edges(
    values: np.ndarray,
    max_len: int,
    fit: str = DEFAULT_FIT,
    multiple_of: int | None = None,
    min_bucket: int | None = None,
) -> Candidates:
    """The reduced candidate set described in the module docstring.

    ``values`` are the sorted distinct lengths that the last edge covers (``<= max_len``).
    """
    check_fit(fit)
    v = np.asarray(values, dtype=np.int64)
    n = v.size
    step = multiple_of or 1
    base = v + (1 if fit == Fit.STRICT else 0)
    if step > 1:
        base = round_up(base, step)
    if min_bucket:
        base = np.maximum(base, round_up(int(min_bucket), step))
    base = np.unique(base)
    base = base[base < max_len]
    cover = np.searchsorted(v, base, side="right" if fit == Fit.INCLUSIVE else "left")
    # Every candidate covers at least one length. One may cover all of them when
    # max_len lies above the longest length: the forced last bucket is then empty.
    keep = cover > 0
    edges: np.ndarray = np.append(base[keep], np.int64(max_len)).astype(np.int64)
    covers: np.ndarray = np.append(np.asarray(cover)[keep], n).astype(np.int64)
    return Candidates(edges, covers)


def _use_exact_ints(counts: np.ndarray, max_len: int, cost: CostModel) -> bool:
    total = int(np.asarray(counts, dtype=np.int64).sum())
    bound = 2 * total * int(cost.scalar(max_len)) if cost.integral else INT64_SAFE_BOUND
    return cost.integral and bound < INT64_SAFE_BOUND


def solve(
    values: np.ndarray,
    counts: np.ndarray,
    cands: Candidates,
    cost: CostModel,
    max_k: int,
) -> list[Solution]:
    """The optimal ladder for every k = 1..min(max_k, number of candidates).

    ``values``/``counts``: the histogram covered by the last edge. Exact in int64
    arithmetic for the tokens and attention models (when the totals fit); float64 for
    measured A,B.
    """
    v = np.asarray(values, dtype=np.int64)
    c = np.asarray(counts, dtype=np.int64)
    m = int(cands.edges.size)
    k_max = max(1, min(int(max_k), m))
    exact = _use_exact_ints(c, int(cands.edges[-1]), cost)
    dtype = np.int64 if exact else np.float64

    csum = np.zeros(v.size + 1, dtype=dtype)
    csum[1:] = np.cumsum(c.astype(dtype))
    ssum = np.zeros(v.size + 1, dtype=dtype)
    ssum[1:] = np.cumsum(c.astype(dtype) * cost.f(v, exact=exact))
    # Index 0 stands for "no edge before": P = 0 lengths covered.
    cover = np.concatenate(([0], cands.cover))
    cp = csum[cover]
    sp = ssum[cover]
    fp = np.concatenate(([0], cost.f(cands.edges, exact=exact))).astype(dtype)

    index_type = np.int32 if m < 2**31 - 1 else np.int64
    pred: np.ndarray = np.zeros((k_max + 1, m + 1), dtype=index_type)
    prev = fp * (cp - cp[0]) - (sp - sp[0])  # layer 1: one bucket from the start to b
    best = [prev[m]]
    for j in range(2, k_max + 1):
        prev, pred[j] = _layer(prev, j, m, cp, sp, fp, only_last=(j == k_max))
        best.append(prev[m])

    solutions = []
    for k in range(1, k_max + 1):
        edges = []
        b = m
        for j in range(k, 0, -1):
            edges.append(int(cands.edges[b - 1]))
            b = int(pred[j][b]) if j > 1 else 0
        solutions.append(Solution(k, edges[::-1], float(best[k - 1])))
    return solutions


def _layer(
    prev: np.ndarray,
    j: int,
    m: int,
    cp: np.ndarray,
    sp: np.ndarray,
    fp: np.ndarray,
    only_last: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """One DP layer, ``cur[b] = min_{j-1 <= a < b} prev[a] + w(a, b)`` for ``b`` in ``[j, m]``.

    Divide and conquer over ``b`` with the leftmost argmin, breadth-first: each round
    evaluates the middle ``b`` of every open interval over its allowed ``a`` range in
    one vectorised pass (segment minima via ``np.minimum.reduceat``). Expanding
    ``w``, ``prev[a] + w(a, b) = (prev[a] + sp[a]) - fp[b] * cp[a] + (fp[b] * cp[b] - sp[b])``;
    the last term does not depend on ``a``, so it is added after the minimum.
    """
    cur = np.zeros(m + 1, dtype=prev.dtype)
    arg: np.ndarray = np.zeros(m + 1, dtype=np.int64)
    g = prev + sp
    tail = fp * cp - sp
    first_b = m if only_last else j
    blo = np.array([first_b], dtype=np.int64)
    bhi = np.array([m], dtype=np.int64)
    olo = np.array([j - 1], dtype=np.int64)
    ohi = np.array([m - 1], dtype=np.int64)
    while blo.size:
        mid = (blo + bhi) // 2
        hi = np.minimum(ohi, mid - 1)
        lens = hi - olo + 1  # >= 1: the optimal split for mid lies in [olo, mid - 1]
        offsets = np.zeros(lens.size, dtype=np.int64)
        np.cumsum(lens[:-1], out=offsets[1:])
        total = int(offsets[-1] + lens[-1])
        pos: np.ndarray = np.arange(total, dtype=np.int64)
        a = pos + np.repeat(olo - offsets, lens)
        vals = g[a] - np.repeat(fp[mid], lens) * cp[a]
        seg_min = np.minimum.reduceat(vals, offsets)
        first = np.minimum.reduceat(np.where(vals == np.repeat(seg_min, lens), pos, total), offsets)
        opt = a[first]
        cur[mid] = seg_min + tail[mid]
        arg[mid] = opt
        left = blo <= mid - 1
        right = mid + 1 <= bhi
        blo = np.concatenate((blo[left], mid[right] + 1))
        bhi = np.concatenate((mid[left] - 1, bhi[right]))
        new_olo = np.concatenate((olo[left], opt[right]))
        ohi = np.concatenate((opt[left], ohi[right]))
        olo = new_olo
    return cur, arg
