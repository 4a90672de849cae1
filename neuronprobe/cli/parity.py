"""``neuronprobe parity``: numerical parity of the model under Neuron's precisions (issue 25)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from neuronprobe import defaults
from neuronprobe.cli.common import (
    analyze_outputs,
    app,
    command_line,
    exit_on_gates,
    guarded,
    import_paths,
    out_console,
    split_csv,
    write,
)
from neuronprobe.cli.options import DebugOpt, HtmlOpt, JsonReportOpt, OptimizerImplOpt, OptimizerOpt, OutputDirOpt, PathOpt, SetOpt, StackOpt

# --- parity (issue 25) ---------------------------------------------------------------


@app.command()
def parity(
    model: Annotated[str, typer.Argument(help="A model file, hf:<model_type>, tv:<name> or timm:<name>.")],
    set_: SetOpt = None,
    auto_cast: Annotated[str | None, typer.Option("--auto-cast", help="neuronx-cc --auto-cast: none, matmult, all (a comma list runs each).")] = None,
    auto_cast_type: Annotated[
        str | None, typer.Option("--auto-cast-type", help="neuronx-cc --auto-cast-type: bf16, fp16, tf32, fp8_e4m3 (a comma list runs each).")
    ] = None,
    dtype: Annotated[str | None, typer.Option("--dtype", help="The dtype the model is served in: fp32, bf16, fp16 (a comma list runs each).")] = None,
    mpa: Annotated[
        str | None,
        typer.Option("--mixed-precision-accumulation", help="Softmax, norms and reductions in fp32 (on) or in the low type (off); on,off runs both."),
    ] = None,
    sdk: Annotated[
        list[str] | None, typer.Option("--sdk", help="Also run what neuronx-cc does by default in this SDK release, e.g. 2.26 (repeatable).")
    ] = None,
    precision: Annotated[
        list[str] | None, typer.Option("--precision", help="Also run this precision, e.g. matmult:bf16 or all:fp8_e4m3,dtype=bf16,mpa=off (repeatable).")
    ] = None,
    tolerance: Annotated[
        float, typer.Option("--tolerance", help="A module passes when max-abs <= 1e-5 + TOLERANCE x max|reference| (NxD Inference's rule).")
    ] = defaults.DEFAULT_PARITY_RTOL,
    seed: Annotated[int, typer.Option("--seed", help="The seed of the random weights (hf:, tv:, timm:, and get_model()) and of every forward.")] = (
        defaults.DEFAULT_PARITY_SEED
    ),
    backend: Annotated[
        str,
        typer.Option(
            "--backend",
            help="cpu (the emulation), xla-cpu: also the model in bf16 through torch-xla 2.9 on the CPU, "
            "or neuron: the device's outputs for --reference/--save-reference (on a Neuron host).",
        ),
    ] = "cpu",
    target: Annotated[str, typer.Option(help="Neuron target the report names: trn1, trn2 or inf2.")] = defaults.DEFAULT_TARGET,
    stack: StackOpt = None,
    json_path: JsonReportOpt = None,
    output_dir: OutputDirOpt = Path("reports"),
    html: HtmlOpt = True,
    timeout: Annotated[float, typer.Option("--timeout", help="Wall-clock limit of the run (the model code runs in a worker), seconds.")] = (
        defaults.DEFAULT_TIMEOUT_S
    ),
    max_memory: Annotated[str | None, typer.Option("--max-memory", help="Resident-memory limit of the worker, e.g. 8G or 50%.")] = None,
    # --- frozen references and training parity (issue 25, points 4 and 5) ---
    save_reference: Annotated[
        Path | None, typer.Option("--save-reference", help="Freeze this run's outputs (safetensors + manifest.json) into a new folder DIR.")
    ] = None,
    per_module: Annotated[bool, typer.Option("--per-module", help="--save-reference: also every module's output, in execution order.")] = False,
    reference: Annotated[
        Path | None, typer.Option("--reference", help="Compare with the frozen reference in DIR (never recomputed; exit 2 when missing).")
    ] = None,
    cross_backend: Annotated[
        bool, typer.Option("--cross-backend", help="--reference: compare a reference produced on another backend (reported, never gated).")
    ] = False,
    rtol: Annotated[
        float | None, typer.Option("--rtol", help="Frozen reference: rtol for every dtype (default per dtype: fp32 1e-5, fp16 1e-3, bf16 1e-2).")
    ] = None,
    atol: Annotated[
        float | None, typer.Option("--atol", help="Frozen reference: atol for every dtype (default per dtype: fp32 1e-7, fp16 1e-5, bf16 1e-3).")
    ] = None,
    fail_on: Annotated[
        str | None, typer.Option("--fail-on", help="Exit 1 on these gates: parity (a mismatch or a top-1 change against --reference), verdicts or rule ids.")
    ] = None,
    train: Annotated[bool, typer.Option("--train", help="Also one training step in fp32 and under each precision, compared per parameter group.")] = False,
    optimizer: OptimizerOpt = "adamw",
    optimizer_impl: OptimizerImplOpt = "for-loop",
    train_tolerance: Annotated[
        float | None, typer.Option("--train-tolerance", help="--train: relative L2 error of a group's gradient that differs (default by low type: bf16 1e-2).")
    ] = None,
    import_path: PathOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Compare the model in fp32 on the CPU with the precisions Neuron computes in (emulated), module by module.

    With no precision flag: the compiler default before Neuron 2.27 (matmult/bf16), the model served in bf16,
    and the default from 2.27 on (no auto-cast). The flags' values multiply: --auto-cast matmult,all
    --auto-cast-type bf16,fp8_e4m3 runs four precisions; --sdk and --precision add one each.
    """
    with guarded(debug):
        from neuronprobe.files import check_outputs
        from neuronprobe.options import check_seconds
        from neuronprobe.parity.api import check_parity_stack, check_train_flags, frozen_options, parity_options
        from neuronprobe.process.worker import analyze_in_worker, limits_from_options

        stack = check_parity_stack(stack, target, backend)
        check_seconds(timeout, "--timeout")
        references, gates, live = frozen_options(save_reference, per_module, reference, cross_backend, rtol, atol, split_csv(fail_on), backend)
        options = parity_options(
            list(set_ or ()),
            auto_cast,
            auto_cast_type,
            dtype,
            mpa,
            list(sdk or ()),
            list(precision or ()),
            tolerance,
            seed,
            "cpu" if live else backend,
            timeout,
        )
        options.paths = import_paths(import_path)
        from neuronprobe.loaders.resolve import model_file_imports

        reads, saves, folders = [model, *model_file_imports(model, options.paths), *references.reads()], references.outputs(), _reference_folder(references)
        if json_path is not None:
            check_outputs([*analyze_outputs(json_path, output_dir, "", html), *saves], reads, folders=folders)
        else:
            check_outputs(saves, reads, folders=[("--output-dir", output_dir), *folders])
        from neuronprobe.parity.frozen import parity_with_references, prepare

        frozen = prepare(references, model)  # a missing or mismatched reference: exit 2 before the run
        train_options = check_train_flags(train, optimizer, optimizer_impl, train_tolerance)
        line = command_line()
        from neuronprobe.console_io import stage_display

        with stage_display(model) as on_stage:
            report, reference_files = analyze_in_worker(
                model,
                lambda: parity_with_references(
                    model,
                    options,
                    references,
                    frozen,
                    live=live,
                    train=train_options,
                    train_tolerance=train_tolerance,
                    target=target,
                    command_line=line,
                ),
                limits_from_options(timeout, max_memory),
                on_stage,
            )
        from neuronprobe.gates import evaluate_gates
        from neuronprobe.report.console_parity import render_parity

        report.support_table.stack = stack  # issue 36: the stack the run describes, kept for diff
        failures = evaluate_gates(report, gates)
        console = out_console()
        stem = report.model.replace("/", "_").replace(":", "_")
        outputs = analyze_outputs(json_path, output_dir, stem, html)
        check_outputs([*outputs, *saves], reads, folders=folders)
        console.print(f"{report.model}: numerical parity on the CPU (no op analysis: `analyze --parity` adds it)", markup=False, highlight=False)
        assert report.parity is not None
        console.print(render_parity(report.parity))
        from neuronprobe.report.console_risky import render_risky

        console.print(render_risky(report))
        if reference_files:  # first, and for this run only: a concurrent run into the same folder writes nothing (exit 2)
            from neuronprobe.parity.frozen import write_reference

            write_reference(references.save_reference, reference_files)
        write(outputs[0][1], report.to_json())
        _print_frozen_and_train(console, report.parity)  # below the parity (and risky) sections
        written = [str(outputs[0][1])]
        if html:
            from neuronprobe.report.html import render_html

            write(outputs[1][1], render_html(report))
            written.append(str(outputs[1][1]))
        if reference_files:
            written.append(f"reference {references.save_reference}")
        console.print(f"reports: {', '.join(written)}", markup=False)
        exit_on_gates(failures)


def _reference_folder(options: Any) -> list[tuple[str, Path]]:
    return [] if options.save_reference is None else [("--save-reference", options.save_reference)]


def _print_frozen_and_train(console: Any, section: Any) -> None:
    from neuronprobe.report.reference_console import render_frozen, render_train

    if section.frozen is not None:
        console.print(render_frozen(section.frozen))
    for train in section.train:
        console.print(render_train(train))
