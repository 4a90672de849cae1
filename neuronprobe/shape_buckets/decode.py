"""``propose_decode_buckets``: token-generation buckets (and batch buckets) for real serving traffic.

Decode is where serving time goes: every generated token is one decode step that reads
the KV cache up to its *bucket*, not its real length. From a trace of prompt and output
lengths this module

1. builds the histogram of required lengths of every decode step (:mod:`.decode_rules`),
2. solves the exact k-bucket ladder for every k <= K with the runtime's fit rule, reusing
   the prefill solver (:mod:`.optimal`): the padded KV read of a step is linear in its
   bucket, ``f(E) = E`` (``tokens``), or the fitted ``--step-times`` model,
3. scores it against the runtime's default ladder, powers of two, and the prefill ladder
   reused for decode, in KV reads and in modelled step time (weights read once per step
   plus KV per token: the per-step constant does not move the optimum, but it is what
   turns a KV saving into a step-time saving),
4. with arrival times and ``max_batch``, replays continuous batching and proposes batch
   and sequence ladders jointly for a graph budget (:mod:`.schedule`),
5. with a model, fits its bytes per core at every TP degree (:mod:`.memory`),
6. writes NxD Inference and vllm-neuron configs (:mod:`.configs`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from neuronprobe.defaults import (
    DECODE_TIMELINE_POINTS,
    DEFAULT_DECODE_MAX_GRAPHS,
    DEFAULT_DECODE_RUNTIME,
    DEFAULT_DECODE_TOKENS_PER_SECOND,
    DEFAULT_MAX_BUCKETS,
    DEFAULT_TARGET,
    MAX_BUCKETS,
)
from neuronprobe.errors import InputError
from neuronprobe.limits import (
    MAX_BATCH_SIZE,
    MAX_BUCKET_LENGTH,
    MAX_GRAPHS,
    MAX_RESERVE_GIB,
    MAX_SPECULATION_LENGTH,
    MAX_TOKENS_PER_SECOND,
    MAX_TP_DEGREE,
    check_range,
)
from neuronprobe.report.model import BatchPlan, DecodeHoldout, DecodeLadder, DecodeProposal, DecodeScore, DecodeTimeline, MemoryFit
from neuronprobe.shape_buckets.configs import render_decode_configs
from neuronprobe.shape_buckets.costs import TOKENS, CostModel, StepTimeFit, assign
from neuronprobe.shape_buckets.decode_rules import (
    RuntimeRule,
    StepModel,
    default_ladder,
    position_histogram,
    powers_of_two,
    rule_for,
    score_ladder,
)
from neuronprobe.shape_buckets.decode_trace import DecodeTrace, trace_from_arrays
from neuronprobe.shape_buckets.memory import ModelShape, load_model_shape, memory_fit, step_bytes
from neuronprobe.shape_buckets.optimal import candidate_edges, round_up, solve
from neuronprobe.shape_buckets.propose import length_histogram, propose_buckets
from neuronprobe.shape_buckets.schedule import Plan, Replay, plan_batches, plan_cost, replay, seq_fit, step_groups, thin
from neuronprobe.vocabulary import Fit, ServingRuntime


def _held_out(trace: DecodeTrace, holdout: float | None, notes: list[str]) -> tuple[DecodeTrace, DecodeTrace | None, DecodeHoldout | None]:
    """The requests the ladders are fitted on, those held out to score them (None without ``holdout``), and what was held out."""
    if holdout is None:
        return trace, None, None
    fit_trace, test_trace, order = _split(trace, holdout)
    notes.append(
        f"held out the last {holdout:.0%} of the requests ({order}): the ladders are fitted on the first {len(fit_trace)} "
        f"and scored on the other {len(test_trace)} in the holdout table"
    )
    return fit_trace, test_trace, DecodeHoldout(fraction=float(holdout), order=order, fit_requests=len(fit_trace), test_requests=len(test_trace))


def _decode_positions(fit_trace: DecodeTrace, shift: int, max_len: int | None, source: str, notes: list[str]) -> tuple[np.ndarray, np.ndarray, int, int]:
    """The required lengths of every decode step and how many steps need each, the last edge, and how many steps
    need more than it (counted, never truncated silently)."""
    values, counts = position_histogram(fit_trace.prompts, fit_trace.outputs, shift)
    if values.size == 0:
        raise InputError(f"{source or 'the trace'}: no request generates more than one token, so there are no decode steps to bucket")
    top = int(values[-1]) if max_len is None else int(max_len)
    inside = values <= top
    if not inside.any():
        raise InputError(f"every decode step needs more than --max-len {top}; nothing fits a bucket")
    beyond = int(counts[~inside].sum())
    if beyond:
        notes.append(f"{beyond} decode steps need more than the last bucket {top}: no graph serves them; left out of the overheads")
    return values, counts, top, beyond


def _measured_step(step_times: Any, notes: list[str]) -> StepModel:
    """The step-time model from measured decode-step seconds (``fit_step_times``)."""
    notes.append(
        f"step time fitted from {step_times.n} measured decode steps: {step_times.intercept:.4g} + {step_times.model.a:.4g}*E "
        f"+ {step_times.model.b:.4g}*E^2 s (R^2 = {step_times.r2:.3f})"
    )
    return StepModel(step_times.intercept, step_times.model.a, step_times.model.b, "seconds", "measured step times (seconds)")


def _score_ladders_held_out(
    holdout: DecodeHoldout, test_trace: DecodeTrace, ladders: list[tuple[str, list[int]]], shift: int, rule: Any, step: StepModel | None
) -> None:
    """Each ladder scored on the held-out requests' decode steps, into ``holdout.ladders``."""
    tv, tc = position_histogram(test_trace.prompts, test_trace.outputs, shift)
    for name, edges in ladders:
        sc = score_ladder(tv, tc, edges, rule, step)
        holdout.ladders[name] = DecodeScore(sc.kv_overhead, sc.step_overhead, sc.beyond_last)


