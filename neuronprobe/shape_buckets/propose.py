"""``propose_buckets``: the optimal ladder, the whole curve, the baselines and a held-out check.

Choosing k. Every k from 1 to ``max_buckets`` is solved exactly (one DP run). Without
a compile cost the answer is the largest k (more buckets never pad more). With
``compile_seconds`` the answer is the k that minimises

    objective(k) = runtime(k) + compile_weight * compile_seconds * k

where ``runtime(k)`` is the compute the traffic in the file costs when padded to the
k-bucket ladder, ``sum over items of f(bucket)``, in the cost model's units (tokens for
``tokens``, tokens^2 for ``attention``, seconds for a measured ``A,B`` fitted from step
times in seconds), and ``compile_weight`` is how many of those units one second of
compiling is worth. With a measured model in seconds and a file holding the traffic
served between two compiles, ``compile_weight = 1`` weighs both in seconds; if the file
is one hour of traffic and you compile once a day, use ``1/24``. Ties go to the smaller k.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from neuronprobe.defaults import DEFAULT_COMPILE_WEIGHT, DEFAULT_FIT, DEFAULT_MAX_BUCKETS, MAX_BUCKETS, MAX_SECONDS, MIN_MAX_BUCKETS
from neuronprobe.errors import InputError
from neuronprobe.limits import MAX_BUCKET_LENGTH, MAX_COST_COEFFICIENT, check_range
from neuronprobe.report.model import Baseline, BucketProposal, CurvePoint, Histogram, Holdout, HoldoutScore, Overhead
from neuronprobe.shape_buckets.baselines import all_baselines, nxdi_ladder, vllm_doubling
from neuronprobe.shape_buckets.configs import render_configs
from neuronprobe.shape_buckets.costs import CostModel, Score, StepTimeFit, parse_cost, score
from neuronprobe.shape_buckets.optimal import Solution, candidate_edges, check_fit, round_up, solve
from neuronprobe.shape_buckets.reading import LengthData, validate_lengths
from neuronprobe.vocabulary import Fit

# The report embeds the histogram (HTML reports, notebooks): above this many distinct
# lengths it is stored binned, so the JSON stays a few tens of KB.
HISTOGRAM_MAX_DISTINCT = 2000
HISTOGRAM_BINS = 1000


def _unpacked(lengths: Any, timestamps: Any, source: str) -> tuple[Any, Any, str]:
    """The lengths, their timestamps and their source's name, from ``read_lengths``' LengthData or a plain sequence."""
    if not isinstance(lengths, LengthData):
        return lengths, timestamps, source
    if timestamps is None:
        timestamps = lengths.timestamps
    return lengths.lengths, timestamps, source or lengths.source + (f" column {lengths.column}" if lengths.column else "")


def _held_out(arr: np.ndarray, timestamps: Any, holdout: float | None, notes: list[str]) -> tuple[np.ndarray, np.ndarray | None, Holdout | None]:
    """The items the ladder is fitted on, those held out to score it (None without ``holdout``), and what was held out."""
    if holdout is None:
        return arr, None, None
    fit_part, test_part, order = _split(arr, timestamps, holdout)
    notes.append(
        f"held out the last {holdout:.0%} of the items ({order}): edges, curve and baselines are fitted on the "
        f"first {fit_part.size} items; the holdout section scores them on the other {test_part.size}"
    )
    return fit_part, test_part, Holdout(fraction=float(holdout), order=order, fit_lengths=int(fit_part.size), test_lengths=int(test_part.size))


def _baseline(name: str, edges: list[int], values: np.ndarray, counts: np.ndarray, fit: str, model: CostModel, scores: list[Any], solved: int) -> Baseline:
    """A fixed ladder scored on the same lengths, next to the optimum with as many graphs."""
    sc = score(values, counts, edges, fit, model)
    return Baseline(
        name=name,
        edges=edges,
        overhead=_overhead(sc),
        graphs=len(edges),
        beyond_last=sc.beyond_last,
        cost=sc.cost,
        optimal_at_same_k=_overhead(scores[min(len(edges), solved) - 1]),
    )


def _fitting(values: np.ndarray, counts: np.ndarray, top: int, where: str, notes: list[str]) -> tuple[np.ndarray, int]:
    """Which distinct lengths fit under the last edge ``top``, and how many items do not (never truncated silently)."""
    inside = values <= top
    if not inside.any():
        raise InputError(f"every length in {where} is longer than --max-len {top}; nothing fits a bucket")
    beyond, total = int(counts[~inside].sum()), int(counts.sum())
    if beyond:
        notes.append(
            f"{beyond} of {total} items ({100 * beyond / total:.2f}%) are longer than the last bucket "
            f"{top}: no ladder can serve them; they are counted in beyond_last and left out of the overheads"
        )
    return inside, beyond


def propose_buckets(
    lengths: Sequence[int] | np.ndarray | LengthData,
    max_buckets: int = DEFAULT_MAX_BUCKETS,
    *,
    cost: str | CostModel | StepTimeFit = "tokens",
    max_len: int | None = None,
    multiple_of: int | None = None,
    min_bucket: int | None = None,
    fit: str = DEFAULT_FIT,
    compile_seconds: float | None = None,
    compile_weight: float = DEFAULT_COMPILE_WEIGHT,
    holdout: float | None = None,
    timestamps: Sequence[Any] | np.ndarray | None = None,
    source: str = "",
) -> BucketProposal:
    """Propose the bucket edges that minimise padding cost for ``lengths``.

    ``lengths``: positive integers (a list, array, pandas Series, or the
    :class:`~neuronprobe.shape_buckets.reading.LengthData` from ``read_lengths``).
    ``max_buckets``: the most buckets (K); the curve covers every k <= K.
    ``cost``: ``"tokens"``, ``"attention"``, ``"A,B"``, a :class:`CostModel`, or the
    :class:`StepTimeFit` from ``fit_step_times`` (measured step times).
    ``max_len``: the last edge (default: the longest length, rounded up to
    ``multiple_of`` and at least ``min_bucket``); longer lengths are counted in
    ``beyond_last`` and left out of the cost, never truncated silently.
    ``multiple_of``: every edge is a multiple of this (tile size, e.g. 128).
    ``min_bucket``: the smallest allowed edge (NxD Inference's default is 128).
    ``fit``: ``"inclusive"`` (first edge >= length) or ``"strict"`` (first edge > length,
    NxD Inference's runtime rule).
    ``compile_seconds``/``compile_weight``: choose k by runtime + compile cost (module docstring).
    ``holdout``: the share of items (in time order when ``timestamps`` are known, else in
    the given order) held out: the ladder is fitted on the rest and scored on it.
    Raises :class:`~neuronprobe.errors.InputError` for unusable input.
    """
    data, timestamps, source = _unpacked(lengths, timestamps, source)
    where = source or "lengths"
    arr = validate_lengths(data.to_numpy() if hasattr(data, "to_numpy") else data, where)
    model = parse_cost(cost.model if isinstance(cost, StepTimeFit) else cost)
    _check_options(max_buckets, fit, multiple_of, min_bucket, compile_seconds, compile_weight, holdout, max_len)

    notes: list[str] = []
    if isinstance(cost, StepTimeFit):
        notes.append(
            f"cost fitted from {cost.n} step times: f(x) = {cost.model.a:.4g}*x + {cost.model.b:.4g}*x^2 seconds "
            f"(R^2 = {cost.r2:.3f}; the per-call {cost.intercept:.4g} s cancels out of padding)"
        )
    fit_part, test_part, holdout_info = _held_out(arr, timestamps, holdout, notes)

    values, counts = np.unique(fit_part, return_counts=True)
    top = _max_len(int(values[-1]), max_len, multiple_of, min_bucket)
    inside, beyond = _fitting(values, counts, top, where, notes)
    v_in, c_in = values[inside], counts[inside]
    cands = candidate_edges(v_in, top, fit, multiple_of, min_bucket)
    m = int(cands.edges.size)
    k_req = int(max_buckets)
    if k_req > m:
        notes.append(f"--max-buckets {k_req} is more than the {m} distinct useful edge(s) under these constraints ({v_in.size} distinct lengths); using {m}")
    k_cap = min(k_req, m)
    # Solve far enough to give the optimum at every fixed ladder's graph count too.
    k_solve = min(m, max(k_cap, len(nxdi_ladder(top)), len(vllm_doubling(top))))
    solutions = solve(v_in, c_in, cands, model, k_solve)
    scores = [score(v_in, c_in, s.edges, fit, model) for s in solutions]

    curve = [CurvePoint(k=s.k, edges=s.edges, overhead=_overhead(sc), cost=s.cost) for s, sc in zip(solutions[:k_cap], scores[:k_cap], strict=False)]
    chosen_idx, chosen_by = _choose(solutions[:k_cap], scores[:k_cap], compile_seconds, compile_weight, curve)
    if compile_seconds is not None:
        notes.append(
            f"k = {chosen_idx + 1} minimises runtime + {compile_weight:g} x {compile_seconds:g} s x k "
            f"(runtime in {_units(model)}; see the curve's objective column)"
        )
    chosen: Solution = solutions[chosen_idx]
    chosen_score = scores[chosen_idx]

    baselines = [
        _baseline(name, edges, values, counts, fit, model, scores, len(solutions)) for name, edges in all_baselines(v_in, c_in, chosen.k, top, fit, multiple_of)
    ]

    if holdout_info is not None and test_part is not None:
        _score_holdout(holdout_info, test_part, chosen.edges, baselines, fit, model)

    hist, hist_note = length_histogram(values, counts)
    if hist_note:
        notes.append(hist_note)
    return BucketProposal(
        edges=chosen.edges,
        k=chosen.k,
        cost_model=model.name,
        overhead=_overhead(chosen_score),
        cost=chosen.cost,
        fit=Fit(fit),
        max_len=top,
        curve=curve,
        baselines=baselines,
        beyond_last=beyond,
        n_lengths=int(fit_part.size),
        n_distinct=int(values.size),
        notes=notes,
        configs=render_configs(chosen.edges, fit),
        histogram=hist,
        holdout=holdout_info,
        cost_params=model.params(),
        max_buckets=k_req,
        multiple_of=multiple_of,
        min_bucket=min_bucket,
        compile_seconds=compile_seconds,
        compile_weight=float(compile_weight),
        chosen_by=chosen_by,
        source=source,
    )


def _check_options(
    max_buckets: int,
    fit: str,
    multiple_of: int | None,
    min_bucket: int | None,
    compile_seconds: float | None,
    compile_weight: float,
    holdout: float | None,
    max_len: int | None,
) -> None:
    if isinstance(max_buckets, bool) or int(max_buckets) != max_buckets or max_buckets < MIN_MAX_BUCKETS:
        raise InputError(f"--max-buckets {max_buckets}: use a whole number >= {MIN_MAX_BUCKETS}")
    if max_buckets > MAX_BUCKETS:
        raise InputError(
            f"--max-buckets {max_buckets}: at most {MAX_BUCKETS} (each bucket is a compiled graph; "
            "the exact solver takes about 10 ms per bucket on 2,000 distinct lengths)"
        )
    check_fit(fit)
    if multiple_of is not None and (int(multiple_of) != multiple_of or multiple_of < 1):
        raise InputError(f"--multiple-of {multiple_of}: use a whole number >= 1")
    if min_bucket is not None and (int(min_bucket) != min_bucket or min_bucket < 1):
        raise InputError(f"--min-bucket {min_bucket}: use a whole number >= 1")
    if max_len is not None and (int(max_len) != max_len or max_len < 1):
        raise InputError(f"--max-len {max_len}: use a whole number >= 1")
    for value, flag in ((max_len, "--max-len"), (multiple_of, "--multiple-of"), (min_bucket, "--min-bucket")):
        check_range(value, flag, 1, MAX_BUCKET_LENGTH)  # a documented ceiling (limits.py): 2^24 tokens
    if compile_seconds is not None and not (compile_seconds >= 0 and np.isfinite(compile_seconds)):
        raise InputError(f"--compile-seconds {compile_seconds}: use a number of seconds >= 0")
    if not (compile_weight >= 0 and np.isfinite(compile_weight)):
        raise InputError(f"--compile-weight {compile_weight}: use a number >= 0")
    # Ceilings: 9.2e18 s of compile per graph, or a weight of 1e308, made every k's objective infinite (k = 1 by accident).
    check_range(compile_seconds, "--compile-seconds", 0, MAX_SECONDS, whole=False)
    check_range(compile_weight, "--compile-weight", 0, MAX_COST_COEFFICIENT, whole=False)
    if holdout is not None and not 0 < holdout < 1:
        raise InputError(f"--holdout {holdout}: use a fraction between 0 and 1, e.g. 0.5")


def _max_len(observed: int, max_len: int | None, multiple_of: int | None, min_bucket: int | None) -> int:
    step = multiple_of or 1
    if max_len is not None:
        if max_len % step:
            raise InputError(f"--max-len {max_len} is not a multiple of --multiple-of {step}; use {int(round_up(max_len, step))}")
        if min_bucket is not None and max_len < min_bucket:
            raise InputError(f"--max-len {max_len} is below --min-bucket {min_bucket}")
        return int(max_len)
    return int(round_up(max(observed, min_bucket or 1), step))


def _split(arr: np.ndarray, timestamps: Any, fraction: float) -> tuple[np.ndarray, np.ndarray, str]:
    if timestamps is not None:
        stamps = np.asarray(timestamps)
        if stamps.shape[0] != arr.size:
            raise InputError(f"timestamps: {stamps.shape[0]} times for {arr.size} lengths; give one time per length")
        order = np.argsort(stamps, kind="stable")
        arr = arr[order]
        how = "time order"
    else:
        how = "file order (no timestamp column)"
    n_test = round(arr.size * fraction)
    n_fit = arr.size - n_test
    if n_fit < 1 or n_test < 1:
        raise InputError(f"--holdout {fraction}: {arr.size} item(s) cannot be split into a fitting part and a held-out part")
    return arr[:n_fit], arr[n_fit:], how


def _choose(
    solutions: list[Solution],
    scores: list[Score],
    compile_seconds: float | None,
    compile_weight: float,
    curve: list[CurvePoint],
) -> tuple[int, str]:
    if compile_seconds is None:
        return len(solutions) - 1, "max_buckets"
    per_graph = compile_weight * compile_seconds
    objectives = [sc.runtime + per_graph * s.k for s, sc in zip(solutions, scores, strict=False)]
    for point, obj in zip(curve, objectives, strict=False):
        point.objective = obj
    best = min(range(len(objectives)), key=lambda i: (objectives[i], i))
    return best, "runtime+compile"


def _overhead(sc: Score) -> Overhead:
    return Overhead(tokens=round(sc.tokens, 4), attention=round(sc.attention, 4))


def _units(model: CostModel) -> str:
    return {"tokens": "tokens", "attention": "tokens^2"}.get(model.name, "the measured step-time units")


def _score_holdout(holdout: Holdout, test: np.ndarray, edges: list[int], baselines: list[Baseline], fit: str, model: CostModel) -> None:
    """Score the proposed edges and every baseline on the held-out lengths, into ``holdout``."""
    values, counts = np.unique(test, return_counts=True)
    mine = score(values, counts, edges, fit, model)
    holdout.overhead = _overhead(mine)
    holdout.beyond_last = mine.beyond_last
    for b in baselines:
        s = score(values, counts, b.edges, fit, model)
        holdout.baselines[b.name] = HoldoutScore(tokens=round(s.tokens, 4), attention=round(s.attention, 4), beyond_last=s.beyond_last)


def length_histogram(values: np.ndarray, counts: np.ndarray) -> tuple[Histogram, str]:
    """Distinct values and counts; binned (upper bin edges) above HISTOGRAM_MAX_DISTINCT values."""
    if values.size <= HISTOGRAM_MAX_DISTINCT:
        return Histogram(values=values.tolist(), counts=counts.tolist()), ""
    lo, hi = int(values[0]), int(values[-1])
    width = max(1, -(-(hi - lo + 1) // HISTOGRAM_BINS))
    bin_index = (values - lo) // width
    summed = np.bincount(bin_index, weights=counts).astype(np.int64)
    nonzero = np.flatnonzero(summed)
    uppers = lo + (nonzero + 1) * width - 1
    note = (
        f"histogram binned: {values.size} distinct lengths stored as {nonzero.size} bins of width {width} "
        "(values are each bin's upper end); the optimisation used the exact lengths"
    )
    return Histogram(values=uppers.tolist(), counts=summed[nonzero].tolist(), bin_width=int(width)), note
