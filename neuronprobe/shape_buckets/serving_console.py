"""Console text of a :class:`ServingPlan` (``buckets ... --runtime vllm-neuron``, ``buckets --metrics``, the report)."""

from __future__ import annotations

import json

from neuronprobe.report.schema.serving import ServingLadders, ServingPlan


def _minutes(seconds: float | None) -> str:
    return "uncalibrated" if seconds is None else f"{seconds / 60:.1f} min"


def _row(x: ServingLadders) -> str:
    return (
        f"  {x.name}: {x.graphs} graphs ({x.prefill_graphs} prefill + {x.decode_graphs} decode), "
        f"prefill padding {x.prefill_overhead:.1f}%, decode KV padding {x.kv_overhead:.1f}%, "
        f"modelled time +{x.time_overhead:.1f}% over unpadded, compile {_minutes(x.compile_seconds)}"
    )


def render_serving(plan: ServingPlan) -> list[str]:
    """Plain text lines: the plan, the baselines, the compile bill, the config to paste, the assumptions."""
    p = plan.proposed
    e = plan.engine
    out = [
        f"vLLM Neuron serving plan for {plan.source} ({plan.traffic}: {plan.requests} requests, {plan.prefill_steps} prefill steps, {plan.decode_steps} decode steps)",
        f"engine: max_num_batched_tokens={e.get('max_num_batched_tokens')} max_num_seqs={e.get('max_num_seqs')} "
        f"max_model_len={e.get('max_model_len')} tensor_parallel_size={e.get('tensor_parallel_size')}; "
        f"--max-graphs {plan.max_graphs}" + ("" if plan.compile_budget_minutes is None else f", --compile-budget {plan.compile_budget_minutes:g} min"),
    ]
    if p is not None:
        out += [
            f"num_batched_tokens_buckets: {p.prefill_buckets}",
            f"num_seqs_buckets: {p.batch_buckets}",
            f"decode_context_length_buckets: {p.context_buckets or 'none'} (+ the max_model_len graph)",
            f"search: {p.method}",
            "ladders on the same replay:",
            _row(p),
        ]
    out += [_row(b) for b in plan.baselines]
    bill = plan.compile_bill
    if bill.calibrated:
        out.append(
            f"compile bill: {len(bill.graphs)} graphs, {_minutes(bill.wall_seconds)} on {bill.workers} workers "
            f"({_minutes(bill.serial_seconds)} serial), from {bill.source}"
            + ("" if bill.host_peak_gib is None else f"; host RAM peak {bill.host_peak_gib:.1f} GiB")
            + ("" if bill.host_memory_gib is None or bill.host_peak_gib is None else f" of {bill.host_memory_gib:g} GiB")
            + (
                ""
                if bill.host_memory_gib is None or bill.host_peak_gib is not None
                else f"; host RAM peak uncalibrated, the instance has {bill.host_memory_gib:g} GiB"
            )
        )
    else:
        out.append(f"compile bill: {len(bill.graphs)} graphs; {bill.how_to_calibrate}")
    out += [f"  note: {n}" for n in bill.notes]
    out.append("vllm serve " + " ".join(plan.vllm_args))
    out.append("additional_config: " + json.dumps(plan.additional_config))
    out += [f"note: {n}" for n in plan.notes]
    out += [f"rule: {r}" for r in plan.rules]
    out += [f"assumption: {a}" for a in plan.assumptions]
    return out
