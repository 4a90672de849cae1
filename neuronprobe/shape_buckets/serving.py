"""``neuronprobe.propose_serving_plan``: vLLM Neuron ladders from a request trace or from the server's own metrics (issue 37).

Library entry point; ``buckets TRACE --decode --runtime vllm-neuron`` and ``buckets --metrics
SCRAPE`` call it. The result's ``frames()`` gives pandas DataFrames.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from neuronprobe.defaults import DEFAULT_DECODE_TOKENS_PER_SECOND
from neuronprobe.errors import InputError
from neuronprobe.report.schema.serving import ServingPlan
from neuronprobe.shape_buckets.compile_bill import DEFAULT_COMPILE_WORKERS, HOW_TO_CALIBRATE, Sample, parse_bucket_name
from neuronprobe.shape_buckets.serving_plan import TimeModel, Traffic, plan_from_traffic
from neuronprobe.shape_buckets.vllm_neuron import DEFAULT_BLOCK_SIZE, Clock, SchedulerConfig, replay_vllm_neuron
from neuronprobe.shape_buckets.vllm_neuron_rules import Deployment

# Assumed rates when the user gives none (the report says so): the decode rate is the decode
# planner's existing default; a prefill rate of 4096 tokens/s and half of a full-shape decode
# step spent reading KV are placeholders that only weigh prefill padding against decode padding.
DEFAULT_PREFILL_TOKENS_PER_SECOND = 4096.0
DEFAULT_KV_SHARE = 0.5

# Rules the docs settle, each with its source (aws-neuron-sdk@81ce03ae, vllm-neuron/docs/): the report lists them as "rule:".
RULES = (
    "design/vllm/neuron-scheduler.md: one prefill per step, prefill and decode never share a step, FIFO admission below max_num_seqs, "
    "prefill priority, chunks of min(max_num_batched_tokens, max_model_len), each step padded to the smallest bucket >= its size",
    "design/multimodal/on_device_encoder_cache.md: the prefill that completes a prompt generates its first token, so O output tokens take O - 1 decode steps",
    "design/vllm/prefix-caching.md: cached prefix tokens are block-aligned and the prefill computes only the rest (num_computed_tokens > 0)",
    "design/vllm/decode-context-length-bucketing.md: the smallest context bucket >= the batch's largest KV position, else the max_model_len graph; "
    "decode graphs = batch buckets x (context buckets + 1), x3 with EAGLE3",
    "design/vllm/neuron-scheduler.md get_default_num_batched_tokens_buckets: default prefill buckets are the powers of two from 128 up to "
    "min(max_num_batched_tokens, max_model_len)",
    "design/vllm/prefix-caching.md, guides/reference-configuration.md: with segmented prefill num_batched_tokens_buckets = kv_segment_size_buckets, "
    "one size, divisible by block_size",
)
# Sequence parallelism: prefill runs sequence-parallel under TP for every architecture (design/framework/model_bringup.md), so it
# is on by default when tensor_parallel_size > 1; the rule is printed only when it applies.
SP_RULE_SOURCE = (
    "design/parallelism/tensor_parallelism.md: prefill runs sequence-parallel under TP (model_bringup.md: every architecture), "
    "so each prefill bucket T must satisfy T > tensor_parallel_size and T % tensor_parallel_size == 0 ('SP validation')"
)
# What the docs leave open (the report lists them as "assumption:").
ASSUMPTIONS = (
    "a prefix-cache hit excludes the last prompt token (vLLM v1 KVCacheManager recomputes it; the Neuron docs do not say); "
    "without a cached-tokens column there are no hits",
    "EAGLE prefill graphs x2 per prefill bucket (target prefill + draft initial pass); the draft's K-1 recurrent passes of that warmup "
    "are taken to share its decode graphs' shapes and are not counted again (speculative_decoding_design.md 'Prefill warmup' gives no count)",
    "a text-only model: a multimodal model's vision-encoder graphs (num_vision_tokens_buckets, reference-configuration.md) "
    "compile on top of the graphs counted here",
    "default num_seqs_buckets with a max_num_seqs that is not a power of two end with max_num_seqs (additional-config.md: "
    "'powers of two from 1 up to max_num_seqs' and 'the largest bucket must equal max_num_seqs')",
    "the KV cache holds max_num_seqs requests of max_model_len tokens: the scheduler's _max_kv_concurrent (KV blocks / max_model_len, "
    "neuron-scheduler.md 'Deadlock Prevention') depends on the device's memory and is taken as >= max_num_seqs; a smaller KV cache "
    "admits fewer requests at once than replayed",
)
# reference-configuration.md lists 8192 among the kv_segment_size values; prefix-caching.md's kernel constraints list {512, ..., 4096}.
KV_SEGMENT_8192 = (
    "kv_segment_size 8192 is accepted as guides/reference-configuration.md lists it; design/vllm/prefix-caching.md's kernel constraints "
    "stop at 4096: check that your vLLM Neuron accepts it"
)

# How a scrape is read where design/vllm/metrics.md gives one line per metric (the report lists it when the traffic is a scrape).
METRICS_ASSUMPTION = (
    "each vllm_neuron:num_batched_tokens_padding / num_seqs_padding observation is one execution's padding, the bucket minus the real "
    "tokens or batch lines (design/vllm/metrics.md: 'Number of padded sequence lengths / batch lines processed'); rank_id 0's series "
    "stand for every rank"
)


def _trace_arrays(trace: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None, str]:
    from neuronprobe.shape_buckets.decode import as_decode_trace

    cached = None
    if hasattr(trace, "columns"):
        lower = {str(c).lower(): c for c in trace.columns}
        col = next((lower[n] for n in ("cached_tokens", "cached", "prefix_cached") if n in lower), None)
        if col is not None:
            cached = np.asarray(trace[col].to_numpy(), dtype=np.float64)
            if not np.all(np.isfinite(cached)) or (cached < 0).any() or (cached != np.floor(cached)).any():
                raise InputError(f"column {col!r}: cached tokens must be whole numbers >= 0")
            cached = cached.astype(np.int64)
    t = as_decode_trace(trace)
    if cached is None and getattr(t, "cached", None) is not None:
        cached = t.cached
    if t.arrivals is None:
        raise InputError(
            f"{t.source or 'the trace'}: replaying vLLM Neuron's scheduler needs arrival times; it has no timestamp column "
            "that parses as numbers or dates on every row (name one with --time-column)"
        )
    return t.prompts, t.outputs, t.arrivals, cached, t.source


def propose_serving_plan(
    trace: Any = None,
    *,
    max_num_batched_tokens: int,
    max_num_seqs: int,
    max_model_len: int,
    tensor_parallel_size: int = 1,
    sequence_parallel: bool | None = None,
    kv_segment_size: int | None = None,
    num_speculative_tokens: int = 0,
    block_size: int = DEFAULT_BLOCK_SIZE,
    max_graphs: int | None = None,
    compile_budget_minutes: float | None = None,
    metrics: Sequence[str | Path] = (),
    compile_times: str | Path | None = None,
    compile_workers: int = DEFAULT_COMPILE_WORKERS,
    host_memory_gib: float | None = None,
    decode_step_seconds: float | None = None,
    prefill_tokens_per_second: float | None = None,
    kv_share: float | None = None,
) -> ServingPlan:
    """Plan vLLM Neuron's ``num_batched_tokens_buckets``, ``num_seqs_buckets`` and ``decode_context_length_buckets``.

    ``trace``: a :class:`DecodeTrace` with arrival times, a DataFrame (prompt, output, arrival
    columns, optionally ``cached_tokens``), or (prompts, outputs, arrivals); or None with
    ``metrics``: scrapes of the server's ``/metrics`` (the padding histograms become the traffic).
    Scrapes with ``vllm_neuron:compilation_time_seconds`` and ``compile_times`` (CSV
    graph,seconds[,host_gib]) calibrate the compile bill; without them it is uncalibrated and
    ``compile_budget_minutes`` is refused. ``max_graphs``: the most graphs (default: what the
    default ladders compile). ``sequence_parallel``: None follows vLLM Neuron (on when
    ``tensor_parallel_size > 1``). Raises InputError for unusable input.
    """
    cfg = SchedulerConfig(max_num_batched_tokens, max_num_seqs, max_model_len, num_speculative_tokens, block_size)
    cfg.check()
    _check_planning_options(tensor_parallel_size, max_graphs, compile_workers, host_memory_gib)
    sp = tensor_parallel_size > 1 if sequence_parallel is None else bool(sequence_parallel)
    dep = Deployment(cfg, int(tensor_parallel_size), sp, kv_segment_size)
    tm = _time_model(decode_step_seconds, prefill_tokens_per_second, kv_share)
    assumptions = [
        *ASSUMPTIONS,
        f"block_size {block_size} (vLLM's block_size; reference-configuration.md's default is 32): prefix-cache hits count in whole blocks",
    ]
    if kv_segment_size == 8192:
        assumptions.append(KV_SEGMENT_8192)
    if tm.assumed:
        assumptions.append(
            f"time model assumed: {tm.decode_step_seconds:g} s per full-shape decode step, {tm.prefill_tokens_per_second:g} prefill tokens/s, "
            f"KV share {tm.kv_share:g}; give --decode-step-seconds, --prefill-tokens-per-second and --kv-share from your server"
        )
    measured = _measurements(metrics, compile_times, max_model_len)
    notes = measured.notes
    samples, calib, compiled_before, mt = measured.samples, measured.sources, measured.compiled_before, measured.scraped
    traffic, source, kind, requests = _traffic(trace, mt, cfg, tm, notes)
    if kind == "metrics":
        assumptions.append(METRICS_ASSUMPTION)
    plan = plan_from_traffic(
        traffic,
        dep,
        tm,
        max_graphs=max_graphs,
        compile_budget_minutes=compile_budget_minutes,
        samples=samples,
        workers=compile_workers,
        host_memory_gib=host_memory_gib,
        source=source,
        traffic_kind=kind,
        requests=requests,
        assumptions=assumptions,
        rules=[*RULES, *([SP_RULE_SOURCE] if sp else [])],
        notes=notes,
        calibration_source="; ".join(calib),
    )
    if compiled_before is not None and plan.proposed is not None:
        plan.notes.append(
            f"the measured torch-xla run compiled {compiled_before} distinct graph(s) (UncachedCompile); this plan compiles {plan.proposed.graphs}, "
            f"the default ladders {plan.baselines[0].graphs}"
        )
    return plan


def _check_planning_options(tensor_parallel_size: int, max_graphs: int | None, compile_workers: int, host_memory_gib: float | None) -> None:
    """One sentence for the first planning option out of its range."""
    if isinstance(tensor_parallel_size, bool) or int(tensor_parallel_size) != tensor_parallel_size or not 1 <= tensor_parallel_size <= 1024:
        raise InputError(f"--tensor-parallel-size {tensor_parallel_size}: use a whole number between 1 and 1024")
    if max_graphs is not None and (isinstance(max_graphs, bool) or int(max_graphs) != max_graphs or not 1 <= max_graphs <= 10000):
        raise InputError(f"--max-graphs {max_graphs}: use a whole number between 1 and 10000")
    if not 1 <= compile_workers <= 4096:
        raise InputError(f"--compile-workers {compile_workers}: use a whole number between 1 and 4096")
    if host_memory_gib is not None and not (np.isfinite(host_memory_gib) and host_memory_gib > 0):
        raise InputError(f"--host-memory-gib {host_memory_gib}: use a number of GiB > 0")
    from neuronprobe.limits import MAX_HOST_MEMORY_GIB, check_range

    check_range(host_memory_gib, "--host-memory-gib", 0, MAX_HOST_MEMORY_GIB, whole=False)


def _time_model(decode_step_seconds: float | None, prefill_tokens_per_second: float | None, kv_share: float | None) -> TimeModel:
    """The rates given, the defaults for the others; ``assumed`` unless all three were given."""
    given = decode_step_seconds is not None and prefill_tokens_per_second is not None and kv_share is not None
    tm = TimeModel(
        decode_step_seconds if decode_step_seconds is not None else 1.0 / DEFAULT_DECODE_TOKENS_PER_SECOND,
        prefill_tokens_per_second if prefill_tokens_per_second is not None else DEFAULT_PREFILL_TOKENS_PER_SECOND,
        kv_share if kv_share is not None else DEFAULT_KV_SHARE,
        assumed=not given,
    )
    Clock(tm.decode_step_seconds, tm.prefill_tokens_per_second).check()
    tm.check()
    return tm


@dataclass
class _Measurements:
    """What the server's scrapes and a compile-times file measured: compile samples and where they came from."""

    samples: list[Sample] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)  # the calibration's sources, for the compile bill
    compiled_before: int | None = None  # distinct graphs the measured torch-xla run compiled
    scraped: Any = None  # the scrapes' traffic (shape_buckets.metrics), None without --metrics
    notes: list[str] = field(default_factory=list)


