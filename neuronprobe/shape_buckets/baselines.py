"""The ladders people use today, built from the same data, to score against the optimum.

- ``nxd-inference``: NxD Inference's ``generate_buckets(128, max)``: powers of two from
  128 up to (not including) ``2**round(log2(max))``, then the max itself.
- ``vllm-doubling``: vLLM's TPU/XLA token paddings: 16, 32, 64, ... up to the first
  power of two ``>= max``.
- ``single-max``: one compiled length, the max (optimum-neuron's static export;
  NxD Inference with bucketing off).
- ``uniform``: k edges evenly spaced up to the max.
- ``quantiles``: k equal-frequency edges (the length at quantile i/k), the last the max.
"""

from __future__ import annotations

import math

import numpy as np

from neuronprobe.defaults import DEFAULT_FIT
from neuronprobe.shape_buckets.optimal import round_up
from neuronprobe.vocabulary import Fit

# NxD Inference's default smallest bucket (modules/autobucketing.py generate_buckets
# callers use min_length=128 for context encoding and token generation).
NXDI_MIN_BUCKET = 128
# vLLM's smallest token padding on TPU/XLA (MIN_TOKEN_BUCKET / _get_token_paddings).
VLLM_MIN_BUCKET = 16

BASELINE_NAMES: tuple[str, ...] = ("nxd-inference", "vllm-doubling", "single-max", "uniform", "quantiles")


def nxdi_ladder(max_len: int, min_length: int = NXDI_MIN_BUCKET) -> list[int]:
    """NxD Inference's automatic buckets (the same rule as its ``generate_buckets``)."""
    if max_len <= min_length:
        return [max_len]
    low = int(math.log2(min_length))
    high = round(math.log2(max_len))  # rounding avoids a bucket just below the max
    return [2**i for i in range(low, high)] + [max_len]


def vllm_doubling(max_len: int, start: int = VLLM_MIN_BUCKET) -> list[int]:
    """Doubling from ``start`` until a bucket reaches ``max_len``."""
    edges = [start]
    while edges[-1] < max_len:
        edges.append(edges[-1] * 2)
    return edges


def single_max(max_len: int) -> list[int]:
    return [max_len]


def uniform(max_len: int, k: int, multiple_of: int | None = None) -> list[int]:
    """``ceil(max * i / k)`` for i = 1..k (rounded up to ``multiple_of``), the last the max."""
    step = multiple_of or 1
    edges = {int(round_up(-(-max_len * i // k), step)) for i in range(1, k)}
    return [*sorted(e for e in edges if 0 < e < max_len), max_len]


def quantiles(
    values: np.ndarray,
    counts: np.ndarray,
    k: int,
    max_len: int,
    fit: str = DEFAULT_FIT,
    multiple_of: int | None = None,
) -> list[int]:
    """Equal-frequency edges: the length at cumulative share i/k covers that share."""
    v = np.asarray(values, dtype=np.int64)
    cum = np.cumsum(np.asarray(counts, dtype=np.int64))
    total = int(cum[-1])
    targets = [-(-total * i // k) for i in range(1, k)]  # the item at rank ceil(n*i/k)
    at = v[np.searchsorted(cum, targets, side="left")]
    edges = at + (1 if fit == Fit.STRICT else 0)
    if multiple_of:
        edges = round_up(edges, multiple_of)
    keep = sorted({int(e) for e in edges if 0 < e < max_len})
    return [*keep, max_len]


def all_baselines(
    values: np.ndarray,
    counts: np.ndarray,
    k: int,
    max_len: int,
    fit: str = DEFAULT_FIT,
    multiple_of: int | None = None,
) -> list[tuple[str, list[int]]]:
    """Each baseline's name and edges, in :data:`BASELINE_NAMES` order; uniform and quantiles use k buckets
    (the proposal's k, so they compile as many graphs)."""
    return [
        ("nxd-inference", nxdi_ladder(max_len)),
        ("vllm-doubling", vllm_doubling(max_len)),
        ("single-max", single_max(max_len)),
        ("uniform", uniform(max_len, k, multiple_of)),
        ("quantiles", quantiles(values, counts, k, max_len, fit, multiple_of)),
    ]
