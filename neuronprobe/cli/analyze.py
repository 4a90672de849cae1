"""``neuronprobe analyze``: one model's compile-and-fallback analysis."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from neuronprobe import defaults
from neuronprobe.cli.common import (
    analyze_outputs,
    app,
    audit_reads,
    err_console,
    exit_on_gates,
    fail,
    guarded,
    import_paths,
    int_list,
    out_console,
    rule_table,
    split_csv,
    write,
)
from neuronprobe.cli.options import DebugOpt, PathOpt, StackOpt, SupportTableOpt
from neuronprobe.errors import EXIT_COULD_NOT_ANALYSE
from neuronprobe.vocabulary import CaptureStrategy


@app.command()
def analyze(
    model: Annotated[str, typer.Argument(help="A model file (get_model, get_example_inputs) or hf:<model_type>.")],
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="Override a config field of an hf: model, KEY=VALUE (repeatable)."),
    ] = None,
    target: Annotated[str, typer.Option(help="Neuron target: trn1, trn2 or inf2.")] = defaults.DEFAULT_TARGET,
    backend: Annotated[
        str,
        typer.Option(help="auto (the real SDK when present, else xla-cpu when set up, else static), static, neuron, xla-cpu or native-cpu (--stack native)."),
    ] = defaults.DEFAULT_BACKEND,
    sdk: Annotated[
        str | None,
        typer.Option("--sdk", help="Neuron SDK release whose rules apply, e.g. 2.31.0 (default: the newest known)."),
    ] = None,
    rules: Annotated[
        Path | None,
        typer.Option("--rules", help="A JSON rule file of your own, applied before the bundled rules."),
    ] = None,
    stack: StackOpt = None,
    support_table: SupportTableOpt = None,
    native_mode: Annotated[
        str | None,
        typer.Option(
            "--native-mode", help="--stack native: eager (default) or compile (torch.compile(backend='neuron'): recompiles, breaks, graphs that fail)."
        ),
    ] = None,
    compiler_args: Annotated[
        str | None,
        typer.Option("--compiler-args", help="neuronx-cc flags the rules follow, e.g. '--implicit-integer-downcast=none' (default: $NEURON_CC_FLAGS)."),
    ] = None,
    require_backend: Annotated[
        str | None,
        typer.Option("--require-backend", help="Fail with exit 2, before any work, unless this backend is really there."),
    ] = None,
    json_path: Annotated[Path | None, typer.Option("--json", help="Where to write the JSON report.")] = None,
    output_dir: Annotated[Path, typer.Option("--output-dir", "-o", help="Folder for the JSON and HTML reports.")] = Path("reports"),
    html: Annotated[bool, typer.Option("--html/--no-html", help="Also write the self-contained HTML report.")] = True,
    fail_on: Annotated[
        str | None,
        typer.Option("--fail-on", help="Exit 1 when a finding has one of these verdicts or rule ids, e.g. cpu_fallback,compile_error."),
    ] = None,
    shapes: Annotated[Path | None, typer.Option("--shapes", help="Traffic: JSON Lines, one call's input shapes per line.")] = None,
    lengths: Annotated[Path | None, typer.Option("--lengths", help="Traffic: sequence lengths (same formats as `buckets`).")] = None,
    column: Annotated[str | None, typer.Option("--column", help="Column of --lengths in CSV/TSV/Parquet.")] = None,
    decode_trace: Annotated[
        Path | None, typer.Option("--decode-trace", help="Serving trace (prompt and output lengths): adds decode buckets to the report.")
    ] = None,
    serving_trace: Annotated[
        Path | None, typer.Option("--serving-trace", help="Timed serving trace: adds a vLLM Neuron serving plan (needs --serving-engine).")
    ] = None,
    serving_engine: Annotated[
        str | None,
        typer.Option("--serving-engine", help="With --serving-trace: max_num_batched_tokens=N,max_num_seqs=N,max_model_len=N[,tensor_parallel_size=N]."),
    ] = None,
    serving_max_num_batched_tokens: Annotated[
        int | None, typer.Option("--max-num-batched-tokens", help="With --serving-trace: vLLM's max_num_batched_tokens.")
    ] = None,
    serving_max_num_seqs: Annotated[int | None, typer.Option("--max-num-seqs", help="With --serving-trace: vLLM's max_num_seqs.")] = None,
    serving_max_model_len: Annotated[int | None, typer.Option("--max-model-len", help="With --serving-trace: vLLM's max_model_len.")] = None,
    serving_tp: Annotated[int | None, typer.Option("--tensor-parallel-size", help="With --serving-trace: vLLM's tensor_parallel_size.")] = None,
    field_: Annotated[str | None, typer.Option("--field", help="Field of --lengths in JSON Lines.")] = None,
    batch_sizes: Annotated[
        str | None,
        typer.Option(
            "--batch-sizes",
            help="Batch sizes to combine with --lengths, e.g. 1,4,8; with --train and no --lengths, the epoch's batches.",
        ),
    ] = None,
    buckets: Annotated[str | None, typer.Option("--buckets", help="Bucket edges for the bucketed policy, e.g. 128,256,512.")] = None,
    max_buckets: Annotated[int, typer.Option("--max-buckets", help="Most buckets to propose for the traffic.")] = defaults.DEFAULT_MAX_BUCKETS,
    compile_seconds: Annotated[float | None, typer.Option("--compile-seconds", help="Estimated compile time per graph, in seconds.")] = None,
    max_compiles: Annotated[int, typer.Option("--max-compiles", help="Most distinct shapes to compile on CPU as evidence.")] = defaults.DEFAULT_MAX_COMPILES,
    fail_on_recompiles: Annotated[
        int | None,
        typer.Option("--fail-on-recompiles", help="Exit 1 when the static policy needs more than N graphs."),
    ] = None,
    timeout: Annotated[
        float,
        typer.Option("--timeout", help="Wall-clock limit of the whole analysis (the model code runs in a worker that is killed after it), seconds."),
    ] = defaults.DEFAULT_TIMEOUT_S,
    max_memory: Annotated[
        str | None,
        typer.Option("--max-memory", help="Resident-memory limit of the analysis worker, e.g. 8G or 50% (default: 75% of the machine)."),
    ] = None,
    op_timeout: Annotated[
        float, typer.Option("--op-timeout", help="Per-op/per-compile timeout for the live Neuron backend, seconds.")
    ] = defaults.DEFAULT_OP_TIMEOUT_S,
    audit_path: Annotated[
        Path | None,
        typer.Option("--audit", help="Also audit this repository for CUDA assumptions; adds an audit section to the report."),
    ] = None,
    train: Annotated[
        bool,
        typer.Option("--train", help="Analyse one training step: forward, loss, backward, optimizer step and the loop."),
    ] = False,
    optimizer: Annotated[str, typer.Option("--optimizer", help="--train without get_optimizer(): adamw, adam or sgd.")] = "adamw",
    optimizer_impl: Annotated[str, typer.Option("--optimizer-impl", help="--train without get_optimizer(): for-loop, foreach or fused.")] = "for-loop",
    dataset_size: Annotated[int | None, typer.Option("--dataset-size", help="--train: examples per epoch (with --batch-size).")] = None,
    batch_size: Annotated[int | None, typer.Option("--batch-size", help="--train: batch size; a short last batch is one more graph.")] = None,
    parity_: Annotated[
        bool, typer.Option("--parity", help="Also compare fp32 with emulated Neuron precisions, module by module (`neuronprobe parity`'s defaults).")
    ] = False,
    entry: Annotated[
        str | None,
        typer.Option("--entry", help="The model's method to analyse instead of forward, e.g. generate (default: the model file's ENTRY)."),
    ] = None,
    import_path: PathOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Trace a model and list the ops that will not lower, fall back to CPU or depend on data."""
    with guarded(debug):
        from neuronprobe.analysis import AnalyzeOptions, TrafficOptions, analyze_spec
        from neuronprobe.gates import Gates, check_gates, known_rule_ids

        gates = check_gates(Gates(tuple(split_csv(fail_on)), fail_on_recompiles), lambda: known_rule_ids(rule_table(rules)))
        options = AnalyzeOptions(
            target=target,
            backend=backend,
            require_backend=require_backend,
            sdk=sdk,
            rules=rules,
            overrides=list(set_ or []),
            timeout=timeout,
            op_timeout=op_timeout,
            command_line=" ".join(["neuronprobe", *sys.argv[1:]]),
            entry=entry,
            paths=import_paths(import_path),
            stack=stack,
            support_table=support_table,
            compiler_args=compiler_args,
            native_mode=native_mode,
        )
        if train:
            from neuronprobe.training import TrainOptions, check_options

            options.train = check_options(TrainOptions(optimizer, optimizer_impl, dataset_size, batch_size))
        elif dataset_size is not None or batch_size is not None:
            raise fail("--dataset-size and --batch-size describe a training epoch: add --train")
        from neuronprobe.options import check_epoch, check_seconds

        check_seconds(timeout, "--timeout")
        check_seconds(op_timeout, "--op-timeout")
        if compile_seconds is not None:
            check_seconds(compile_seconds, "--compile-seconds", zero=True)
        check_epoch(dataset_size, batch_size)
        traffic = TrafficOptions(
            shapes=shapes,
            lengths=lengths,
            column=column,
            field=field_,
            batch_sizes=int_list(batch_sizes, "--batch-sizes"),
            buckets=int_list(buckets, "--buckets"),
            max_buckets=max_buckets,
            compile_seconds=compile_seconds,
            max_compiles=max_compiles,
        )
        if fail_on_recompiles is not None and not traffic.given and model.startswith("hf:"):
            raise fail("--fail-on-recompiles needs traffic: give --shapes or --lengths")
        if audit_path is not None and not audit_path.exists():
            raise fail(f"--audit {audit_path}: no such file or folder")
        from neuronprobe.console_io import stage_display
        from neuronprobe.files import check_outputs
        from neuronprobe.process.worker import analyze_in_worker, limits_from_options

        inputs = [model, shapes, lengths, rules, decode_trace, support_table, *(audit_reads([audit_path], False) if audit_path is not None else [])]
        decode_section = None
        if decode_trace is not None:  # read and checked before the analysis runs: a bad trace is exit 2 at once
            from neuronprobe.shape_buckets.decode import decode_for_report

            decode_section = decode_for_report(decode_trace, model, target, list(set_ or []))
        serving_section = None
        vllm_options = {
            "max_num_batched_tokens": serving_max_num_batched_tokens,
            "max_num_seqs": serving_max_num_seqs,
            "max_model_len": serving_max_model_len,
            "tensor_parallel_size": serving_tp,
        }
        if serving_trace is not None or serving_engine is not None or any(v is not None for v in vllm_options.values()):  # issue 37: exit 2 at once
            from neuronprobe.shape_buckets.serving import serving_for_report

            serving_section = serving_for_report(serving_trace, serving_engine, vllm_options)
            inputs.append(serving_trace)
        if json_path is not None:  # the default names need the report's model name: checked again below
            check_outputs(analyze_outputs(json_path, output_dir, "", html), inputs)
        else:
            check_outputs([], inputs, folders=[("--output-dir", output_dir)])
        limits = limits_from_options(timeout, max_memory)
        options.max_memory = limits.max_memory_bytes  # auto observes with xla-cpu only what fits in it
        if parity_:  # issue 25: the section is added to the analysis report; its verdict is unchanged
            from neuronprobe.parity.run import ParityOptions, add_parity

            numbers = ParityOptions(overrides=list(set_ or []), xla=backend == "xla-cpu", xla_timeout=timeout, paths=options.paths)
            with stage_display(model) as on_stage:
                report = analyze_in_worker(model, lambda: add_parity(analyze_spec(model, options, traffic), model, numbers), limits, on_stage)
        else:
            with stage_display(model) as on_stage:  # the stage on a terminal's stderr (issue 33.8)
                report = analyze_in_worker(model, lambda: analyze_spec(model, options, traffic), limits, on_stage)
        if decode_section is not None:
            report.decode = decode_section
        if serving_section is not None:
            report.serving = serving_section
        if audit_path is not None:
            from neuronprobe.audit.engine import audit_paths
            from neuronprobe.audit.rules import stack_for

            report.audit = audit_paths([audit_path], stack_for(target, None))
        from neuronprobe.gates import evaluate_gates

        failures = evaluate_gates(report, gates)  # before any output: a gate that cannot be evaluated is exit 2

        from neuronprobe.report.console import render_summary

        console = out_console()
        stem = report.model.replace("/", "_").replace(":", "_")
        outputs = analyze_outputs(json_path, output_dir, stem, html)
        check_outputs(outputs, inputs)
        console.print(render_summary(report))
        if debug:
            _print_details(report)
        if report.audit is not None:
            counts = ", ".join(f"{n} {sev}(s)" for sev, n in report.audit.counts().items())
            console.print(f"audit of {audit_path}: {counts} (details in the HTML report; `neuronprobe audit` lists them)", markup=False)
        json_out = outputs[0][1]
        write(json_out, report.to_json())
        written = [str(json_out)]
        if html:
            from neuronprobe.report.html import render_html

            html_out = outputs[1][1]
            write(html_out, render_html(report))
            written.append(str(html_out))
        console.print(f"reports: {', '.join(written)}", markup=False)
        if report.capture.strategy is CaptureStrategy.NONE:  # valid input that no capture strategy could run (issue 12)
            err_console().print(f"could not analyse {report.model}: {report.not_analysed[-1].why}", markup=False)
            raise typer.Exit(EXIT_COULD_NOT_ANALYSE)

        exit_on_gates(failures)


def _print_details(report: Any) -> None:
    """--debug: the texts the normal output quieted (PyTorch internal asserts, dispatcher dumps), on stderr."""
    err = err_console()
    for limitation in report.not_analysed:
        if limitation.detail:
            err.print(f"detail of 'not analysed: {limitation.what}':\n{limitation.detail}", markup=False, highlight=False)
    for finding in report.findings:
        if finding.detail:
            err.print(f"detail of {finding.op} at {finding.location}:\n{finding.detail}", markup=False, highlight=False)