def _configs(
    fit_trace: DecodeTrace,
    plan_out: BatchPlan | None,
    batch1_edges: list[int],
    context_edges: list[int],
    max_batch: int,
    tp_degree: int | None,
    speculation_length: int,
    notes: list[str],
) -> Any:
    """The ready-to-paste configs: the continuous-batching plan's buckets when there is one, else the batch-1 ladder."""
    if plan_out is not None:
        notes.append(
            "the configs use the continuous-batching plan's sequence buckets (fitted to the replayed steps, where the longest "
            "sequence in the batch picks the bucket); the batch-1 ladder above is for batch 1"
        )
    return render_decode_configs(
        edges=plan_out.seq_buckets if plan_out is not None else batch1_edges,
        context_edges=context_edges,
        context_top=int(round_up(int(fit_trace.prompts.max()), 1)),
        batch_buckets=plan_out.batch_buckets if plan_out is not None else None,
        max_batch=max_batch,
        tp_degree=tp_degree,
        speculation_length=speculation_length,
    )


def _memory_and_step(
    shape: ModelShape,
    target: str,
    top: int,
    batch: int,
    dtype: str,
    reserve_gib: float | None,
    tp_degree: int | None,
    step: StepModel | None,
    notes: list[str],
) -> tuple[MemoryFit, StepModel | None]:
    """The memory fit per TP degree of a model's shape, and the step model in bytes per core at the TP degree
    asked for (else the smallest that fits) when no measured step times gave one."""
    reserve = None if reserve_gib is None else int(reserve_gib * 2**30)
    mem = memory_fit(shape, target, top, batch, dtype, reserve)
    tp = tp_degree or mem.smallest_tp
    if tp_degree is not None and tp_degree not in [r.tp_degree for r in mem.rows]:
        raise InputError(f"--tp-degree {tp_degree}: {mem.target} allows {', '.join(str(r.tp_degree) for r in mem.rows)}")
    if step is None and tp is not None:
        weights, per_token = step_bytes(mem, tp)
        step = StepModel(weights, per_token, 0.0, "bytes per core", f"bytes read per core per step at TP {tp}: weights once + KV per token")
    elif tp is None:
        notes.append("no step-time model: the model fits at no TP degree, so there is no per-core step to model")
    return mem, step


