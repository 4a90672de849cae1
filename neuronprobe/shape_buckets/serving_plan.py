"""``propose_serving_plan``: vLLM Neuron's three ladders chosen together within a graph and a compile budget (issue 37.2).

The replay (:mod:`.vllm_neuron`) gives every step once: prefill chunks (tokens) and decode
steps (batch size, largest context needed). A ladder set is (prefill T, batch B, context E with
the ``max_model_len`` fallback); its graphs are counted as the runtime compiles them
(:mod:`.vllm_neuron_rules`).

Time model (stated in the report; its rates are assumptions unless the user gives them):
a prefill chunk in bucket T takes ``T / prefill_tokens_per_second``; a decode step in (B, E)
takes ``decode_step_seconds x ((1 - kv_share) + kv_share x B x E / (max_num_seqs x max_model_len))``
(weights read once per step, KV read per batch line and context token, the full-shape step
being ``decode_step_seconds``).

Search. The prefill side is separate from decode: its best k-bucket ladder is the exact 1-D
problem (:func:`.optimal.solve`, last edge ``min(max_num_batched_tokens, max_model_len)``, a multiple of
the TP degree under sequence parallelism). The decode side minimises the sum over steps of B x E
for a budget of (batch, context) pairs with :func:`.schedule.plan_batches` (exact with one batch
bucket, alternating exact solves otherwise; its gap to brute force is measured in
tests/test_serving_plan.py). Every split of the graph budget between the two sides is tried,
and plans whose calibrated compile wall time exceeds ``--compile-budget`` are dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from neuronprobe.errors import InputError
from neuronprobe.report.schema.serving import DimHistogram, ServingLadders, ServingPlan
from neuronprobe.shape_buckets.compile_bill import DEFAULT_COMPILE_WORKERS, Sample, compile_bill
from neuronprobe.shape_buckets.costs import TOKENS, assign
from neuronprobe.shape_buckets.decode_rules import RuntimeRule
from neuronprobe.shape_buckets.optimal import candidate_edges, solve
from neuronprobe.shape_buckets.schedule import plan_batches
from neuronprobe.shape_buckets.vllm_neuron import ServingReplay
from neuronprobe.shape_buckets.vllm_neuron_rules import (
    CONTEXT_MULTIPLE,
    KV_SEGMENT_SIZES,
    Deployment,
    check_neuron_config,
    default_batch_buckets,
    default_prefill_buckets,
    documented_default_prefill,
    graph_count,
)
from neuronprobe.vocabulary import Fit, ServingRuntime

DECODE_RULE = RuntimeRule(ServingRuntime.VLLM_NEURON, Fit.INCLUSIVE, CONTEXT_MULTIPLE, True)
HIST_BINS = 40


@dataclass(frozen=True)
class TimeModel:
    decode_step_seconds: float
    prefill_tokens_per_second: float
    kv_share: float
    assumed: bool = True

    def check(self) -> None:
        if not (0.0 <= self.kv_share <= 1.0):
            raise InputError(f"--kv-share {self.kv_share}: use a fraction between 0 and 1")


@dataclass
class Traffic:
    """What a plan is fitted to: prefill chunk sizes, and decode (batch, context) groups, each with a step count."""

    prefill_values: np.ndarray
    prefill_counts: np.ndarray
    batch: np.ndarray
    ctx: np.ndarray
    weights: np.ndarray
    real_kv: int  # sum over decode steps of the real context of each request (0 when unknown)
    ctx_known: bool = True
    resolution: tuple[str, str] | None = None  # (prefill, batch) in words where the sizes come from histogram bins

    @staticmethod
    def from_replay(rep: ServingReplay) -> Traffic:
        pv, pc = rep.prefill_histogram()
        nb, nl, w = rep.decode_groups()
        return Traffic(pv, pc, nb, nl, w, rep.real_kv_tokens())


def score(name: str, traffic: Traffic, dep: Deployment, tm: TimeModel, prefill: list[int], batch: list[int], context: list[int], method: str) -> ServingLadders:
    """One ladder set on the traffic: padding per dimension and modelled time (module docstring)."""
    s = dep.scheduler
    L, S = s.max_model_len, s.max_num_seqs
    fp, fd = graph_count(dep, prefill, batch, context)
    T = np.asarray(prefill, dtype=np.int64)
    pi = assign(traffic.prefill_values, T, Fit.INCLUSIVE)
    if (pi >= T.size).any():
        raise InputError(f"a prefill chunk needs more than the last num_batched_tokens_bucket {int(T[-1])}")
    p_pad = float(np.sum(traffic.prefill_counts * T[pi]))
    p_real = float(np.sum(traffic.prefill_counts * traffic.prefill_values))
    B = np.asarray(batch, dtype=np.int64)
    E = np.asarray([*context, L], dtype=np.int64)
    bi = assign(traffic.batch, B, Fit.INCLUSIVE)
    ei = assign(traffic.ctx, E, Fit.INCLUSIVE)
    w = traffic.weights.astype(np.float64)
    be = B[bi].astype(np.float64) * E[ei].astype(np.float64)
    kv_pad = float(np.sum(w * be))
    steps = float(w.sum())
    lines = int(np.sum(traffic.weights * (B[bi] - traffic.batch)))
    t_pad = p_pad / tm.prefill_tokens_per_second + tm.decode_step_seconds * ((1 - tm.kv_share) * steps + tm.kv_share * kv_pad / (S * L))
    real_kv = float(traffic.real_kv) if traffic.ctx_known else float(np.sum(w * traffic.batch * L))
    t_real = p_real / tm.prefill_tokens_per_second + tm.decode_step_seconds * ((1 - tm.kv_share) * steps + tm.kv_share * real_kv / (S * L))
    return ServingLadders(
        name=name,
        prefill_buckets=[int(x) for x in prefill],
        batch_buckets=[int(x) for x in batch],
        context_buckets=[int(x) for x in context],
        prefill_graphs=fp,
        decode_graphs=fd,
        graphs=fp + fd,
        prefill_padded_tokens=int(p_pad - p_real),
        prefill_overhead=round(100.0 * (p_pad - p_real) / p_real, 4) if p_real else 0.0,
        batch_padding_lines=lines,
        kv_overhead=round(100.0 * (kv_pad - real_kv) / real_kv, 4) if real_kv else 0.0,
        modelled_seconds=round(t_pad, 4),
        time_overhead=round(100.0 * (t_pad - t_real) / t_real, 4) if t_real else 0.0,
        method=method,
    )


def graph_names(dep: Deployment, prefill: list[int], batch: list[int], context: list[int]) -> list[tuple[str, str, int]]:
    """(bucket_name, kind, size) of every graph the runtime compiles for these ladders."""
    L = dep.scheduler.max_model_len
    out: list[tuple[str, str, int]] = []
    pf = ("", "_draft") if dep.eagle else ("",)
    df = ("", "_spec", "_draft") if dep.eagle else ("",)
    for t in prefill:
        out += [(f"prefill_s{t}{f}", "prefill", t) for f in pf]
    for b in batch:
        for e in [*context, None]:
            name = f"decode_b{b}" + ("" if e is None else f"_ctx{e}")
            out += [(name + f, "decode", b * (L if e is None else e)) for f in df]
    return out


def _prefill_options(traffic: Traffic, dep: Deployment, k_max: int) -> list[list[int]]:
    top = dep.scheduler.prefill_top
    if dep.kv_segment_size is not None:
        return [[dep.kv_segment_size]]
    if traffic.prefill_values.size == 0:
        return [[top]]
    mult = dep.tensor_parallel_size if dep.sequence_parallel else None
    cands = candidate_edges(traffic.prefill_values, top, Fit.INCLUSIVE, mult, (mult + 1) if mult else None)
    return [s.edges for s in solve(traffic.prefill_values, traffic.prefill_counts, cands, TOKENS, k_max)]


def _decode_plan(traffic: Traffic, dep: Deployment, pairs: int) -> tuple[list[int], list[int], str]:
    s = dep.scheduler
    if traffic.batch.size == 0 or pairs < 1:
        return [s.max_num_seqs], [], "fixed"
    ctx = traffic.ctx if traffic.ctx_known else np.full_like(traffic.ctx, s.max_model_len)
    plan = plan_batches(traffic.batch, ctx, traffic.weights, DECODE_RULE, s.max_num_seqs, s.max_model_len, pairs)
    return plan.batch_buckets, plan.seq_buckets[:-1], plan.method


def choose(
    traffic: Traffic,
    dep: Deployment,
    tm: TimeModel,
    max_graphs: int,
    budget_seconds: float | None,
    samples: list[Sample],
    workers: int,
) -> tuple[ServingLadders, int]:
    """The least modelled time over every split of ``max_graphs`` (and within the compile budget); with the plans tried."""
    fp_unit = 2 if dep.eagle else 1
    fd_unit = 3 if dep.eagle else 1
    prefill_opts = _prefill_options(traffic, dep, max(1, (max_graphs - fd_unit) // fp_unit))
    decode_cache: dict[int, tuple[list[int], list[int], str]] = {}
    best: ServingLadders | None = None
    tried = 0

    def decode(pairs: int) -> tuple[list[int], list[int], str]:
        if pairs not in decode_cache:
            decode_cache[pairs] = _decode_plan(traffic, dep, pairs)
        return decode_cache[pairs]

    def evaluate(pl: list[int], pairs: int) -> ServingLadders | None:
        bl, cl, method = decode(pairs)
        exact = method == "exact" and dep.kv_segment_size is None
        cand = score("proposed", traffic, dep, tm, pl, bl, cl, "exact" if exact else "heuristic")
        if budget_seconds is not None:
            bill = compile_bill(graph_names(dep, pl, bl, cl), samples, workers, None, "")
            if bill.wall_seconds is None or bill.wall_seconds > budget_seconds:
                return None
            cand.compile_seconds = bill.wall_seconds
        return cand

    for pl in prefill_opts:
        left = max_graphs - len(pl) * fp_unit
        if left < fd_unit:
            continue
        top = left // fd_unit
        if budget_seconds is None:
            found = evaluate(pl, top)
        else:
            # The largest decode budget whose compile wall fits: a binary search, taking the wall to grow
            # with the decode pairs (more pairs never compile faster on the same workers).
            lo, hi, found = 1, top, None
            while lo <= hi:
                mid = (lo + hi) // 2
                got = evaluate(pl, mid)
                tried += 1
                if got is None:
                    hi = mid - 1
                else:
                    found, lo = got, mid + 1
        tried += 1
        if found is not None and (best is None or (found.modelled_seconds, found.graphs) < (best.modelled_seconds, best.graphs)):
            best = found
    if best is None:
        raise InputError(
            f"no ladder set fits --max-graphs {max_graphs}"
            + ("" if budget_seconds is None else f" and --compile-budget {budget_seconds / 60:g} minutes")
            + f" (the smallest compiles {fp_unit + fd_unit} graphs{' with EAGLE' if dep.eagle else ''})"
        )
    return best, tried


def _histogram(name: str, values: np.ndarray, counts: np.ndarray, resolution: str) -> DimHistogram:
    if values.size == 0:
        return DimHistogram(name, resolution=resolution)
    if values.size <= HIST_BINS:
        return DimHistogram(name, values.tolist(), values.tolist(), counts.tolist(), resolution)
    edges = np.unique(np.linspace(int(values[0]), int(values[-1]) + 1, HIST_BINS + 1).astype(np.int64))
    idx = np.searchsorted(edges, values, side="right") - 1
    idx = np.clip(idx, 0, edges.size - 2)
    c = np.bincount(idx, weights=counts, minlength=edges.size - 1).astype(np.int64)
    return DimHistogram(name, edges[:-1].tolist(), (edges[1:] - 1).tolist(), c.tolist(), resolution)


def plan_from_traffic(
    traffic: Traffic,
    dep: Deployment,
    tm: TimeModel,
    *,
    max_graphs: int | None,
    compile_budget_minutes: float | None,
    samples: Sequence[Sample],
    workers: int = DEFAULT_COMPILE_WORKERS,
    host_memory_gib: float | None = None,
    source: str = "",
    traffic_kind: str = "trace",
    requests: int = 0,
    assumptions: Sequence[str] = (),
    rules: Sequence[str] = (),
    notes: Sequence[str] = (),
    calibration_source: str = "",
) -> ServingPlan:
    """The plan, its baselines and the bill for a traffic; see the module docstring."""
    tm.check()
    s = dep.scheduler
    sample_list = list(samples)
    budget = _compile_budget(dep, compile_budget_minutes, sample_list, workers)
    dp, db = default_prefill_buckets(dep), default_batch_buckets(dep)
    documented = documented_default_prefill(s.prefill_top)
    extra_notes = []
    if documented != dp and dep.kv_segment_size is None:
        extra_notes.append(
            f"the documented default num_batched_tokens_buckets {documented or '[]'} (powers of two from 128 while <= {s.prefill_top}, "
            f"neuron-scheduler.md) has no bucket for chunks of up to {s.prefill_top} tokens: the default is scored as {dp}"
        )
    default = score("vllm-neuron default", traffic, dep, tm, dp, db, [], "fixed")
    graphs_cap = int(max_graphs) if max_graphs is not None else default.graphs
    if graphs_cap < 1:
        raise InputError(f"--max-graphs {max_graphs}: use a whole number >= 1")
    proposed, _ = choose(traffic, dep, tm, graphs_cap, budget, sample_list, workers)
    baselines = [default]
    if graphs_cap != default.graphs:
        same, _ = choose(traffic, dep, tm, default.graphs, None, sample_list, workers)
        same.name = f"proposed at the default's {default.graphs} graphs"
        baselines.append(same)
    ladders = [proposed, *baselines]
    bill = compile_bill(
        graph_names(dep, proposed.prefill_buckets, proposed.batch_buckets, proposed.context_buckets), sample_list, workers, host_memory_gib, calibration_source
    )
    for lad in ladders:
        b = compile_bill(graph_names(dep, lad.prefill_buckets, lad.batch_buckets, lad.context_buckets), sample_list, workers, host_memory_gib, "")
        lad.compile_seconds, lad.host_peak_gib = b.wall_seconds, b.host_peak_gib
    additional, args = _vllm_settings(proposed, dep)
    hists = _traffic_histograms(traffic, traffic_kind)
    engine = {
        "max_num_batched_tokens": s.max_num_batched_tokens,
        "max_num_seqs": s.max_num_seqs,
        "max_model_len": s.max_model_len,
        "tensor_parallel_size": dep.tensor_parallel_size,
        "num_speculative_tokens": s.num_speculative_tokens,
        "block_size": s.block_size,
    }
    return ServingPlan(
        source=source,
        traffic=traffic_kind,
        requests=requests,
        prefill_steps=int(traffic.prefill_counts.sum()),
        decode_steps=int(traffic.weights.sum()),
        engine=engine,
        max_graphs=graphs_cap,
        compile_budget_minutes=compile_budget_minutes,
        proposed=proposed,
        baselines=baselines,
        additional_config=additional,
        vllm_args=args,
        compile_bill=bill,
        histograms=hists,
        time_model={
            "decode_step_seconds": tm.decode_step_seconds,
            "prefill_tokens_per_second": tm.prefill_tokens_per_second,
            "kv_share": tm.kv_share,
            "assumed": float(tm.assumed),
        },
        assumptions=list(assumptions),
        rules=list(rules),
        notes=list(notes) + extra_notes + ([] if max_graphs is not None else [f"no --max-graphs: the budget is the default ladders' {default.graphs} graphs"]),
    )


def _compile_budget(dep: Deployment, compile_budget_minutes: float | None, samples: list[Sample], workers: int) -> float | None:
    """The compile budget in seconds (None: none asked), once the deployment and the budget are checked usable."""
    s = dep.scheduler
    if dep.sequence_parallel and (s.prefill_top % dep.tensor_parallel_size or s.prefill_top <= dep.tensor_parallel_size):
        raise InputError(
            f"sequence-parallel prefill (on with --tensor-parallel-size > 1, tensor_parallelism.md): min(max_num_batched_tokens, max_model_len) = "
            f"{s.prefill_top} must be divisible by and larger than --tensor-parallel-size {dep.tensor_parallel_size} (the largest prefill bucket "
            "equals it); --no-sequence-parallel if your model's prefill is not sequence-parallel"
        )
    seg = dep.kv_segment_size
    if seg is not None and seg not in KV_SEGMENT_SIZES:
        raise InputError(f"--kv-segment-size {seg}: use one of {list(KV_SEGMENT_SIZES)} (kv_segment_size_buckets, reference-configuration.md)")
    if seg is not None and seg % s.block_size:
        raise InputError(f"--kv-segment-size {seg}: must be divisible by block_size {s.block_size} (reference-configuration.md)")
    if dep.kv_segment_size is not None and dep.kv_segment_size != s.prefill_top:
        raise InputError(
            f"--kv-segment-size {dep.kv_segment_size}: num_batched_tokens_buckets must equal kv_segment_size_buckets and end at "
            f"min(max_num_batched_tokens, max_model_len) = {s.prefill_top}; set --max-num-batched-tokens {dep.kv_segment_size}"
        )
    budget = None if compile_budget_minutes is None else float(compile_budget_minutes) * 60.0
    if budget is not None and not (np.isfinite(budget) and budget > 0):
        raise InputError(f"--compile-budget {compile_budget_minutes}: use a number of minutes > 0")
    from neuronprobe.defaults import MAX_SECONDS
    from neuronprobe.limits import check_range

    check_range(compile_budget_minutes, "--compile-budget", 0, MAX_SECONDS / 60, whole=False)  # a week of compiling
    if budget is not None:
        probe = compile_bill(graph_names(dep, [s.prefill_top], [s.max_num_seqs], []), samples, workers, None, "")
        if not probe.calibrated:
            raise InputError(f"--compile-budget needs measured compile times for prefill and decode graphs; {probe.how_to_calibrate}")
    return budget


def _vllm_settings(proposed: ServingLadders, dep: Deployment) -> tuple[dict[str, Any], list[str]]:
    """The proposal as vLLM takes it: the ``--additional-config`` object and the engine arguments, checked against
    the plugin's rules."""
    import json

    s = dep.scheduler
    neuron_config: dict[str, Any] = {"num_batched_tokens_buckets": proposed.prefill_buckets, "num_seqs_buckets": proposed.batch_buckets}
    if proposed.context_buckets:
        neuron_config["decode_context_length_buckets"] = proposed.context_buckets
    if dep.kv_segment_size is not None:
        neuron_config["kv_segment_size_buckets"] = [dep.kv_segment_size]
    broken = check_neuron_config(neuron_config, dep)
    if broken:  # the planner's own bug: its output must pass the plugin's rules
        raise AssertionError("the proposed neuron_config breaks vLLM Neuron's rules: " + "; ".join(broken))
    additional = {"neuron_config": neuron_config}
    args = [
        f"--max-model-len {s.max_model_len}",
        f"--max-num-seqs {s.max_num_seqs}",
        f"--max-num-batched-tokens {s.max_num_batched_tokens}",
        f"--tensor-parallel-size {dep.tensor_parallel_size}",
        f"--additional-config '{json.dumps(additional, separators=(',', ':'))}'",
    ]
    return additional, args


def _traffic_histograms(traffic: Traffic, traffic_kind: str) -> list[DimHistogram]:
    """The traffic per bucket dimension: prefill tokens, decode batch and (when known) decode context per step."""
    exact = "exact (one prefill chunk per step)" if traffic_kind == "trace" else "padding-histogram bins"
    pres, bres = traffic.resolution or (exact, exact)
    hists = [
        _histogram("prefill tokens per step", traffic.prefill_values, traffic.prefill_counts, pres),
    ]
    if traffic.batch.size:
        bv, inv = np.unique(traffic.batch, return_inverse=True)
        hists.append(_histogram("decode batch per step", bv, np.bincount(inv, weights=traffic.weights).astype(np.int64), bres))
        if traffic.ctx_known:
            cv, cinv = np.unique(traffic.ctx, return_inverse=True)
            hists.append(_histogram("decode context needed per step", cv, np.bincount(cinv, weights=traffic.weights).astype(np.int64), "exact"))
    return hists
