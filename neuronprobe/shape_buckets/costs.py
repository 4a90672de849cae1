"""Cost models for padding, and the overhead numbers every ladder is scored with.

A cost model is a non-decreasing function ``f`` of the compiled length: the work
one item does when it runs in a bucket of that length. Padding a length-``L``
item into a bucket of size ``E`` wastes ``f(E) - f(L)``. Three models:

- ``tokens``:    ``f(x) = x``   (projections and MLPs: linear in the padded length)
- ``attention``: ``f(x) = x^2`` (the attention score matrix)
- ``measured``:  ``f(x) = A*x + B*x^2`` with ``A, B >= 0`` from measured step times
  (:func:`fit_step_times`); a constant per-call term cancels out of ``f(E) - f(L)``.

Because ``f`` is non-decreasing, the padding cost of a bucket obeys the
quadrangle inequality, which is what makes the divide-and-conquer DP in
:mod:`neuronprobe.shape_buckets.optimal` exact.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from neuronprobe.errors import InputError
from neuronprobe.limits import MAX_COST_COEFFICIENT
from neuronprobe.vocabulary import Fit

# Integer arithmetic is exact, so the DP compares costs without rounding whenever
# the largest intermediate value fits comfortably in int64 (2**62 leaves a
# factor-2 margin for the sum of a DP value and a bucket cost).
INT64_SAFE_BOUND = 2**62


@dataclass(frozen=True)
class CostModel:
    """``f(x) = a*x + b*x**2``, the cost of one item at compiled length ``x``."""

    name: str  # "tokens" | "attention" | "measured"
    a: float
    b: float

    @property
    def integral(self) -> bool:
        """True when ``f`` maps integers to integers, so costs can be exact int64."""
        return float(self.a).is_integer() and float(self.b).is_integer()

    def describe(self) -> str:
        if self.name == "tokens":
            return "tokens: f(x) = x (padded tokens)"
        if self.name == "attention":
            return "attention: f(x) = x^2 (attention score cost)"
        return f"measured: f(x) = {self.a:g}*x + {self.b:g}*x^2"

    def params(self) -> dict[str, float]:
        return {"A": float(self.a), "B": float(self.b)}

    def f(self, x: np.ndarray, exact: bool = False) -> np.ndarray:
        """Evaluate ``f`` on an integer array; int64 when ``exact`` (caller checked the bound)."""
        if exact:
            xi = np.asarray(x, dtype=np.int64)
            return int(self.a) * xi + int(self.b) * xi * xi
        xf = np.asarray(x, dtype=np.float64)
        return self.a * xf + self.b * xf * xf

    def scalar(self, x: int) -> float:
        return self.a * x + self.b * x * x


TOKENS = CostModel("tokens", 1, 0)
ATTENTION = CostModel("attention", 0, 1)


def parse_cost(spec: str | CostModel) -> CostModel:
    """Read ``tokens``, ``attention`` or ``A,B`` (two non-negative numbers, not both zero)."""
    if isinstance(spec, CostModel):
        return _check(spec)
    text = str(spec).strip().lower()
    if text == "tokens":
        return TOKENS
    if text == "attention":
        return ATTENTION
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != 2:
        raise InputError(f"--cost {spec!r}: use tokens, attention, or two numbers A,B for f(x) = A*x + B*x^2")
    try:
        a, b = (float(p) for p in parts)
    except ValueError:
        raise InputError(f"--cost {spec!r}: A and B must be numbers, e.g. --cost 1.2e-3,4e-7") from None
    return _check(CostModel("measured", a, b))


def _check(model: CostModel) -> CostModel:
    a, b = float(model.a), float(model.b)
    if not (math.isfinite(a) and math.isfinite(b)) or a < 0 or b < 0 or (a == 0 and b == 0):
        raise InputError(f"cost model A={a:g}, B={b:g}: A and B must be finite, non-negative and not both zero (padding must never make an item cheaper)")
    if max(a, b) > MAX_COST_COEFFICIENT:  # f(2^24) must stay a finite float, summed over a whole trace
        raise InputError(f"cost model A={a:g}, B={b:g}: A and B must be at most {MAX_COST_COEFFICIENT:g} (rescale the unit)")
    return model


@dataclass(frozen=True)
class StepTimeFit:
    """A measured cost model: ``seconds ~ intercept + A*L + B*L^2`` per step."""

    model: CostModel
    intercept: float
    r2: float
    n: int


def fit_step_times(lengths: Sequence[int] | np.ndarray, seconds: Sequence[float] | np.ndarray) -> StepTimeFit:
    """Fit ``A, B >= 0`` from measured (length, step seconds) pairs by least squares.

    The intercept (per-call overhead) is fitted too but dropped from the cost model,
    since it cancels in ``f(E) - f(L)``. Non-negativity keeps ``f`` non-decreasing,
    which the exact DP needs: the fit tries the full model and, if a coefficient
    comes out negative, the best of the models with that coefficient at zero.
    """
    x = np.asarray(lengths, dtype=np.float64)
    y = np.asarray(seconds, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise InputError("step times: lengths and seconds must be two lists of the same size")
    if x.size < 3:
        raise InputError(f"step times: {x.size} measurement(s); at least 3 (length, seconds) pairs are needed to fit A and B")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))) or np.any(x <= 0) or np.any(y < 0):
        raise InputError("step times: lengths must be positive and seconds non-negative finite numbers")
    if np.unique(x).size < 2:
        raise InputError("step times: all measurements have the same length; measure at least two lengths")
    scale = float(x.max())  # fit in scaled units for a well-conditioned design matrix
    xs = x / scale
    best: tuple[float, float, float, float] | None = None  # (sse, intercept, A, B)
    for use_a, use_b in ((True, True), (True, False), (False, True)):
        cols = [np.ones_like(xs)] + ([xs] if use_a else []) + ([xs * xs] if use_b else [])
        design = np.stack(cols, axis=1)
        coef, *_ = np.linalg.lstsq(design, y, rcond=None)
        c0 = float(coef[0])
        a = float(coef[1]) / scale if use_a else 0.0
        b = float(coef[-1]) / scale**2 if use_b else 0.0
        if a < 0 or b < 0 or (a == 0 and b == 0):
            continue
        sse = float(np.sum((design @ coef - y) ** 2))
        if best is None or sse < best[0]:
            best = (sse, c0, a, b)
    if best is None:
        raise InputError("step times: the step time does not grow with the length, so there is no padding cost to minimise")
    sse, c0, a, b = best
    total = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - sse / total if total > 0 else 1.0
    return StepTimeFit(CostModel("measured", a, b), c0, r2, int(x.size))


@dataclass(frozen=True)
class Score:
    """How a ladder does on a histogram: overheads in %, padding cost, out-of-range count."""

    tokens: float  # padded tokens / real tokens - 1, in %
    attention: float  # sum(bucket^2) / sum(length^2) - 1, in %
    cost: float  # sum of f(E) - f(L) under the cost model, in its units
    runtime: float  # sum of f(E): the compute the traffic costs, in the model's units
    beyond_last: int  # items longer than the last bucket: left out of the sums above


def assign(values: np.ndarray, edges: np.ndarray, fit: str) -> np.ndarray:
    """Index of the bucket each value goes to; ``len(edges)`` for values beyond the last.

    inclusive: the first edge ``>= L``. strict (NxD Inference's ``first_fit``): the first
    edge ``> L``; a length equal to the last edge still uses the last bucket.
    """
    edges = np.asarray(edges, dtype=np.int64)
    values = np.asarray(values, dtype=np.int64)
    if fit == Fit.INCLUSIVE:
        return np.asarray(np.searchsorted(edges, values, side="left"))
    idx: np.ndarray = np.asarray(np.searchsorted(edges, values, side="right"))
    on_last = values == edges[-1]
    idx[on_last] = edges.size - 1
    return idx


def _wsum(weights: np.ndarray, values: np.ndarray) -> float:
    """Weighted sum without BLAS: np.dot on a small vector can stall for tens of ms when a
    multi-threaded BLAS pool competes for busy cores, and the sum is cheap anyway."""
    return float(np.sum(weights * values))


def score(values: np.ndarray, counts: np.ndarray, edges: Sequence[int] | np.ndarray, fit: str, cost: CostModel) -> Score:
    """Score ``edges`` on a histogram (distinct ``values`` with ``counts``)."""
    e = np.asarray(edges, dtype=np.int64)
    v = np.asarray(values, dtype=np.int64)
    c = np.asarray(counts, dtype=np.float64)
    idx = assign(v, e, fit)
    inside = idx < e.size
    beyond = int(np.asarray(counts)[~inside].sum())
    v_in = v[inside].astype(np.float64)
    c_in = c[inside]
    padded = e[idx[inside]].astype(np.float64)
    real_tokens = _wsum(c_in, v_in)
    if real_tokens == 0:
        return Score(0.0, 0.0, 0.0, 0.0, beyond)
    tokens = 100.0 * (_wsum(c_in, padded) - real_tokens) / real_tokens
    real_sq = _wsum(c_in, v_in * v_in)
    attention = 100.0 * (_wsum(c_in, padded * padded) - real_sq) / real_sq
    f_padded = cost.f(padded)
    runtime = _wsum(c_in, f_padded)
    waste = _wsum(c_in, f_padded - cost.f(v_in))
    return Score(tokens, attention, waste, runtime, beyond)