def _batch_section(
    fit_trace: DecodeTrace,
    max_batch: int,
    shift: int,
    rule: Any,
    tokens_per_second: float | None,
    step_times: Any,
    step: StepModel | None,
    top: int,
    graphs_budget: int,
    defaults: list[int],
    batch1_edges: list[int],
    notes: list[str],
) -> tuple[Any, BatchPlan | None, list[BatchPlan]]:
    """Continuous batching replayed from the arrivals: the timeline, the proposed batch x sequence plan within
    ``graphs_budget``, and the fixed plans it is compared with."""
    timeline = None
    plan_out: BatchPlan | None = None
    batch_baselines: list[BatchPlan] = []
    rep, source = _replay(fit_trace, max_batch, shift, rule, tokens_per_second, step_times, notes)
    allow = not (rule.runtime == ServingRuntime.NXDI and shift > 0)
    if not allow:
        notes.append("NxD Inference refuses token_generation_batches with speculation (config.py _validate_batch_bucketing_compatibility): one batch bucket")
    if rep.steps:
        nb, nl, w = step_groups(rep)
        fits = nl <= top
        if not fits.all():
            notes.append(f"{int(w[~fits].sum())} replayed steps need more than the last bucket {top}; left out of the batch plan")
        nb, nl, w = nb[fits], nl[fits], w[fits]
        real_total = float(rep.real[rep.longest <= top].sum())
        plan = plan_batches(nb, nl, w, rule, max_batch, top, graphs_budget, allow)
        plan_out = _batch_plan("proposed", plan, nb, nl, w, rule, real_total, rep, step, top)
        pow2_batches = [b for b in (2**i for i in range(max_batch.bit_length())) if b < max_batch] + [max_batch]
        for name, bl, sl in (
            (f"{rule.runtime} default, no batch buckets", [max_batch], defaults),
            ("default ladder x powers-of-two batches", pow2_batches if allow else [max_batch], defaults),
            ("batch-1 proposal, no batch buckets", [max_batch], batch1_edges),
        ):
            p = Plan(bl, sl, plan_cost(nb, nl, w, bl, sl, rule), "fixed")
            batch_baselines.append(_batch_plan(name, p, nb, nl, w, rule, real_total, rep, step, top))
        timeline = _timeline(rep, max_batch, source, plan, rule)
    return timeline, plan_out, batch_baselines


