"""Shape buckets: provably optimal sequence-length buckets from a real length distribution.

Neuron compiles one graph per input shape, so variable-length traffic is padded up to
a few compiled lengths. :func:`propose_buckets` finds, for every bucket count k up to
K, the edges that minimise the total padding cost exactly (divide-and-conquer DP over
the histogram; see :mod:`.optimal`), scores the usual ladders on the same data
(:mod:`.baselines`), and emits ready-to-paste configs (:mod:`.configs`).
:func:`bucket_for` and :func:`pad_to_bucket` apply a ladder at runtime.
:func:`propose_decode_buckets` does the same for token generation (decode), with batch
buckets under continuous batching and the memory fit per tensor-parallel degree (issue 24).
"""

from __future__ import annotations

from neuronprobe.shape_buckets.costs import ATTENTION, TOKENS, CostModel, fit_step_times, parse_cost
from neuronprobe.shape_buckets.decode import propose_decode_buckets
from neuronprobe.shape_buckets.decode_trace import DecodeTrace, read_decode_trace
from neuronprobe.shape_buckets.propose import propose_buckets
from neuronprobe.shape_buckets.reading import LengthData, read_lengths, read_step_times
from neuronprobe.shape_buckets.runtime import BeyondLastBucket, bucket_for, pad_to_bucket

__all__ = [
    "ATTENTION",
    "TOKENS",
    "BeyondLastBucket",
    "CostModel",
    "DecodeTrace",
    "LengthData",
    "bucket_for",
    "fit_step_times",
    "pad_to_bucket",
    "parse_cost",
    "propose_buckets",
    "propose_decode_buckets",
    "read_decode_trace",
    "read_lengths",
    "read_step_times",
]