def _measurements(metrics: Sequence[str | Path], compile_times: str | Path | None, max_model_len: int) -> _Measurements:
    out = _Measurements()
    scrapes = []
    if metrics:
        from neuronprobe.shape_buckets.metrics import read_scrape

        scrapes = [read_scrape(Path(m)) for m in metrics]
    if compile_times is not None:
        from neuronprobe.shape_buckets.compile_inputs import read_compile_measurements

        measured = read_compile_measurements(Path(compile_times), max_model_len)
        out.samples += measured.samples
        out.notes += measured.notes
        out.sources.append(f"{compile_times} ({measured.format})")
        out.compiled_before = measured.graphs_compiled
    if scrapes:
        from neuronprobe.shape_buckets.metrics import traffic_from_scrapes

        mt = out.scraped = traffic_from_scrapes(scrapes)
        out.notes += mt.notes
        for name, sec in mt.compile_seconds.items():
            parsed = parse_bucket_name(name, max_model_len)
            if parsed is not None:
                out.samples.append(Sample(name, parsed[0], parsed[1], sec))
        if mt.compile_seconds:
            out.sources.append(", ".join(mt.sources) + " (vllm_neuron:compilation_time_seconds, which includes cache hits: scrape a cold start)")
    return out


def _traffic(trace: Any, mt: Any, cfg: SchedulerConfig, tm: TimeModel, notes: list[str]) -> tuple[Traffic, str, str, int]:
    """The steps to plan for: the trace replayed through the scheduler, else the scrapes' padding histograms.

    Returns the traffic, its source, its kind ("trace" or "metrics") and the requests replayed; adds to ``notes``.
    """
    if trace is not None:
        prompts, outputs, arrivals, cached, source = _trace_arrays(trace)
        rep = replay_vllm_neuron(prompts, outputs, arrivals, cfg, Clock(tm.decode_step_seconds, tm.prefill_tokens_per_second, tm.assumed), cached)
        notes += rep.notes
        if rep.cached_tokens:
            notes.append(f"{rep.cached_tokens} prompt tokens served from the prefix cache")
        return Traffic.from_replay(rep), source, "trace", rep.requests
    if mt is None:
        raise InputError("give a trace (TRACE) or at least one --metrics scrape")
    from neuronprobe.shape_buckets.metrics import resolution_words

    pv, pc = mt.values("prefill")
    bv, bc = mt.values("decode")
    if pv.size and pv.max() > cfg.prefill_top:
        raise InputError(
            f"--metrics: prefill executions of up to {int(pv.max())} tokens, more than min(--max-num-batched-tokens, --max-model-len) = {cfg.prefill_top}"
        )
    if bv.size and bv.max() > cfg.max_num_seqs:
        raise InputError(f"--metrics: decode batches of up to {int(bv.max())}, more than --max-num-seqs {cfg.max_num_seqs}")
    resolution = (resolution_words(mt.prefill), resolution_words(mt.decode))
    traffic = Traffic(pv, pc, bv, np.full(bv.size, cfg.max_model_len, dtype=np.int64), bc, 0, ctx_known=False, resolution=resolution)
    notes.append(f"prefill: {resolution[0]}")
    notes.append(f"decode batch: {resolution[1]}")
    notes.append(
        "the metrics carry no decode context length (neff_execution_count keeps its label with context buckets): no decode_context_length_buckets are planned from them"
    )
    if not pv.size and not bv.size:
        raise InputError("--metrics: the scrapes hold compile times but no padding histograms; give a trace or a scrape with vllm_neuron:*_padding")
    return traffic, ", ".join(mt.sources), "metrics", 0