def propose_decode_buckets(
    trace: DecodeTrace | tuple[Sequence[int], Sequence[int]] | Any,
    max_buckets: int = DEFAULT_MAX_BUCKETS,
    *,
    runtime: str = DEFAULT_DECODE_RUNTIME,
    speculation_length: int = 0,
    max_len: int | None = None,
    step_times: StepTimeFit | None = None,
    model: str | ModelShape | None = None,
    model_overrides: tuple[str, ...] = (),
    model_paths: tuple[str, ...] = (),
    target: str | None = None,
    dtype: str = "bfloat16",
    reserve_gib: float | None = None,
    tp_degree: int | None = None,
    max_batch: int | None = None,
    tokens_per_second: float | None = None,
    max_graphs: int | None = None,
    holdout: float | None = None,
) -> DecodeProposal:
    """Propose token-generation buckets for the decode steps of ``trace``.

    ``trace``: a :class:`DecodeTrace` (``read_decode_trace``), a pandas DataFrame with
    prompt and output columns (and optionally ``arrival``), or ``(prompts, outputs)``.
    ``runtime``: ``nxdi``, ``vllm-neuron`` or ``tnx`` (their fit rules: decode_rules.py).
    ``max_buckets``: K, the most token-generation graphs at batch 1; the curve covers k <= K.
    ``max_len``: the last edge (default: the longest required length; vllm-neuron: max_model_len).
    ``step_times``: a fit of measured decode-step seconds (``fit_step_times``); it becomes
    the cost model and the step-time model.
    ``model``/``target``: ``hf:<type>`` or a model file, config only: KV bytes per token,
    the memory fit per TP degree and the step model in bytes per core.
    ``max_batch``/``tokens_per_second``/``max_graphs``: replay continuous batching (the
    trace needs arrival times) and propose batch x sequence buckets within ``max_graphs``.
    ``holdout``: the share of requests (time order when known) held out for scoring.
    The result's ``frames()`` gives pandas DataFrames. Raises InputError for unusable input.

    Long because it assembles the proposal's thirty fields in one place, in the order they depend on each other
    (positions, cost and step models, ladders, memory, the batch plan, the holdout); each part is a helper above.
    """
    trace = as_decode_trace(trace)
    rule = rule_for(runtime)
    _check(max_buckets, speculation_length, max_len, max_batch, tokens_per_second, max_graphs, holdout, tp_degree, reserve_gib)
    if max_batch is not None and trace.arrivals is None:
        raise InputError(
            f"--max-batch needs arrival times to replay continuous batching; {trace.source or 'the trace'} has no timestamp column "
            "that parses as numbers or dates on every row (name one with --time-column)"
        )
    if model is not None:
        target = target or DEFAULT_TARGET
    notes: list[str] = []
    shift = int(speculation_length)

    fit_trace, test_trace, holdout_info = _held_out(trace, holdout, notes)
    values, counts, top, beyond = _decode_positions(fit_trace, shift, max_len, trace.source, notes)
    inside = values <= top
    v_in, c_in = values[inside], counts[inside]

    cost: CostModel = TOKENS if step_times is None else step_times.model
    mem: MemoryFit | None = None
    step: StepModel | None = None
    if step_times is not None:
        step = _measured_step(step_times, notes)

    cands = candidate_edges(v_in, top, rule.fit, rule.multiple_of, None)
    m = int(cands.edges.size)
    k_cap = min(int(max_buckets), m)
    if int(max_buckets) > m:
        notes.append(f"--max-buckets {max_buckets} is more than the {m} useful edges; using {m}")
    defaults = default_ladder(rule.runtime, top)
    pow2 = powers_of_two(top)
    context_edges = _context_ladder(fit_trace, k_cap)
    prefill_edges = _prefill_ladder(context_edges, rule, top)
    k_solve = min(m, max(k_cap, len(defaults), len(pow2), len(prefill_edges)))
    solutions = solve(v_in, c_in, cands, cost, k_solve)

    if model is not None:
        shape = model if isinstance(model, ModelShape) else load_model_shape(model, model_overrides, model_paths)
        mem, step = _memory_and_step(shape, target or DEFAULT_TARGET, top, max_batch or 1, dtype, reserve_gib, tp_degree, step, notes)

    def ladder(name: str, edges: list[int], c: np.ndarray = c_in, v: np.ndarray = v_in) -> DecodeLadder:
        sc = score_ladder(v, c, edges, rule, step)
        return DecodeLadder(name, list(edges), len(edges), sc.kv_overhead, sc.step_overhead, sc.beyond_last)

    curve = [ladder(f"k={s.k}", s.edges) for s in solutions[:k_cap]]
    chosen = curve[-1]
    baselines = []
    for name, edges in (
        (f"{rule.runtime} default", defaults),
        ("powers of two", pow2),
        ("prefill ladder reused", prefill_edges),
    ):
        b = ladder(name, edges, c=counts, v=values)  # scored on every step, so beyond_last is counted
        same = min(len(edges), len(solutions))
        b.optimal_kv_overhead = score_ladder(v_in, c_in, solutions[same - 1].edges, rule, step).kv_overhead
        baselines.append(b)

    graphs_budget = int(max_graphs or max(DEFAULT_DECODE_MAX_GRAPHS, chosen.graphs))
    timeline: Any = None
    plan_out: BatchPlan | None = None
    batch_baselines: list[BatchPlan] = []
    if max_batch is not None and fit_trace.arrivals is not None:
        timeline, plan_out, batch_baselines = _batch_section(
            fit_trace, max_batch, shift, rule, tokens_per_second, step_times, step, top, graphs_budget, defaults, chosen.edges, notes
        )

    if holdout_info is not None and test_trace is not None:
        ladders = [("proposed", chosen.edges)] + [(b.name, b.edges) for b in baselines]
        _score_ladders_held_out(holdout_info, test_trace, ladders, shift, rule, step)
        if plan_out is not None and max_batch is not None and test_trace.arrivals is not None:
            plans = [plan_out, *batch_baselines]
            _score_plans_held_out(holdout_info, test_trace, plans, max_batch, shift, rule, tokens_per_second, step_times, step, top)

    hist, hist_note = length_histogram(values, counts)
    if hist_note:
        notes.append(hist_note.replace("lengths", "required lengths"))
    tp = tp_degree or (mem.smallest_tp if mem else None)
    configs = _configs(fit_trace, plan_out, chosen.edges, context_edges, max_batch or 1, tp, shift, notes)
    return DecodeProposal(
        runtime=rule.runtime,
        fit=rule.fit,
        edges=chosen.edges,
        k=len(chosen.edges),
        kv_overhead=chosen.kv_overhead,
        step_overhead=chosen.step_overhead,
        speculation_length=int(speculation_length),
        max_len=top,
        graphs=chosen.graphs,
        requests=len(fit_trace),
        decode_steps=int(counts.sum()),
        distinct_positions=int(values.size),
        beyond_last=beyond,
        step_model=step.words if step else "",
        step_params=step.params() if step else {},
        curve=curve,
        baselines=baselines,
        histogram=hist,
        holdout=holdout_info,
        timeline=timeline,
        batch_plan=plan_out,
        batch_baselines=batch_baselines,
        max_graphs=graphs_budget if plan_out is not None else 0,
        memory=mem,
        configs=configs,
        notes=notes,
        source=trace.source,
        max_buckets=int(max_buckets),
    )


