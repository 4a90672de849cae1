"""vLLM Neuron's scheduler, replayed step by step on a timed trace (issue 37.1).

The rules, each from the SDK docs (``aws-neuron/aws-neuron-sdk@81ce03ae``, ``vllm-neuron/docs/``):

- **Prefill and decode never share a step** (``design/vllm/neuron-scheduler.md``, "Prefill/Decode
  Separation", Step 7): a step is either one prefill chunk or one decode batch.
- **One prefill at a time** (``max_prefills_per_batch = 1``, "Current Limitation"), FIFO order
  (the holdback queue stops at the first request it cannot admit).
- **Admission** (``can_schedule``): a waiting request is admitted when fewer than ``max_num_seqs``
  requests are running, no running request is still in prefill, and (the KV-capacity fix,
  "Solution") fewer than ``_max_kv_concurrent`` are running.
- **Prefill priority**: when a request is admitted, the running decodes are hidden for that step
  (Step 3, branch 2); an ongoing chunked prefill keeps the step until its prompt is computed (branch 1).
- **Chunked prefill**: a prompt is computed in chunks of at most ``min(max_num_batched_tokens,
  max_model_len)`` tokens ("max_num_batched_tokens", and the note under "Bucket Configuration");
  each chunk is padded to the smallest ``num_batched_tokens_buckets`` entry >= its tokens (Step 6).
- **Prefix caching** (``design/vllm/prefix-caching.md``; on by default, ``guides/reference-configuration.md``):
  cached tokens are block-aligned; the prefill computes only the rest. vLLM v1 always recomputes the
  last prompt token, so at most ``floor((P - 1) / block_size) * block_size`` tokens come from the cache
  (an assumption from vLLM's ``KVCacheManager.get_computed_blocks``; the Neuron docs do not say).
- **Decode**: every running request past its prompt decodes one token per step; the batch is
  padded to the smallest ``num_seqs_buckets`` entry >= its size (model runner), and with
  ``decode_context_length_buckets`` the step runs in the smallest context bucket >=
  ``max(num_computed_tokens) + 1 + num_speculative_tokens`` over the batch, else the
  ``max_model_len`` graph (``design/vllm/decode-context-length-bucketing.md``).

- **First token from prefill**: the prefill graph that completes the prompt fills the KV cache and
  generates the first token (``design/multimodal/on_device_encoder_cache.md``, the request
  lifecycle figure), so a request with O output tokens then runs O - 1 decode steps.

Assumptions where the docs are silent (each is repeated in the report):
- KV capacity: ``_max_kv_concurrent`` (KV blocks / ``max_model_len``, "Deadlock Prevention") depends on
  the device's memory; unless given it is taken as ``max_num_seqs``.
- Speculative decoding: the draft acceptance rate is not modelled; a step yields one token per
  request (an upper bound on the steps); the speculative tokens only raise the context needed.
- ``max_model_len``: a prompt of ``max_model_len`` tokens or more is refused by vLLM (counted,
  left out); generation stops at ``max_model_len`` tokens in all.
- The clock: a decode step lasts ``decode_step_seconds``, a prefill chunk ``tokens /
  prefill_tokens_per_second``. They only decide who is waiting when; the replay does not depend
  on the buckets, so every ladder is scored on the same steps.

Consecutive decode steps with the same batch are stored as one *run* (the context grows by one
per step), so a trace of 10^6 requests replays in O(events log n), not O(tokens).
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from neuronprobe.errors import InputError

# neuron-scheduler.md "Bucket Configuration": default prefill buckets start at 128.
PREFILL_MIN_BUCKET = 128
# decode_groups' (batch, context) table: at most this many int64 cells (256 MiB) before listing steps instead.
GROUP_TABLE_CELLS = 32 * 1024 * 1024
# reference-configuration.md: vLLM's block_size default in vLLM Neuron.
DEFAULT_BLOCK_SIZE = 32


@dataclass(frozen=True)
class SchedulerConfig:
    """vLLM's own option names (engine arguments) that shape the schedule."""

    max_num_batched_tokens: int
    max_num_seqs: int
    max_model_len: int
    num_speculative_tokens: int = 0
    block_size: int = DEFAULT_BLOCK_SIZE
    max_kv_concurrent: int | None = None  # the scheduler's _max_kv_concurrent; None: max_num_seqs

    @property
    def prefill_top(self) -> int:
        """The largest prefill chunk: min(max_num_batched_tokens, max_model_len) (neuron-scheduler.md)."""
        return min(self.max_num_batched_tokens, self.max_model_len)

    def check(self) -> None:
        for name, value, low in (
            ("--max-num-batched-tokens", self.max_num_batched_tokens, 1),
            ("--max-num-seqs", self.max_num_seqs, 1),
            ("--max-model-len", self.max_model_len, 2),
            ("--speculation-length", self.num_speculative_tokens, 0),
            ("--block-size", self.block_size, 1),
        ):
            if isinstance(value, bool) or int(value) != value or value < low or value > 2**31:
                raise InputError(f"{name} {value}: use a whole number between {low} and {2**31}")
        if self.max_kv_concurrent is not None and self.max_kv_concurrent < 1:
            raise InputError(f"max_kv_concurrent {self.max_kv_concurrent}: use a whole number >= 1")