ENGINE_KEYS = ("max_num_batched_tokens", "max_num_seqs", "max_model_len", "tensor_parallel_size")


def serving_for_report(
    trace_path: Path | None, engine: str | None, options: dict[str, int | None] | None = None, compile_times: Path | None = None
) -> ServingPlan:
    """The serving section ``analyze --serving-trace TRACE`` adds to a model's report.

    The engine comes from vLLM's own option names (``options``: ``--max-num-batched-tokens``,
    ``--max-num-seqs``, ``--max-model-len``, ``--tensor-parallel-size``, which ``analyze`` has no
    other use for) or from ``--serving-engine k=v,...``; a key given both ways must agree. ``compile_times``
    (``--compile-times``) prices the plan's graphs from the user's measurements, as ``buckets`` does.
    """
    given = {k: v for k, v in (options or {}).items() if v is not None}
    if trace_path is None:
        flags = (
            (["--serving-engine"] if engine is not None else [])
            + ["--" + k.replace("_", "-") for k in given]
            + (["--compile-times"] if compile_times is not None else [])
        )
        raise InputError(
            f"{', '.join(flags)}: with --serving-trace TRACE (e.g. --serving-trace trace.csv --max-num-batched-tokens 8192 --max-num-seqs 32 --max-model-len 16384)"
        )
    values: dict[str, int] = {}
    for part in (engine or "").split(",") if engine is not None else []:
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in ENGINE_KEYS:
            raise InputError(f"--serving-engine {part.strip()[:60]!r}: use KEY=N with KEY one of {', '.join(ENGINE_KEYS)}")
        try:
            values[key] = int(value) if len(value.strip()) <= 20 else -1
        except ValueError:
            raise InputError(f"--serving-engine {key}: {value.strip()[:30]!r} is not a whole number") from None
        if not 1 <= values[key] <= 2**63 - 1:
            raise InputError(f"--serving-engine {key}: {value.strip()[:30]!r} must be a whole number between 1 and 2^63-1")
    for key, v in given.items():
        if not 1 <= int(v) <= 2**63 - 1:
            raise InputError(f"--{key.replace('_', '-')} {v}: must be a whole number between 1 and 2^63-1")
        if key in values and values[key] != v:
            raise InputError(f"--{key.replace('_', '-')} {v} and --serving-engine {key}={values[key]} disagree; give one")
        values[key] = int(v)
    missing = [k for k in ENGINE_KEYS[:3] if k not in values]
    if missing:
        raise InputError(f"--serving-trace needs the server's {', '.join('--' + k.replace('_', '-') for k in missing)} (vLLM's own options)")
    from neuronprobe.files import check_input_file
    from neuronprobe.shape_buckets.decode_trace import read_decode_trace

    check_input_file(trace_path, "trace")
    if compile_times is not None:
        check_input_file(compile_times, "compile times")
    plan = propose_serving_plan(
        read_decode_trace(trace_path),
        max_num_batched_tokens=values["max_num_batched_tokens"],
        max_num_seqs=values["max_num_seqs"],
        max_model_len=values["max_model_len"],
        tensor_parallel_size=values.get("tensor_parallel_size", 1),
        compile_times=compile_times,
    )
    if not plan.compile_bill.calibrated:  # no measurements given: name the option, and the command that also reads scrapes
        engine = " ".join(f"--{k.replace('_', '-')} {values[k]}" for k in ENGINE_KEYS if k in values)
        plan.compile_bill.how_to_calibrate = (
            "uncalibrated: no compile times were measured. Price these ladders with analyze --compile-times FILE, or from a "
            f"server's scrape with neuronprobe buckets {trace_path} --decode --runtime vllm-neuron {engine} --metrics SCRAPE: "
            + HOW_TO_CALIBRATE.split(": ", 1)[1].split(". ", 1)[1]
        )
    return plan
