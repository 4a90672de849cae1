"""Which token-generation bucket a decode step runs in, per serving stack, and what it costs.

Decode positions. A request with prompt P and output O produces its first token in
prefill; decode steps then run at attention lengths P+1, ..., P+O-1 (the prompt plus
the tokens generated so far), each once. The runtimes add the speculation length and
pick a bucket from that *required length* r:

- ``nxdi`` (NxD Inference, ``models/model_wrapper.py`` ``_get_seq_bucket`` at 4bcdc54b):
  r = length + speculation_length; the first bucket with r < bucket (strict); r equal to
  the largest bucket runs in it. Default ladder ``generate_buckets(128, max_length)``
  (``modules/autobucketing.py``). With batch buckets (``token_generation_batches``) the
  pick is ``_get_batch_and_seq_bucket``: the smallest (batch, seq) with batch >= n and
  r <= seq, so the sequence fit becomes inclusive there.
- ``vllm-neuron-nxdi`` (the older plugin's decode ladder at batch 1; SDK ``vllm-neuron/docs/design/vllm/decode-context-length-bucketing.md``
  and ``additional-config.md``): the smallest bucket >= ``max(num_computed_tokens) + 1 +
  num_speculative_tokens``, buckets multiples of 128 below ``max_model_len``, and a
  ``max_model_len`` graph always compiled as the fallback. ``num_computed_tokens`` counts
  the tokens already in the KV cache, L - 1 at a step of attention length L (the first
  decode step has the P prompt tokens computed and attends P+1), so here r = length +
  speculation with an inclusive fit, and the last edge is max_model_len.
- ``tnx`` (transformers-neuronx ``n_positions``): the first bucket >= r, r = length + speculation.

KV read per step is the bucket (every layer reads K and V up to the bucket), so padded
KV tokens are ``bucket - r`` where r = length + speculation (the tokens attended).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from neuronprobe.errors import InputError
from neuronprobe.shape_buckets.baselines import NXDI_MIN_BUCKET, nxdi_ladder
from neuronprobe.shape_buckets.costs import assign
from neuronprobe.vocabulary import Fit, ServingRuntime

# vllm-neuron: decode_context_length_buckets must be multiples of 128 (the NKI attention tile).
VLLM_BUCKET_MULTIPLE = 128


@dataclass(frozen=True)
class RuntimeRule:
    runtime: ServingRuntime
    fit: Fit
    multiple_of: int | None  # every edge but the last a multiple of this
    fallback: bool  # the last edge (max_model_len) is always compiled, whatever the ladder


RULES: dict[ServingRuntime, RuntimeRule] = {
    ServingRuntime.NXDI: RuntimeRule(ServingRuntime.NXDI, Fit.STRICT, None, False),
    ServingRuntime.VLLM_NEURON_NXDI: RuntimeRule(ServingRuntime.VLLM_NEURON_NXDI, Fit.INCLUSIVE, VLLM_BUCKET_MULTIPLE, True),
    ServingRuntime.TNX: RuntimeRule(ServingRuntime.TNX, Fit.INCLUSIVE, None, False),
}


def rule_for(runtime: str | ServingRuntime) -> RuntimeRule:
    try:
        return RULES[ServingRuntime(runtime)]
    except (ValueError, KeyError):
        if runtime == ServingRuntime.VLLM_NEURON:
            raise InputError(
                "--runtime vllm-neuron plans the current plugin's three ladders: use propose_serving_plan (CLI: give "
                "--max-num-batched-tokens, --max-num-seqs and --max-model-len); the older decode-only model is vllm-neuron-nxdi"
            ) from None
        raise InputError(f"--runtime {runtime!r}: use {', '.join(r.value for r in RULES)} (or vllm-neuron)") from None


def required_length(position: int, runtime: str | ServingRuntime, speculation_length: int = 0) -> int:
    """The length a runtime fits into its buckets for a decode step at attention length ``position``."""
    rule_for(runtime)  # checks the name
    return int(position) + int(speculation_length)


def decode_bucket(position: int, edges: list[int], runtime: str | ServingRuntime, speculation_length: int = 0) -> int | None:
    """The token-generation bucket a decode step at ``position`` runs in; None past the last edge."""
    rule = rule_for(runtime)
    r = required_length(position, runtime, speculation_length)
    idx = int(assign(np.array([r]), np.asarray(edges, dtype=np.int64), rule.fit)[0])
    return int(edges[idx]) if idx < len(edges) else None


def position_histogram(prompts: np.ndarray, outputs: np.ndarray, shift: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Distinct required lengths of every decode step and how many steps have each.

    Request i contributes one step at each of P_i+1+shift .. P_i+O_i-1+shift. Built with
    two bincounts and a cumulative sum: O(requests + longest length), never one entry per step.
    """
    p = np.asarray(prompts, dtype=np.int64)
    o = np.asarray(outputs, dtype=np.int64)
    has = o >= 2
    lo = p[has] + 1 + shift
    hi = p[has] + o[has] - 1 + shift  # inclusive
    if lo.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    top = int(hi.max())
    diff = np.bincount(lo, minlength=top + 2) - np.bincount(hi + 1, minlength=top + 2)
    counts = np.cumsum(diff)[: top + 1]
    values = np.flatnonzero(counts)
    return values.astype(np.int64), counts[values].astype(np.int64)