def decode_for_report(trace_path: Any, model: str, target: str, overrides: list[str]) -> DecodeProposal:
    """The decode section ``analyze --decode-trace`` adds to a model's report.

    An ``hf:`` model is read as its config for the memory fit (on the meta device, no
    weights); a model file is not imported here, outside the analysis worker: its memory fit
    is ``buckets TRACE --decode --model model.py``.
    """
    from neuronprobe.shape_buckets.decode_trace import read_decode_trace
    from neuronprobe.shape_buckets.memory import TARGET_MEMORY

    trace = read_decode_trace(trace_path)
    with_model = model.startswith("hf:") and target in TARGET_MEMORY
    proposal = propose_decode_buckets(
        trace, model=model if with_model else None, model_overrides=tuple(overrides) if with_model else (), target=target if with_model else None
    )
    if not with_model:
        proposal.notes.append(f"no memory fit here for {model} on {target}: run `neuronprobe buckets TRACE --decode --model {model} --target trn1|inf2|trn2`")
    return proposal


def as_decode_trace(trace: Any) -> DecodeTrace:
    if isinstance(trace, DecodeTrace):
        return trace
    if hasattr(trace, "columns"):  # a pandas DataFrame
        from neuronprobe.shape_buckets.decode_trace import OUTPUT_NAMES, PROMPT_NAMES

        lower = {str(c).lower(): c for c in trace.columns}
        pc = next((lower[n] for n in ("prompt", *PROMPT_NAMES) if n in lower), None)
        oc = next((lower[n] for n in ("output", *OUTPUT_NAMES) if n in lower), None)
        if pc is None or oc is None:
            raise InputError(f"the DataFrame needs a prompt and an output column (e.g. 'prompt' and 'output'); it has {list(trace.columns)}")
        tc = next((lower[n] for n in ("arrival", "timestamp", "time") if n in lower), None)
        return trace_from_arrays(trace[pc].to_numpy(), trace[oc].to_numpy(), None if tc is None else trace[tc].to_numpy(), "DataFrame")
    if isinstance(trace, tuple) and len(trace) in (2, 3):
        return trace_from_arrays(*trace)
    raise InputError("trace: give a DecodeTrace (read_decode_trace), a DataFrame, or (prompts, outputs[, arrivals])")


