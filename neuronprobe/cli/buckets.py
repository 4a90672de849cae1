"""``neuronprobe buckets``: sequence-length, decode and vLLM Neuron buckets (issues 3, 24, 37)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from neuronprobe import defaults
from neuronprobe.cli.common import (
    app,
    fail,
    guarded,
    import_paths,
    out_console,
    write,
)
from neuronprobe.cli.options import DebugOpt

# --- buckets (issue 3) -------------------------------------------------------------


@app.command()
def buckets(
    lengths: Annotated[
        Path | None,
        typer.Argument(help="Sequence lengths: one integer per line, CSV/TSV, JSON Lines or Parquet; with --decode, a trace of prompt and output lengths."),
    ] = None,
    column: Annotated[str | None, typer.Option("--column", help="The length column of a CSV/TSV/Parquet file.")] = None,
    field_: Annotated[str | None, typer.Option("--field", help="The length field of a JSON Lines file.")] = None,
    max_buckets: Annotated[
        int, typer.Option("--max-buckets", "-k", help="Most buckets (compiled graphs); the curve covers every k up to it.")
    ] = defaults.DEFAULT_MAX_BUCKETS,
    cost: Annotated[
        str,
        typer.Option("--cost", help="Padding cost f: tokens (x), attention (x^2), or A,B for A*x + B*x^2."),
    ] = "tokens",
    step_times: Annotated[
        Path | None,
        typer.Option("--step-times", help="CSV with columns length,seconds: fit A,B of the cost from measured steps."),
    ] = None,
    max_len: Annotated[int | None, typer.Option("--max-len", help="The last bucket (default: the longest length).")] = None,
    multiple_of: Annotated[int | None, typer.Option("--multiple-of", help="Every edge a multiple of this (tile size, e.g. 128).")] = None,
    min_bucket: Annotated[int | None, typer.Option("--min-bucket", help="The smallest allowed edge.")] = None,
    fit: Annotated[
        str,
        typer.Option(
            "--fit",
            help="inclusive: a length goes to the first edge >= it; strict: the first edge > it (NxD Inference's runtime rule).",
        ),
    ] = defaults.DEFAULT_FIT,
    compile_seconds: Annotated[
        float | None,
        typer.Option("--compile-seconds", help="Compile time per graph: choose k by runtime + compile cost."),
    ] = None,
    compile_weight: Annotated[
        float,
        typer.Option("--compile-weight", help="Cost units one compile-second is worth (see README: choosing k)."),
    ] = defaults.DEFAULT_COMPILE_WEIGHT,
    holdout: Annotated[
        float | None,
        typer.Option("--holdout", help="Fit on the first part (time order if there is a timestamp), score on this share."),
    ] = None,
    config: Annotated[
        str,
        typer.Option("--config", help="Snippet to print: nxd_inference, transformers_neuronx, vllm_neuron, list, all, none."),
    ] = "nxd_inference",
    json_path: Annotated[Path | None, typer.Option("--json", help="Write the proposal as JSON here.")] = None,
    # --- decode (issue 24): token-generation and batch buckets, memory fit per TP degree ---
    decode: Annotated[bool, typer.Option("--decode", help="Token-generation buckets from a trace of prompt and output lengths.")] = False,
    prompt_column: Annotated[
        str | None, typer.Option("--prompt-column", help="--decode: the prompt-length column (default: ContextTokens, prompt_tokens, ...).")
    ] = None,
    output_column: Annotated[
        str | None, typer.Option("--output-column", help="--decode: the output-length column (default: GeneratedTokens, output_tokens, ...).")
    ] = None,
    time_column: Annotated[str | None, typer.Option("--time-column", help="--decode: the arrival-time column (default: TIMESTAMP, time, ...).")] = None,
    runtime: Annotated[
        str,
        typer.Option("--runtime", help="--decode: nxdi, vllm-neuron-nxdi or tnx (their bucket fit rules); vllm-neuron: the current plugin's three ladders."),
    ] = defaults.DEFAULT_DECODE_RUNTIME,
    speculation_length: Annotated[int, typer.Option("--speculation-length", help="--decode: speculative tokens per step (shifts the required length).")] = 0,
    model: Annotated[
        str | None, typer.Option("--model", help="--decode: hf:<model_type> or model.py (config only): KV bytes and the memory fit per TP degree.")
    ] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="--decode with --model hf:...: override a config field, KEY=VALUE.")] = None,
    import_path: Annotated[
        list[Path] | None, typer.Option("--path", help="--decode with --model model.py: a folder it imports packages from (repeatable).")
    ] = None,
    target: Annotated[str, typer.Option("--target", help="--decode with --model: trn1, inf2 or trn2.")] = defaults.DEFAULT_TARGET,
    dtype: Annotated[str, typer.Option("--dtype", help="--decode with --model: weight and KV dtype (NxD Inference's default bfloat16).")] = "bfloat16",
    reserve_gib: Annotated[
        float | None, typer.Option("--reserve-gib", help="--decode with --model: GiB per core kept for runtime code, scratchpad and DMA rings.")
    ] = None,
    tp_degree: Annotated[
        int | None, typer.Option("--tp-degree", help="--decode with --model: model step time at this TP degree (default: the smallest that fits).")
    ] = None,
    max_batch: Annotated[
        int | None, typer.Option("--max-batch", help="--decode: replay continuous batching with at most this many sequences (needs timestamps).")
    ] = None,
    tokens_per_second: Annotated[float | None, typer.Option("--tokens-per-second", help="--decode: decode steps per second in the replay.")] = None,
    max_graphs: Annotated[int | None, typer.Option("--max-graphs", help="--decode: compiled decode graphs (batch x sequence buckets) allowed.")] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", help="--decode --model model.py: wall-clock limit of importing and building it (in a worker), seconds.")
    ] = defaults.DEFAULT_MODEL_SHAPE_TIMEOUT_S,
    # --- serving on vLLM Neuron (issue 37): vLLM's own option names; shape_buckets/serving_cli.py ---
    metrics: Annotated[list[Path] | None, typer.Option("--metrics", help="vllm-neuron: a /metrics scrape (repeatable): traffic and compile times.")] = None,
    max_num_batched_tokens: Annotated[int | None, typer.Option("--max-num-batched-tokens", help="vllm-neuron: vLLM's max_num_batched_tokens.")] = None,
    max_num_seqs: Annotated[int | None, typer.Option("--max-num-seqs", help="vllm-neuron: vLLM's max_num_seqs.")] = None,
    max_model_len: Annotated[int | None, typer.Option("--max-model-len", help="vllm-neuron: vLLM's max_model_len.")] = None,
    tensor_parallel_size: Annotated[int, typer.Option("--tensor-parallel-size", help="vllm-neuron: vLLM's tensor_parallel_size.")] = 1,
    sequence_parallel: Annotated[
        bool | None,
        typer.Option("--sequence-parallel/--no-sequence-parallel", help="vllm-neuron: prefill buckets divisible by the TP degree (default: on with TP > 1)."),
    ] = None,
    kv_segment_size: Annotated[int | None, typer.Option("--kv-segment-size", help="vllm-neuron: segmented prefill, kv_segment_size_buckets=[N].")] = None,
    compile_budget: Annotated[
        float | None, typer.Option("--compile-budget", help="vllm-neuron: minutes of compile wall time allowed (needs measured times).")
    ] = None,
    compile_times: Annotated[
        Path | None,
        typer.Option(
            "--compile-times",
            help="vllm-neuron: measured compile times: CSV graph,seconds[,host_gib], get_dynamo_metrics() JSON, a neuron_parallel_compile log, "
            "a torch-xla metrics_report() text or a previous neuronprobe --json (format sniffed).",
        ),
    ] = None,
    cached_column: Annotated[
        str | None,
        typer.Option("--cached-column", help="vllm-neuron: trace column of prefix-cache hit tokens per request (default: cached_tokens if present)."),
    ] = None,
    compile_workers: Annotated[int, typer.Option("--compile-workers", help="vllm-neuron: NEURON_LIBTORCH_PARALLEL_COMPILE_WORKERS (default 8).")] = 8,
    host_memory_gib: Annotated[float | None, typer.Option("--host-memory-gib", help="vllm-neuron: the compile host's RAM.")] = None,
    decode_step_seconds: Annotated[float | None, typer.Option("--decode-step-seconds", help="vllm-neuron: seconds of a full-shape decode step.")] = None,
    prefill_tokens_per_second: Annotated[float | None, typer.Option("--prefill-tokens-per-second", help="vllm-neuron: prefill rate.")] = None,
    kv_share: Annotated[float | None, typer.Option("--kv-share", help="vllm-neuron: share of a full-shape decode step spent reading KV.")] = None,
    debug: DebugOpt = False,
) -> None:
    """Propose the sequence-length buckets that minimise padding for a real length distribution."""
    with guarded(debug):
        if metrics or (decode and runtime == "vllm-neuron"):
            from neuronprobe.shape_buckets.serving_cli import ServingOptions, run_serving
            from neuronprobe.shape_buckets.serving_console import render_serving

            served = run_serving(
                ServingOptions(
                    lengths, list(metrics or []), max_num_batched_tokens, max_num_seqs, max_model_len, tensor_parallel_size,
                    sequence_parallel, kv_segment_size, speculation_length, 32, max_graphs, compile_budget, compile_times,
                    compile_workers, host_memory_gib, decode_step_seconds, prefill_tokens_per_second, kv_share,
                    prompt_column, output_column, time_column, json_path, cached_column,
                    unused={"--model": model is not None, "--max-batch": max_batch is not None, "--step-times": step_times is not None, "--holdout": holdout is not None},
                )
            )  # fmt: skip
            _print_and_write(render_serving(served), served, json_path, plain=True)
            return
        if any(v is not None for v in (max_num_batched_tokens, max_num_seqs, max_model_len, compile_budget, compile_times)):
            raise fail(
                "--max-num-batched-tokens, --max-num-seqs, --max-model-len, --compile-budget, --compile-times: with --decode --runtime vllm-neuron or --metrics"
            )
        if lengths is None:
            raise fail("give a lengths file (or a trace with --decode, or --metrics SCRAPE)")

        if decode:
            from neuronprobe.shape_buckets.decode_cli import DecodeOptions, run_decode

            options = DecodeOptions(
                trace=lengths,
                max_buckets=max_buckets,
                prompt_column=prompt_column,
                output_column=output_column,
                time_column=time_column,
                runtime=runtime,
                speculation_length=speculation_length,
                max_len=max_len,
                step_times=step_times,
                model=model,
                overrides=tuple(set_ or ()),
                paths=tuple(str(p) for p in import_paths(import_path)),
                target=target,
                dtype=dtype,
                reserve_gib=reserve_gib,
                tp_degree=tp_degree,
                max_batch=max_batch,
                tokens_per_second=tokens_per_second,
                max_graphs=max_graphs,
                holdout=holdout,
                config=config,
                json_path=json_path,
                unused={
                    "--cost": cost != "tokens",
                    "--column": column is not None,
                    "--field": field_ is not None,
                    "--fit": fit != defaults.DEFAULT_FIT,
                    "--multiple-of": multiple_of is not None,
                    "--min-bucket": min_bucket is not None,
                    "--compile-seconds": compile_seconds is not None,
                },
                load_shape=_shape_in_worker(timeout),
            )
            from neuronprobe.shape_buckets.decode_console import render_decode

            decoded = run_decode(options)
            _print_and_write(render_decode(decoded, config=options.config), decoded, json_path)
            return

        proposal = _proposal(
            lengths,
            column,
            field_,
            config,
            cost,
            step_times,
            json_path,
            max_buckets,
            max_len,
            multiple_of,
            min_bucket,
            fit,
            compile_seconds,
            compile_weight,
            holdout,
        )
        from neuronprobe.shape_buckets.console import render_proposal

        _print_and_write(render_proposal(proposal, config=config), proposal, json_path)


def _proposal(
    lengths: Path,
    column: str | None,
    field_: str | None,
    config: str,
    cost: str,
    step_times: Path | None,
    json_path: Path | None,
    max_buckets: int,
    max_len: int | None,
    multiple_of: int | None,
    min_bucket: int | None,
    fit: str,
    compile_seconds: float | None,
    compile_weight: float,
    holdout: float | None,
) -> Any:
    """``buckets LENGTHS``: the flags checked against each other, the lengths read, the ladder proposed."""
    from neuronprobe.files import check_outputs
    from neuronprobe.shape_buckets import fit_step_times, propose_buckets, read_lengths, read_step_times
    from neuronprobe.shape_buckets.configs import CONFIG_NAMES

    if config not in (*CONFIG_NAMES, "all", "none"):
        raise fail(f"--config {config!r}: use {', '.join(CONFIG_NAMES)}, all or none")
    if step_times is not None and cost != "tokens":
        raise fail("give either --cost or --step-times, not both")
    if json_path is not None:
        check_outputs([("--json", json_path)], [lengths, step_times])
    data = read_lengths(lengths, column=column, field=field_)
    cost_model: Any = cost if step_times is None else fit_step_times(*read_step_times(step_times))
    return propose_buckets(
        data,
        max_buckets,
        cost=cost_model,
        max_len=max_len,
        multiple_of=multiple_of,
        min_bucket=min_bucket,
        fit=fit,
        compile_seconds=compile_seconds,
        compile_weight=compile_weight,
        holdout=holdout,
    )


def _print_and_write(parts: Any, result: Any, json_path: Path | None, *, plain: bool = False) -> None:
    """The rendered parts on stdout, and the result as versioned JSON (``schema_version`` first) when asked."""
    from neuronprobe.shape_buckets.documents import buckets_json

    console = out_console()
    for part in parts:
        if plain:  # the serving plan's lines are text, never markup
            console.print(part, markup=False, highlight=False, soft_wrap=True)
        else:
            console.print(part)
    if json_path is not None:
        write(json_path, buckets_json(result))
        console.print(f"json: {json_path}", markup=False)


def _shape_in_worker(timeout: float) -> Callable[[str, tuple[str, ...], tuple[str, ...]], Any]:
    """``buckets --decode --model model.py``: the file is imported and built in a killable worker, never here."""
    from neuronprobe.options import check_seconds

    seconds = check_seconds(timeout, "--timeout")

    def load(spec: str, overrides: tuple[str, ...], paths: tuple[str, ...] = ()) -> Any:
        from neuronprobe.process.worker import PlainResult, WorkerLimits, run_in_worker, spec_model_file
        from neuronprobe.shape_buckets.memory import load_model_shape

        return run_in_worker(
            lambda: PlainResult(load_model_shape(spec, overrides, paths)), label=spec, model_file=spec_model_file(spec), limits=WorkerLimits(timeout_s=seconds)
        )

    return load