@dataclass(frozen=True)
class Clock:
    """How long a step lasts in the replay (assumed unless the user gives the rates)."""

    decode_step_seconds: float
    prefill_tokens_per_second: float
    assumed: bool = True

    def check(self) -> None:
        for name, v in (("--decode-step-seconds", self.decode_step_seconds), ("--prefill-tokens-per-second", self.prefill_tokens_per_second)):
            if not (math.isfinite(v) and v > 0):
                raise InputError(f"{name} {v}: use a number > 0")
        from neuronprobe.defaults import MAX_SECONDS
        from neuronprobe.limits import MAX_TOKENS_PER_SECOND, check_range

        # A step of 1e308 s made every modelled time +nan% over unpadded.
        check_range(self.decode_step_seconds, "--decode-step-seconds", 0, MAX_SECONDS, whole=False)
        check_range(self.prefill_tokens_per_second, "--prefill-tokens-per-second", 0, MAX_TOKENS_PER_SECOND, whole=False)


@dataclass
class ServingReplay:
    """The replayed steps. Prefill steps one by one; decode steps as runs of equal batch size.

    Decode run j: ``run_batch[j]`` requests for ``run_steps[j]`` steps; at its first step the
    largest context needed is ``run_ctx[j]`` and the sum over the batch of the context each
    request needs is ``run_real[j]``; both grow by one (times the batch for the sum) per step.
    """

    prefill_tokens: np.ndarray  # int64, real tokens of each prefill chunk
    prefill_start: np.ndarray  # float64 seconds
    run_batch: np.ndarray  # int64
    run_steps: np.ndarray  # int64
    run_ctx: np.ndarray  # int64 (capped at max_model_len)
    run_real: np.ndarray  # int64
    run_start: np.ndarray  # float64 seconds
    requests: int
    served: int
    refused: int  # prompts of max_model_len tokens or more
    truncated: int  # outputs cut at max_model_len
    cached_tokens: int  # prompt tokens served from the prefix cache
    duration: float
    config: SchedulerConfig
    clock: Clock
    notes: list[str] = field(default_factory=list)

    @property
    def prefill_steps(self) -> int:
        return int(self.prefill_tokens.size)

    @property
    def decode_steps(self) -> int:
        return int(self.run_steps.sum())

    def decode_groups(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Distinct (batch, context needed) pairs over every decode step, with how many steps have each.

        A run of k steps at batch b covers the contexts c, c+1, ..., c+k-1 (capped at max_model_len):
        one +1/-1 pair per run in a (batch, context) difference table and a cumulative sum count every
        step without listing the steps (O(runs + batches x max_model_len), not a sort of every step).
        A table too large for memory falls back to listing the steps.
        """
        if self.run_steps.size == 0:
            z = np.zeros(0, dtype=np.int64)
            return z, z, z
        L = self.config.max_model_len
        batches, bidx = np.unique(self.run_batch, return_inverse=True)
        width = L + 2
        if batches.size * width > GROUP_TABLE_CELLS:
            return self._decode_groups_by_step()
        c = self.run_ctx
        end = c + self.run_steps  # one past the last context of the run, before the cap
        below_end = np.minimum(end, L)  # contexts c .. below_end - 1 are below L
        at_cap = end - np.maximum(c, L)  # steps whose context reaches L (all land on L)
        diff = np.zeros(batches.size * width, dtype=np.int64)
        row = bidx.astype(np.int64) * width
        under = c < L
        np.add.at(diff, row[under] + c[under], 1)
        np.add.at(diff, row[under] + below_end[under], -1)
        table = np.cumsum(diff.reshape(batches.size, width), axis=1)[:, : L + 1]
        table[:, L] = 0
        np.add.at(table[:, L], bidx[at_cap > 0], at_cap[at_cap > 0])
        b_i, ctx = np.nonzero(table)
        return batches[b_i].astype(np.int64), ctx.astype(np.int64), table[b_i, ctx].astype(np.int64)

    def _decode_groups_by_step(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        k = self.run_steps
        rep = np.repeat(np.arange(k.size), k)
        offset = np.arange(rep.size, dtype=np.int64) - np.repeat(np.cumsum(k) - k, k)
        ctx = np.minimum(self.run_ctx[rep] + offset, self.config.max_model_len)
        batch = self.run_batch[rep]
        key = batch * (self.config.max_model_len + 1) + ctx
        uniq, counts = np.unique(key, return_counts=True)
        return (uniq // (self.config.max_model_len + 1)).astype(np.int64), (uniq % (self.config.max_model_len + 1)).astype(np.int64), counts.astype(np.int64)

    def real_kv_tokens(self) -> int:
        """Sum over decode steps of the context every request in the batch needs (no padding)."""
        k = self.run_steps
        return int(np.sum(k * self.run_real + self.run_batch * (k * (k - 1) // 2)))

    def prefill_histogram(self) -> tuple[np.ndarray, np.ndarray]:
        values, counts = np.unique(self.prefill_tokens, return_counts=True)
        return values.astype(np.int64), counts.astype(np.int64)

    def batch_histogram(self) -> tuple[np.ndarray, np.ndarray]:
        if self.run_batch.size == 0:
            z = np.zeros(0, dtype=np.int64)
            return z, z
        values, inverse = np.unique(self.run_batch, return_inverse=True)
        return values.astype(np.int64), np.bincount(inverse, weights=self.run_steps).astype(np.int64)

    def steps_table(self) -> list[tuple[str, int, int, int]]:
        """Every step in time order as (kind, tokens or batch, longest context, first second): small traces and tests."""
        rows: list[tuple[float, str, int, int]] = [(float(t), "prefill", int(n), 0) for t, n in zip(self.prefill_start, self.prefill_tokens, strict=True)]
        dt = self.clock.decode_step_seconds
        for b, k, c, t in zip(self.run_batch, self.run_steps, self.run_ctx, self.run_start, strict=True):
            for i in range(int(k)):
                rows.append((float(t) + i * dt, "decode", int(b), min(int(c) + i, self.config.max_model_len)))
        rows.sort(key=lambda r: r[0])
        return [(kind, n, c, round(t * 1e6)) for t, kind, n, c in rows]


def replay_vllm_neuron(
    prompts: np.ndarray,
    outputs: np.ndarray,
    arrivals: np.ndarray,
    config: SchedulerConfig,
    clock: Clock,
    cached: np.ndarray | None = None,
) -> ServingReplay:
    """Replay the requests through vLLM Neuron's scheduler (module docstring); ``cached``: prefix-cache hits per request.

    Long because the event loop is the replay's hot path: each prefill chunk and decode run is one ordered event
    (a million requests make millions), so its state stays in local variables and its helpers are inlined (commit
    b74855a: the replay of 10^6 requests 9.06 s -> 6.36 s, benchmarks/bench_serving_results.md). Split into
    functions, the heaps and counters would cross a call on every event.
    """
    config.check()
    clock.check()
    order = np.argsort(np.asarray(arrivals, dtype=np.float64), kind="stable")
    L = config.max_model_len
    blk = config.block_size
    # Per-request bookkeeping, vectorised before the event loop (the loop only orders events):
    # refusals and cut outputs at max_model_len, block-aligned prefix-cache hits, decode steps.
    P = np.asarray(prompts, dtype=np.int64)[order]
    out_len = np.asarray(outputs, dtype=np.int64)[order]
    ok_mask = P < L
    cut = ok_mask & (P + out_len > L)
    out_len = np.where(cut, L - P, out_len)
    H = np.zeros_like(P) if cached is None else np.asarray(cached, dtype=np.int64)[order]
    H = np.maximum(0, np.minimum(H, P - 1) // blk * blk)
    refused = int((~ok_mask).sum())
    truncated = int(cut.sum())
    cached_total = int(H[ok_mask].sum())
    served = int(ok_mask.sum())
    arr = np.asarray(arrivals, dtype=np.float64)[order].tolist()
    p = P.tolist()
    todo = (P - H).tolist()  # prompt tokens the prefill computes
    dsteps = (out_len - 1).tolist()  # decode steps after the prefill's first token
    ok = ok_mask.tolist()
    all_ok = refused == 0
    n = len(arr)
    chunk = config.prefill_top
    spec = config.num_speculative_tokens
    cap = min(config.max_num_seqs, config.max_kv_concurrent or config.max_num_seqs)
    dt = clock.decode_step_seconds
    ptps = clock.prefill_tokens_per_second

    pre_tok: list[int] = []
    pre_t: list[float] = []
    r_b: list[int] = []
    r_k: list[int] = []
    r_c: list[int] = []
    r_r: list[int] = []
    r_t: list[float] = []
    waiting: deque[int] = deque()
    ends: list[tuple[int, int]] = []  # (last decode step index, key): min-heap
    tops: list[tuple[int, int]] = []  # (-key, last): lazy max-heap; needed context at decode step d = key + d
    key_sum = 0
    d = 0  # decode steps so far (the global decode counter)
    i = 0
    t = arr[0] if n else 0.0
    active = -1  # the request in prefill (-1: none)
    left = 0  # its prompt tokens still to compute
    push, pop = heapq.heappush, heapq.heappop
    add_pre_tok, add_pre_t = pre_tok.append, pre_t.append

    while True:
        if i < n and arr[i] <= t:
            j = bisect.bisect_right(arr, t, i)
            waiting.extend(range(i, j) if all_ok else (x for x in range(i, j) if ok[x]))
            i = j
        if active < 0 and waiting and len(ends) < cap:
            active = waiting.popleft()
            left = todo[active]
        if active >= 0:
            tokens = left if left < chunk else chunk
            add_pre_tok(tokens)
            add_pre_t(t)
            t += tokens / ptps
            left -= tokens
            if left <= 0:
                steps = dsteps[active]
                if steps >= 1:
                    key = p[active] + 1 + spec - d  # context needed at its first decode step (computed = P)
                    last = d + steps - 1
                    push(ends, (last, key))
                    push(tops, (-key, last))
                    key_sum += key
                active = -1
            continue
        if ends:
            while tops[0][1] < d:
                pop(tops)
            b = len(ends)
            k = ends[0][0] - d + 1
            if i < n and b < cap and not waiting:
                k = min(k, max(1, math.ceil((arr[i] - t) / dt - 1e-12)))
            r_b.append(b)
            r_k.append(k)
            r_c.append(-tops[0][0] + d)
            r_r.append(key_sum + b * d)
            r_t.append(t)
            t += k * dt
            d += k
            while ends and ends[0][0] < d:
                key_sum -= pop(ends)[1]
            continue
        if waiting:  # nothing runs and a request waits: it is admitted at the top of the loop
            continue
        if i >= n:
            break
        t = max(t, arr[i])
    notes = []
    if refused:
        notes.append(f"{refused} request(s) have a prompt of --max-model-len {L} tokens or more: vLLM refuses them; left out")
    if truncated:
        notes.append(f"{truncated} request(s) stop at --max-model-len {L} tokens in all (their output is cut)")
    if spec:
        notes.append(f"speculation: {spec} speculative tokens raise the context needed; the acceptance rate is not modelled (one token per request per step)")
    return ServingReplay(
        np.asarray(pre_tok, dtype=np.int64),
        np.asarray(pre_t, dtype=np.float64),
        np.asarray(r_b, dtype=np.int64),
        np.asarray(r_k, dtype=np.int64),
        np.minimum(np.asarray(r_c, dtype=np.int64), L),
        np.asarray(r_r, dtype=np.int64),
        np.asarray(r_t, dtype=np.float64),
        n,
        served,
        refused,
        truncated,
        cached_total,
        (t - arr[0]) if n else 0.0,
        config,
        clock,
        notes,
    )