def _check(
    max_buckets: int,
    spec: int,
    max_len: int | None,
    max_batch: int | None,
    tps: float | None,
    max_graphs: int | None,
    holdout: float | None,
    tp_degree: int | None,
    reserve_gib: float | None,
) -> None:
    def whole(value: Any, flag: str, low: int) -> None:
        if value is not None and (isinstance(value, bool) or int(value) != value or value < low):
            raise InputError(f"{flag} {value}: use a whole number >= {low}")

    whole(max_buckets, "--max-buckets", 1)
    if max_buckets > MAX_BUCKETS:
        raise InputError(f"--max-buckets {max_buckets}: at most {MAX_BUCKETS} (each bucket is a compiled graph)")
    whole(spec, "--speculation-length", 0)
    whole(max_len, "--max-len", 1)
    whole(max_batch, "--max-batch", 1)
    whole(max_graphs, "--max-graphs", 1)
    whole(tp_degree, "--tp-degree", 1)
    # Ceilings (limits.py): a bucket of 9.2e18 tokens or a reserve of 1e308 GiB is no plan.
    check_range(spec, "--speculation-length", 0, MAX_SPECULATION_LENGTH)
    check_range(max_len, "--max-len", 1, MAX_BUCKET_LENGTH)
    check_range(max_batch, "--max-batch", 1, MAX_BATCH_SIZE)
    check_range(max_graphs, "--max-graphs", 1, MAX_GRAPHS)
    check_range(tp_degree, "--tp-degree", 1, MAX_TP_DEGREE)
    if tps is not None and not (np.isfinite(tps) and tps > 0):
        raise InputError(f"--tokens-per-second {tps}: use a number > 0")
    check_range(tps, "--tokens-per-second", 0, MAX_TOKENS_PER_SECOND, whole=False)
    if holdout is not None and not 0 < holdout < 1:
        raise InputError(f"--holdout {holdout}: use a fraction between 0 and 1, e.g. 0.5")
    if reserve_gib is not None and not (np.isfinite(reserve_gib) and reserve_gib >= 0):
        raise InputError(f"--reserve-gib {reserve_gib}: use a number of GiB >= 0")
    check_range(reserve_gib, "--reserve-gib", 0, MAX_RESERVE_GIB, whole=False)


def _split(trace: DecodeTrace, fraction: float) -> tuple[DecodeTrace, DecodeTrace, str]:
    n = len(trace)
    if trace.arrivals is not None:
        order = np.argsort(trace.arrivals, kind="stable")
        how = "time order"
    else:
        order = np.arange(n)
        how = "file order (no timestamp column)"
    n_test = round(n * fraction)
    if n_test < 1 or n - n_test < 1:
        raise InputError(f"--holdout {fraction}: {n} request(s) cannot be split into a fitting part and a held-out part")
    return trace.subset(order[: n - n_test]), trace.subset(order[n - n_test :]), how


def _context_ladder(trace: DecodeTrace, k: int) -> list[int]:
    """The prefill (context-encoding) ladder for the prompts, NxD Inference's strict fit, 128 at least."""
    return propose_buckets(trace.prompts, max(1, k), fit=Fit.STRICT).edges


def _prefill_ladder(context_edges: list[int], rule: RuntimeRule, top: int) -> list[int]:
    """The prefill ladder reused for token generation (what the prefill config snippet sets), its last edge raised to ``top``."""
    edges = [e for e in context_edges[:-1] if e < top]  # its last edge (the longest prompt) becomes top
    if rule.multiple_of:
        edges = sorted({int(round_up(e, rule.multiple_of)) for e in edges if round_up(e, rule.multiple_of) < top})
    return [*edges, top]


def _replay(
    trace: DecodeTrace, max_batch: int, shift: int, rule: RuntimeRule, tps: float | None, step_times: StepTimeFit | None, notes: list[str]
) -> tuple[Replay, str]:
    assert trace.arrivals is not None
    if tps is not None:
        return replay(trace.prompts, trace.outputs, trace.arrivals, max_batch, shift, step_seconds=1.0 / tps), "--tokens-per-second"
    if step_times is not None:
        model = StepModel(step_times.intercept, step_times.model.a, step_times.model.b, "seconds", "")
        return replay(trace.prompts, trace.outputs, trace.arrivals, max_batch, shift, step_model=model), "--step-times"
    notes.append(f"the replay assumes {DEFAULT_DECODE_TOKENS_PER_SECOND:g} decode steps per second (no --tokens-per-second or --step-times given)")
    return replay(trace.prompts, trace.outputs, trace.arrivals, max_batch, shift, step_seconds=1.0 / DEFAULT_DECODE_TOKENS_PER_SECOND), "assumed"