def default_ladder(runtime: ServingRuntime, top: int) -> list[int]:
    """The ladder the runtime compiles when the user gives no decode buckets."""
    if runtime == ServingRuntime.NXDI:
        return nxdi_ladder(top)  # generate_buckets(128, max_length)
    # vllm-neuron: decode_context_length_buckets None -> only the max_model_len graph;
    # transformers-neuronx: a single n_positions.
    return [top]


def powers_of_two(top: int) -> list[int]:
    """128, 256, ... below the last edge, then the last edge."""
    edges = []
    e = NXDI_MIN_BUCKET
    while e < top:
        edges.append(e)
        e *= 2
    return [*edges, top]


@dataclass(frozen=True)
class StepModel:
    """Modelled time of one decode step for one sequence at bucket E: per_step + per_token*E + per_token2*E^2.

    From a model config: bytes read per core (weights once per step, KV per token), a
    memory-bound step. From ``--step-times``: seconds fitted on measured decode steps.
    """

    per_step: float
    per_token: float
    per_token2: float
    units: str
    words: str

    def at(self, e: np.ndarray) -> np.ndarray:
        x = np.asarray(e, dtype=np.float64)
        return self.per_step + self.per_token * x + self.per_token2 * x * x

    def params(self) -> dict[str, float]:
        return {"per_step": float(self.per_step), "per_token": float(self.per_token), "per_token2": float(self.per_token2)}


@dataclass(frozen=True)
class LadderScore:
    kv_overhead: float  # %
    step_overhead: float | None  # %
    beyond_last: int
    padded_tokens: float
    real_tokens: float


def score_ladder(required: np.ndarray, counts: np.ndarray, edges: list[int] | np.ndarray, rule: RuntimeRule, step: StepModel | None = None) -> LadderScore:
    """Padded vs real KV reads (and modelled step time) of the decode steps in ``edges``."""
    v = np.asarray(required, dtype=np.int64)
    c = np.asarray(counts, dtype=np.float64)
    e = np.asarray(edges, dtype=np.int64)
    idx = assign(v, e, rule.fit)
    inside = idx < e.size
    beyond = int(np.asarray(counts)[~inside].sum())
    real = v[inside].astype(np.float64)
    padded = e[idx[inside]].astype(np.float64)
    w = c[inside]
    real_sum = float(np.sum(w * real))
    pad_sum = float(np.sum(w * padded))
    kv = 100.0 * (pad_sum - real_sum) / real_sum if real_sum else 0.0
    step_pct = None
    if step is not None and real_sum:
        base = float(np.sum(w * step.at(real)))
        step_pct = 100.0 * (float(np.sum(w * step.at(padded))) - base) / base
    return LadderScore(round(kv, 4), None if step_pct is None else round(step_pct, 4), beyond, pad_sum, real_sum)
