"""What ``buckets TRACE --decode --runtime vllm-neuron`` and ``buckets --metrics SCRAPE`` do between parsing and printing (cli.py stays thin)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from neuronprobe.errors import InputError
from neuronprobe.report.schema.serving import ServingPlan


@dataclass
class ServingOptions:
    trace: Path | None
    metrics: list[Path] = field(default_factory=list)
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    max_model_len: int | None = None
    tensor_parallel_size: int = 1
    sequence_parallel: bool | None = None  # None: vLLM Neuron's own (on when tensor_parallel_size > 1)
    kv_segment_size: int | None = None
    speculation_length: int = 0
    block_size: int = 32
    max_graphs: int | None = None
    compile_budget: float | None = None
    compile_times: Path | None = None
    compile_workers: int = 8
    host_memory_gib: float | None = None
    decode_step_seconds: float | None = None
    prefill_tokens_per_second: float | None = None
    kv_share: float | None = None
    prompt_column: str | None = None
    output_column: str | None = None
    time_column: str | None = None
    json_path: Path | None = None
    cached_column: str | None = None
    unused: dict[str, bool] = field(default_factory=dict)


def run_serving(o: ServingOptions) -> ServingPlan:
    """Check the options, read the inputs, plan. InputError (exit 2) for anything unusable."""
    given = [flag for flag, on in o.unused.items() if on]
    if given:
        raise InputError(f"{', '.join(given)}: not used by --runtime vllm-neuron (it takes vLLM's own options: see `neuronprobe buckets --help`)")
    missing = [
        flag
        for flag, v in (
            ("--max-num-batched-tokens", o.max_num_batched_tokens),
            ("--max-num-seqs", o.max_num_seqs),
            ("--max-model-len", o.max_model_len),
        )
        if v is None
    ]
    if missing:
        raise InputError(f"--runtime vllm-neuron needs the server's {', '.join(missing)} (vLLM's own options)")
    assert o.max_num_batched_tokens is not None and o.max_num_seqs is not None and o.max_model_len is not None
    if o.json_path is not None:
        from neuronprobe.files import check_outputs

        check_outputs([("--json", o.json_path)], [o.trace, o.compile_times, *o.metrics])
    trace = None
    if o.trace is not None:
        from neuronprobe.files import check_input_file
        from neuronprobe.shape_buckets.decode_trace import read_decode_trace

        check_input_file(o.trace, "trace")
        trace = read_decode_trace(o.trace, o.prompt_column, o.output_column, o.time_column, cached_column=o.cached_column)
    elif o.cached_column is not None:
        raise InputError("--cached-column: give a trace (prefix-cache hits are per request)")
    for m in o.metrics:
        from neuronprobe.files import check_input_file

        check_input_file(m, "metrics scrape")
    from neuronprobe.shape_buckets.serving import propose_serving_plan

    return propose_serving_plan(
        trace,
        max_num_batched_tokens=o.max_num_batched_tokens,
        max_num_seqs=o.max_num_seqs,
        max_model_len=o.max_model_len,
        tensor_parallel_size=o.tensor_parallel_size,
        sequence_parallel=o.sequence_parallel,
        kv_segment_size=o.kv_segment_size,
        num_speculative_tokens=o.speculation_length,
        block_size=o.block_size,
        max_graphs=o.max_graphs,
        compile_budget_minutes=o.compile_budget,
        metrics=o.metrics,
        compile_times=o.compile_times,
        compile_workers=o.compile_workers,
        host_memory_gib=o.host_memory_gib,
        decode_step_seconds=o.decode_step_seconds,
        prefill_tokens_per_second=o.prefill_tokens_per_second,
        kv_share=o.kv_share,
    )