def _batch_plan(
    name: str, plan: Plan, nb: np.ndarray, nl: np.ndarray, w: np.ndarray, rule: RuntimeRule, real_total: float, rep: Replay, step: StepModel | None, top: int
) -> BatchPlan:
    kv = 100.0 * (plan.padded - real_total) / real_total if real_total else 0.0
    step_pct = None
    if step is not None and real_total:
        bb = np.asarray(plan.batch_buckets, dtype=np.int64)
        sb = np.asarray(plan.seq_buckets, dtype=np.int64)
        # A step of B sequences at bucket E: per_step + B x (per_token E + per_token2 E^2); at the real
        # lengths: per_step + the sum over the batch of (per_token L + per_token2 L^2).
        batch_b = bb[assign(nb, bb, Fit.INCLUSIVE)].astype(np.float64)
        seq_e = sb[assign(nl, sb, seq_fit(rule, plan.batch_buckets))].astype(np.float64)
        padded_time = float(np.sum(w * (step.per_step + batch_b * (step.per_token * seq_e + step.per_token2 * seq_e * seq_e))))
        inside = rep.longest <= top
        real_time = float(np.sum(step.per_step + step.per_token * rep.real[inside] + step.per_token2 * rep.real_sq[inside]))
        step_pct = 100.0 * (padded_time - real_time) / real_time
    return BatchPlan(name, plan.batch_buckets, plan.seq_buckets, plan.graphs, round(kv, 4), None if step_pct is None else round(step_pct, 4), plan.method)


def _score_plans_held_out(
    holdout: DecodeHoldout,
    test: DecodeTrace,
    plans: list[BatchPlan],
    max_batch: int,
    shift: int,
    rule: RuntimeRule,
    tps: float | None,
    step_times: StepTimeFit | None,
    step: StepModel | None,
    top: int,
) -> None:
    """Each batch plan on the held-out requests, replayed like the fitting part."""
    rep, _ = _replay(test, max_batch, shift, rule, tps, step_times, [])
    if not rep.steps:
        return
    nb, nl, w = step_groups(rep)
    fits = nl <= top
    real_total = float(rep.real[rep.longest <= top].sum())
    for plan in plans:
        padded = plan_cost(nb[fits], nl[fits], w[fits], plan.batch_buckets, plan.seq_buckets, rule)
        scored = _batch_plan(
            plan.name, Plan(plan.batch_buckets, plan.seq_buckets, padded, plan.method), nb[fits], nl[fits], w[fits], rule, real_total, rep, step, top
        )
        holdout.batch_plans[plan.name] = DecodeScore(scored.kv_overhead, scored.step_overhead, int(w[~fits].sum()))


def _timeline(rep: Replay, max_batch: int, source: str, plan: Plan, rule: RuntimeRule) -> DecodeTimeline:
    stride = max(1, -(-rep.steps // DECODE_TIMELINE_POINTS))
    sb = np.asarray(plan.seq_buckets, dtype=np.int64)
    bb = np.asarray(plan.batch_buckets, dtype=np.int64)
    si = assign(rep.longest, sb, seq_fit(rule, plan.batch_buckets))
    bucket = np.where(si < sb.size, sb[np.minimum(si, sb.size - 1)], 0)
    batch_bucket = bb[np.minimum(assign(rep.batch, bb, Fit.INCLUSIVE), bb.size - 1)]
    sizes, counts = np.unique(rep.batch, return_counts=True)
    return DecodeTimeline(
        requests=rep.requests,
        steps=rep.steps,
        duration_s=round(float(rep.duration), 3),
        max_batch=max_batch,
        step_seconds_source=source,
        mean_batch=round(float(rep.batch.mean()), 3) if rep.steps else 0.0,
        stride=stride,
        seconds=[round(float(x), 3) for x in rep.start[::stride].tolist()],
        batch=thin(rep.batch, stride, "max"),
        longest=thin(rep.longest, stride, "max"),
        bucket=thin(bucket, stride, "max"),
        batch_bucket=thin(batch_bucket, stride, "max"),
        batch_histogram={str(int(s)): int(c) for s, c in zip(sizes, counts, strict=True)},
    )
