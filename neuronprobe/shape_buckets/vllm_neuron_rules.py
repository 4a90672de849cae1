"""vLLM Neuron's bucket rules: its default ladders, the checks its config passes, and how many graphs it compiles.

Sources (``aws-neuron/aws-neuron-sdk@81ce03ae``, ``vllm-neuron/docs/``):

- ``num_batched_tokens_buckets``: default powers of two from 128 up to
  ``min(max_num_batched_tokens, max_model_len)``; strictly ascending; the largest must equal that
  minimum (``design/vllm/neuron-scheduler.md`` "Bucket Configuration" and "Constraints",
  ``design/vllm/additional-config.md``). With segmented prefill they must equal
  ``kv_segment_size_buckets`` (``design/vllm/prefix-caching.md``, ``guides/reference-configuration.md``).
  Under sequence parallelism each must be divisible by the TP degree and larger than it
  (``design/parallelism/tensor_parallelism.md``, "SP validation" and "SP constraint"). Prefill is
  sequence-parallel under TP for every architecture (``design/framework/model_bringup.md``), so
  :func:`neuronprobe.propose_serving_plan` turns it on when ``tensor_parallel_size > 1`` unless told not to.
- ``num_seqs_buckets``: default powers of two from 1 to ``max_num_seqs``; strictly ascending,
  positive; the largest must equal ``max_num_seqs`` (``additional-config.md``).
- ``kv_segment_size_buckets``: values in {512, 1024, 2048, 4096, 8192}, divisible by ``block_size``
  (``reference-configuration.md``); one size only at present (``prefix-caching.md``, whose kernel
  constraints list {512, ..., 4096}: the report states that disagreement when 8192 is used).
- ``decode_context_length_buckets``: strictly ascending, each < ``max_model_len`` and divisible by
  128; a ``max_model_len`` graph is always compiled as the fallback (``design/vllm/decode-context-length-bucketing.md``).
- Graphs: one NEFF per prefill bucket and per (batch, context) decode pair
  (``design/compilation/index.md``: "Each bucket ... produces a separate NEFF";
  ``tensor_parallelism.md``: ``len(prefill_buckets) + len(decode_buckets)``); decode pairs =
  ``|num_seqs_buckets| x (|decode_context_length_buckets| + 1)``, x3 with EAGLE3 (target with
  spec, target without spec, draft; ``decode-context-length-bucketing.md`` "NEFF count").
  Prefill with EAGLE3: the target prefill and the draft's initial pass are both warmed up per
  prefill bucket (``design/speculation/speculative_decoding_design.md`` "Prefill warmup"), so x2:
  an assumption, the docs give no prefill count.

The default prefill ladder is settled by the code in ``neuron-scheduler.md`` ("Bucket
Configuration", ``get_default_num_batched_tokens_buckets``): powers of two from 128 while
``<= min(max_num_batched_tokens, max_model_len)``. When that minimum is not a power of two the
documented default stops below it and has no bucket for the longest chunks, so the default is
scored here with the minimum appended (the "largest must equal" rule custom buckets pass) and the
report says so (:func:`documented_default_prefill`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from neuronprobe.shape_buckets.vllm_neuron import PREFILL_MIN_BUCKET, SchedulerConfig

KV_SEGMENT_SIZES = (512, 1024, 2048, 4096, 8192)  # reference-configuration.md
CONTEXT_MULTIPLE = 128  # P_MAX, the NKI attention tile (decode-context-length-bucketing.md)
EAGLE_DECODE_FAMILIES = 3  # decode-context-length-bucketing.md "NEFF count"
EAGLE_PREFILL_FAMILIES = 2  # speculative_decoding_design.md "Prefill warmup" (assumption: 2 graphs per bucket)


@dataclass(frozen=True)
class Deployment:
    """The engine arguments and plugin options a plan is made for."""

    scheduler: SchedulerConfig
    tensor_parallel_size: int = 1
    sequence_parallel: bool = False
    kv_segment_size: int | None = None  # kv_segment_size_buckets = [this] (segmented prefill)

    @property
    def eagle(self) -> bool:
        return self.scheduler.num_speculative_tokens > 0


def _doubling(start: int, top: int) -> list[int]:
    out = []
    e = start
    while e < top:
        out.append(e)
        e *= 2
    return [*out, top]


def documented_default_prefill(top: int) -> list[int]:
    """``get_default_num_batched_tokens_buckets(top)`` exactly as neuron-scheduler.md prints it: 128, 256, ... while <= top."""
    out: list[int] = []
    cur = PREFILL_MIN_BUCKET
    while cur <= top:
        out.append(cur)
        cur *= 2
    return out


def default_prefill_buckets(dep: Deployment) -> list[int]:
    """num_batched_tokens_buckets when the user gives none (neuron-scheduler.md ``get_default_num_batched_tokens_buckets``)."""
    top = dep.scheduler.prefill_top
    if dep.kv_segment_size is not None:
        return [dep.kv_segment_size]
    if top <= PREFILL_MIN_BUCKET:
        return [top]
    return _doubling(PREFILL_MIN_BUCKET, top)


def default_batch_buckets(dep: Deployment) -> list[int]:
    """num_seqs_buckets when the user gives none: powers of two from 1, ending with max_num_seqs."""
    return _doubling(1, dep.scheduler.max_num_seqs)


def graph_count(dep: Deployment, prefill: list[int], batch: list[int], context: list[int]) -> tuple[int, int]:
    """(prefill graphs, decode graphs) the runtime compiles; ``context`` are the explicit context buckets (the fallback is added)."""
    fp = EAGLE_PREFILL_FAMILIES if dep.eagle else 1
    fd = EAGLE_DECODE_FAMILIES if dep.eagle else 1
    return len(prefill) * fp, len(batch) * (len(context) + 1) * fd


def check_neuron_config(cfg: dict[str, Any], dep: Deployment) -> list[str]:
    """Every rule the plugin checks on ``additional_config["neuron_config"]`` that ``cfg`` breaks (empty: it passes)."""
    s = dep.scheduler
    errors: list[str] = []

    def ints(name: str) -> list[int] | None:
        v = cfg.get(name)
        if v is None:
            return None
        if not isinstance(v, list) or not v or not all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in v):
            errors.append(f"{name}: a non-empty list of positive whole numbers")
            return None
        if any(b <= a for a, b in itertools.pairwise(v)):
            errors.append(f"{name} {v}: must be strictly ascending")
        return list(v)

    tokens = ints("num_batched_tokens_buckets")
    seqs = ints("num_seqs_buckets")
    segs = ints("kv_segment_size_buckets")
    ctx = ints("decode_context_length_buckets")
    if tokens is not None:
        if tokens[-1] != s.prefill_top:
            errors.append(f"num_batched_tokens_buckets: the largest ({tokens[-1]}) must equal min(max_num_batched_tokens, max_model_len) = {s.prefill_top}")
        if dep.sequence_parallel:
            tp = dep.tensor_parallel_size
            bad = [t for t in tokens if t % tp or t <= tp]
            if bad:
                errors.append(f"num_batched_tokens_buckets {bad}: under sequence parallelism each must be divisible by and larger than the TP degree {tp}")
    if seqs is not None and seqs[-1] != s.max_num_seqs:
        errors.append(f"num_seqs_buckets: the largest ({seqs[-1]}) must equal max_num_seqs = {s.max_num_seqs}")
    if segs is not None:
        if len(segs) != 1:
            errors.append(f"kv_segment_size_buckets {segs}: one segment size only at present")
        bad = [x for x in segs if x not in KV_SEGMENT_SIZES or x % s.block_size]
        if bad:
            errors.append(f"kv_segment_size_buckets {bad}: each must be one of {list(KV_SEGMENT_SIZES)} and divisible by block_size {s.block_size}")
        if tokens != segs:
            errors.append(f"num_batched_tokens_buckets must equal kv_segment_size_buckets {segs} with segmented prefill")
    if ctx is not None:
        bad = [c for c in ctx if c >= s.max_model_len or c % CONTEXT_MULTIPLE]
        if bad:
            errors.append(f"decode_context_length_buckets {bad}: each must be below max_model_len {s.max_model_len} and divisible by {CONTEXT_MULTIPLE}")
    return errors
