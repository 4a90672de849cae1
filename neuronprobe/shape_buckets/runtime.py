"""Runtime helpers: which bucket a length runs in, and padding a tensor up to it.

The fit rule matters: NxD Inference's ``first_fit`` picks the first bucket strictly
greater than the length (``strict``), while transformers-neuronx, vLLM and JetStream
pick the first bucket that is at least the length (``inclusive``). Under both rules a
length equal to the last bucket uses the last bucket. A length beyond the last bucket
has no compiled graph: these helpers raise rather than truncate.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from neuronprobe.defaults import DEFAULT_FIT
from neuronprobe.errors import InputError
from neuronprobe.shape_buckets.costs import assign
from neuronprobe.shape_buckets.optimal import check_fit


class BeyondLastBucket(InputError):
    """A length longer than the last bucket: no compiled graph can take it."""


def check_edges(edges: Sequence[int] | np.ndarray, flag: str = "bucket edges") -> np.ndarray:
    """Edges as an int64 array; an InputError (naming ``flag``) unless they are positive, sorted, unique and within the ceiling."""
    from neuronprobe.limits import MAX_BUCKET_LENGTH

    try:
        values = [int(e) for e in edges]
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"bucket edges {list(edges)!r} must be integers") from None
    if any(v > MAX_BUCKET_LENGTH for v in values):  # a bucket of 9.2e18 tokens was accepted; 10^23 was an OverflowError
        raise InputError(f"{flag}: an edge above {MAX_BUCKET_LENGTH} tokens (neuronprobe's ceiling)")
    arr = np.asarray(values, dtype=np.int64)
    if arr.size == 0:
        raise InputError("bucket edges: the list is empty")
    if np.any(arr <= 0):
        raise InputError(f"bucket edges {arr.tolist()}: every edge must be a positive length")
    if np.any(np.diff(arr) <= 0):
        raise InputError(f"bucket edges {arr.tolist()}: edges must be sorted and unique")
    return arr


def bucket_for(length: int, edges: Sequence[int] | np.ndarray, fit: str = DEFAULT_FIT) -> int:
    """The compiled length a sequence of ``length`` runs in.

    ``inclusive``: the smallest edge ``>= length``. ``strict``: the smallest edge
    ``> length`` (a length equal to an edge moves up one bucket), except that a length
    equal to the last edge uses it. Raises :class:`BeyondLastBucket` past the last edge.
    """
    check_fit(fit)
    arr = check_edges(edges)
    n = int(length)
    if n != length or n < 0:
        raise InputError(f"length {length!r} is not a non-negative integer")
    idx = int(assign(np.array([n]), arr, fit)[0])
    if idx >= arr.size:
        raise BeyondLastBucket(f"length {n} is beyond the last bucket {int(arr[-1])}; compile a larger bucket or split the input")
    return int(arr[idx])


def pad_to_bucket(
    tensor: Any,
    edges: Sequence[int] | np.ndarray,
    dim: int = -1,
    value: float | int = 0,
    fit: str = DEFAULT_FIT,
) -> Any:
    """Pad ``tensor`` along ``dim`` with ``value`` up to its bucket (a torch tensor or numpy array).

    Padding goes on the right (the end of ``dim``), as NxD Inference's default
    ``padding_side="right"``. Returns a new tensor; a tensor already at its bucket
    length comes back unchanged. Raises :class:`BeyondLastBucket` when ``dim`` is
    longer than the last edge.
    """
    shape = tuple(tensor.shape)
    if not shape:
        raise InputError("pad_to_bucket: a 0-d tensor has no dimension to pad")
    axis = dim if dim >= 0 else len(shape) + dim
    if not 0 <= axis < len(shape):
        raise InputError(f"pad_to_bucket: dim {dim} is out of range for a tensor with {len(shape)} dimensions")
    length = shape[axis]
    target = bucket_for(length, edges, fit)
    extra = target - length
    if extra == 0:
        return tensor
    if isinstance(tensor, np.ndarray):
        widths = [(0, 0)] * len(shape)
        widths[axis] = (0, extra)
        return np.pad(tensor, widths, mode="constant", constant_values=value)
    import torch.nn.functional as F

    # F.pad takes (left, right) pairs starting from the last dimension.
    pads = [0, 0] * (len(shape) - 1 - axis) + [0, extra]
    return F.pad(tensor, pads, mode="constant", value=value)
