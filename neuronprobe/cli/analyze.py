"""``neuronprobe analyze``: one model's compile-and-fallback analysis."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from neuronprobe import defaults
from neuronprobe.cli.common import (
    analyze_outputs,
    app,
    command_line,
    err_console,
    exit_on_gates,
    guarded,
    int_list,
    out_console,
    split_csv,
    tuple_or_none,
    write,
)
from neuronprobe.cli.options import DebugOpt, HtmlOpt, JsonReportOpt, OptimizerImplOpt, OptimizerOpt, OutputDirOpt, PathOpt, SetOpt, StackOpt, SupportTableOpt
from neuronprobe.errors import EXIT_COULD_NOT_ANALYSE
from neuronprobe.vocabulary import CaptureStrategy


@app.command()
def analyze(
    model: Annotated[str, typer.Argument(help="A model file (get_model, get_example_inputs) or hf:<model_type>.")],
    set_: SetOpt = None,
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
    json_path: JsonReportOpt = None,
    output_dir: OutputDirOpt = Path("reports"),
    html: HtmlOpt = True,
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
    compile_times: Annotated[
        Path | None,
        typer.Option(
            "--compile-times",
            help="With --serving-trace: measured compile times that price the plan's graphs (the formats of `buckets --compile-times`).",
        ),
    ] = None,
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
    optimizer: OptimizerOpt = "adamw",
    optimizer_impl: OptimizerImplOpt = "for-loop",
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
        from neuronprobe.files import check_outputs
        from neuronprobe.request import AnalyzeRequest, execute, plan_request

        plan = plan_request(
            AnalyzeRequest(
                model=model,
                set=tuple(set_ or ()),
                entry=entry,
                path=tuple(import_path or ()),
                target=target,
                stack=stack,
                sdk=sdk,
                support_table=support_table,
                native_mode=native_mode,
                compiler_args=compiler_args,
                rules=rules,
                backend=backend,
                require_backend=require_backend,
                timeout=timeout,
                op_timeout=op_timeout,
                max_memory=max_memory,
                shapes=shapes,
                lengths=lengths,
                column=column,
                field=field_,
                batch_sizes=tuple_or_none(int_list(batch_sizes, "--batch-sizes")),
                buckets=tuple_or_none(int_list(buckets, "--buckets")),
                max_buckets=max_buckets,
                compile_seconds=compile_seconds,
                max_compiles=max_compiles,
                decode_trace=decode_trace,
                serving_trace=serving_trace,
                serving_engine=serving_engine,
                max_num_batched_tokens=serving_max_num_batched_tokens,
                max_num_seqs=serving_max_num_seqs,
                max_model_len=serving_max_model_len,
                tensor_parallel_size=serving_tp,
                compile_times=compile_times,
                train=train,
                optimizer=optimizer,
                optimizer_impl=optimizer_impl,
                dataset_size=dataset_size,
                batch_size=batch_size,
                parity=parity_,
                audit=audit_path,
                fail_on=tuple(split_csv(fail_on)),
                fail_on_recompiles=fail_on_recompiles,
                json=json_path,
                output_dir=output_dir,
                html=html,
                command_line=command_line(),
            )
        )
        if json_path is not None:  # the default names need the report's model name: checked again below
            check_outputs(analyze_outputs(json_path, output_dir, "", html), plan.reads)
        else:
            check_outputs([], plan.reads, folders=[("--output-dir", output_dir)])
        from neuronprobe.console_io import stage_display

        with stage_display(model) as on_stage:  # the stage on a terminal's stderr (issue 33.8)
            outcome = execute(plan, on_stage=on_stage)
        report = outcome.report
        from neuronprobe.report.console import render_summary

        console = out_console()
        stem = report.model.replace("/", "_").replace(":", "_")
        outputs = analyze_outputs(json_path, output_dir, stem, html)
        check_outputs(outputs, plan.reads)
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

        exit_on_gates(outcome.gate_failures)


def _print_details(report: Any) -> None:
    """--debug: the texts the normal output quieted (PyTorch internal asserts, dispatcher dumps), on stderr."""
    err = err_console()
    for limitation in report.not_analysed:
        if limitation.detail:
            err.print(f"detail of 'not analysed: {limitation.what}':\n{limitation.detail}", markup=False, highlight=False)
    for finding in report.findings:
        if finding.detail:
            err.print(f"detail of {finding.op} at {finding.location}:\n{finding.detail}", markup=False, highlight=False)
