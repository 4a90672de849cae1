"""The command line: a thin edge over the library.

It parses arguments, calls one library function, renders, writes files
atomically and maps typed errors to exit codes (0 done, 1 a requested gate
failed, 2 unusable input or configuration or the model's own code failed, 3 a bug
in neuronprobe). Nothing heavy is imported at module
level: ``neuronprobe --help`` must not import torch, pandas or matplotlib.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from neuronprobe import defaults
from neuronprobe.errors import BUG_REPORT_URL, EXIT_COULD_NOT_ANALYSE, EXIT_GATE_FAILED, EXIT_INTERNAL, EXIT_UNUSABLE, NeuronprobeError
from neuronprobe.vocabulary import CaptureStrategy

if TYPE_CHECKING:  # pragma: no cover
    from neuronprobe.gates import GateFailure
    from neuronprobe.support import SupportTable

BUG_SENTENCE = f"this is a bug in neuronprobe, please report it at {BUG_REPORT_URL}"

app = typer.Typer(
    name="neuronprobe",
    help="Neuron compile-and-fallback profiler: which ops will not lower on Trainium/Inferentia2, "
    "why your traffic recompiles, and which buckets minimise padding.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _show_version(value: bool) -> None:
    if value:
        from neuronprobe.version import __version__

        typer.echo(f"neuronprobe {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[bool, typer.Option("--version", callback=_show_version, is_eager=True, help="Print the version and exit.")] = False,
) -> None:
    """Neuron compile-and-fallback profiler: which ops will not lower on Trainium/Inferentia2,
    why your traffic recompiles, and which buckets minimise padding."""


DebugOpt = Annotated[bool, typer.Option("--debug", help="Show Python tracebacks for errors.")]
PathOpt = Annotated[
    list[Path] | None,
    typer.Option("--path", help="A folder the model file imports packages from, put on sys.path after the model's own folder (repeatable)."),
]


def _err_console() -> Any:
    from neuronprobe.console_io import make_console

    return make_console(stderr=True)  # user text is data: no :x: emoji, control characters shown escaped


def _out_console() -> Any:
    from neuronprobe.console_io import make_console

    return make_console()


def _fail(message: str, code: int = EXIT_UNUSABLE) -> typer.Exit:
    from rich.markup import escape  # a message may quote "[[models]]" or "x[0]": not markup

    _err_console().print(f"[bold red]error:[/] {escape(message)}", markup=True, highlight=False)
    return typer.Exit(code)


@contextlib.contextmanager
def _errors(debug: bool) -> Iterator[None]:
    """Map library errors to one line and an exit code; tracebacks only with --debug (the exit code is the same).

    First, every number the command's options took is checked at the edge (int64, finite).
    """
    try:
        _check_numbers()
        yield
    except typer.Exit:
        raise
    except NeuronprobeError as exc:
        if debug:
            _print_traceback(exc)
        raise _fail(str(exc), exc.exit_code) from None
    except KeyboardInterrupt:
        raise _fail("interrupted", 130) from None
    except RecursionError as exc:  # malformed input nested too deep for a parser we do not wrap
        if debug:
            _print_traceback(exc)
        raise _fail("the input is nested too deep to read") from None
    except Exception as exc:  # an InternalError, or any other exception: a bug in neuronprobe (exit 3)
        if debug:
            _print_traceback(exc)
        from neuronprobe.files import unusable_path

        user = unusable_path(exc)  # a path the file system refuses (too long, a loop of links): the user's to fix
        if user is not None:
            raise _fail(user) from None
        raise _fail(_internal_error_line(exc, debug), EXIT_INTERNAL) from None


def _check_numbers() -> None:
    """Every integer and float option of the running command within int64 and finite (one sentence naming it)."""
    import importlib

    from neuronprobe.options import check_parameters

    # The click typer runs on (its own vendored copy from typer 0.29, else click): where typer.Context comes from.
    base = next(c for c in typer.Context.__mro__[1:] if c.__name__ == "Context")
    ctx = importlib.import_module(base.__module__.rsplit(".", 1)[0] + ".globals").get_current_context(silent=True)
    if ctx is None:
        return
    flags = {p.name: (p.opts[0] if p.opts else p.name) for p in ctx.command.params if p.name}
    check_parameters(ctx.params, flags)


def _internal_error_line(exc: BaseException, debug: bool = False) -> str:
    """The one line an internal error prints: what was raised, that it is a bug, and where to report it."""
    text = str(exc).strip().splitlines()
    what = f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
    hint = "" if debug else " (run again with --debug for the traceback)"
    return f"internal error: {what}; {BUG_SENTENCE}{hint}"


def _print_traceback(exc: BaseException) -> None:
    """--debug: the traceback (with the worker's, attached as a note) on stderr, before the one line."""
    import traceback

    traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)


def _write(path: Path, data: str | bytes) -> Path:
    from neuronprobe.files import write_atomic

    try:
        return write_atomic(path, data)
    except OSError as exc:
        raise _fail(f"cannot write {path}: {exc.strerror or exc}") from None


def _json_text(value: Any, indent: int = 2) -> str:
    """A JSON file's text through the codec: NaN and infinity as strings, never as bare constants."""
    from neuronprobe.jsonio import dumps

    return dumps(value, indent=indent)


def _import_paths(paths: list[Path] | None) -> list[Path]:
    """The --path folders, each checked (one that is no folder: exit 2 before any work)."""
    from neuronprobe.loaders.resolve import check_import_paths

    return check_import_paths(paths or [])


def _split_csv(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def _int_list(value: str | None, flag: str) -> list[int] | None:
    """``1,4,8`` as integers; a usable sentence (exit 2) for anything else."""
    if not value:
        return None
    try:
        return [int(v) for v in _split_csv(value)]
    except ValueError:
        raise _fail(f"{flag} {value!r}: use whole numbers separated by commas, e.g. 1,4,8") from None


# --- analyze ----------------------------------------------------------------------


# --stack and --support-table (issue 36): the software stack a target runs, and a TorchNeuron release's own op table.
StackOpt = Annotated[
    str | None,
    typer.Option("--stack", help="xla (torch-neuronx 2.9, trn1/inf2) or native (TorchNeuron, trn2/trn3); default from --target and --sdk."),
]
SupportTableOpt = Annotated[
    Path | None,
    typer.Option("--support-table", help="--stack native: a release's torch_api_compatibility.md (or a table from `setup native-table`)."),
]


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
    with _errors(debug):
        from neuronprobe.analysis import AnalyzeOptions, TrafficOptions, analyze_spec
        from neuronprobe.gates import Gates, check_gates, known_rule_ids

        gates = check_gates(Gates(tuple(_split_csv(fail_on)), fail_on_recompiles), lambda: known_rule_ids(_rule_table(rules)))
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
            paths=_import_paths(import_path),
            stack=stack,
            support_table=support_table,
            compiler_args=compiler_args,
            native_mode=native_mode,
        )
        if train:
            from neuronprobe.training import TrainOptions, check_options

            options.train = check_options(TrainOptions(optimizer, optimizer_impl, dataset_size, batch_size))
        elif dataset_size is not None or batch_size is not None:
            raise _fail("--dataset-size and --batch-size describe a training epoch: add --train")
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
            batch_sizes=_int_list(batch_sizes, "--batch-sizes"),
            buckets=_int_list(buckets, "--buckets"),
            max_buckets=max_buckets,
            compile_seconds=compile_seconds,
            max_compiles=max_compiles,
        )
        if fail_on_recompiles is not None and not traffic.given and model.startswith("hf:"):
            raise _fail("--fail-on-recompiles needs traffic: give --shapes or --lengths")
        if audit_path is not None and not audit_path.exists():
            raise _fail(f"--audit {audit_path}: no such file or folder")
        from neuronprobe.console_io import stage_display
        from neuronprobe.files import check_outputs
        from neuronprobe.process.worker import analyze_in_worker, limits_from_options

        inputs = [model, shapes, lengths, rules, decode_trace, support_table, *(_audit_reads([audit_path], False) if audit_path is not None else [])]
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
            check_outputs(_analyze_outputs(json_path, output_dir, "", html), inputs)
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

        console = _out_console()
        stem = report.model.replace("/", "_").replace(":", "_")
        outputs = _analyze_outputs(json_path, output_dir, stem, html)
        check_outputs(outputs, inputs)
        console.print(render_summary(report))
        if debug:
            _print_details(report)
        if report.audit is not None:
            counts = ", ".join(f"{n} {sev}(s)" for sev, n in report.audit.counts().items())
            console.print(f"audit of {audit_path}: {counts} (details in the HTML report; `neuronprobe audit` lists them)", markup=False)
        json_out = outputs[0][1]
        _write(json_out, report.to_json())
        written = [str(json_out)]
        if html:
            from neuronprobe.report.html import render_html

            html_out = outputs[1][1]
            _write(html_out, render_html(report))
            written.append(str(html_out))
        console.print(f"reports: {', '.join(written)}", markup=False)
        if report.capture.strategy is CaptureStrategy.NONE:  # valid input that no capture strategy could run (issue 12)
            _err_console().print(f"could not analyse {report.model}: {report.not_analysed[-1].why}", markup=False)
            raise typer.Exit(EXIT_COULD_NOT_ANALYSE)

        _exit_on_gates(failures)


def _print_details(report: Any) -> None:
    """--debug: the texts the normal output quieted (PyTorch internal asserts, dispatcher dumps), on stderr."""
    err = _err_console()
    for limitation in report.not_analysed:
        if limitation.detail:
            err.print(f"detail of 'not analysed: {limitation.what}':\n{limitation.detail}", markup=False, highlight=False)
    for finding in report.findings:
        if finding.detail:
            err.print(f"detail of {finding.op} at {finding.location}:\n{finding.detail}", markup=False, highlight=False)


def _analyze_outputs(json_path: Path | None, output_dir: Path, stem: str, html: bool) -> list[tuple[str, Path]]:
    """(option, path) of each file analyze writes: the JSON, then the HTML."""
    json_out = json_path or output_dir / f"{stem}.json"
    out = [("--json" if json_path else "the JSON report", json_out)]
    if html:
        out.append(("the HTML report", json_out.with_suffix(".html") if json_path else output_dir / f"{stem}.html"))
    return out


def _audit_reads(paths: list[Path] | list[str], include_vendored: bool) -> list[Path]:
    """What an audit of ``paths`` reads (the roots, every file the walk picks, each .gitignore): no output may be one."""
    from neuronprobe.audit.engine import audit_inputs

    return audit_inputs(paths, include_vendored)


def _rule_table(rules: Path | None) -> SupportTable:
    """The support table ``--fail-on`` rule ids are checked against: the bundled one, with ``--rules`` first."""
    from neuronprobe.support import load_table, with_user_rules

    return load_table() if rules is None else with_user_rules(load_table(), rules)


def _exit_on_gates(failures: list[GateFailure]) -> None:
    """Print each failed gate (from neuronprobe.gates) on a line of its own; exit 1 if there is any."""
    err = _err_console()
    for failure in failures:
        err.print(f"gate failed: {failure.message}", markup=False, highlight=False)
    if failures:
        raise typer.Exit(EXIT_GATE_FAILED)


# --- parity (issue 25) ---------------------------------------------------------------


def _parity_options(
    set_: list[str] | None,
    auto_cast: str | None,
    auto_cast_type: str | None,
    dtype: str | None,
    mpa: str | None,
    sdk: list[str] | None,
    precision: list[str] | None,
    tolerance: float,
    seed: int,
    backend: str,
    timeout: float,
) -> Any:
    """The ParityOptions the flags ask for; a bad flag is one sentence, exit 2."""
    import math

    from neuronprobe.parity.drift import Tolerance
    from neuronprobe.parity.precision import requested_precisions
    from neuronprobe.parity.run import ParityOptions

    if not math.isfinite(tolerance) or tolerance <= 0:
        raise _fail(f"--tolerance {tolerance:g}: give a relative tolerance above 0, e.g. 0.05")
    if backend not in ("cpu", "xla-cpu"):
        raise _fail(f"--backend {backend!r}: parity runs on cpu (the emulation) or xla-cpu (also torch-xla 2.9 in bf16)")
    precisions = requested_precisions(
        auto_cast=auto_cast, auto_cast_type=auto_cast_type, dtype=dtype, mixed_precision_accumulation=mpa, sdk=sdk or (), precision=precision or ()
    )
    return ParityOptions(precisions, seed, Tolerance(rtol=tolerance), list(set_ or []), backend == "xla-cpu", timeout)


@app.command()
def parity(
    model: Annotated[str, typer.Argument(help="A model file, hf:<model_type>, tv:<name> or timm:<name>.")],
    set_: Annotated[list[str] | None, typer.Option("--set", help="Override a config field of an hf: model, KEY=VALUE (repeatable).")] = None,
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
    json_path: Annotated[Path | None, typer.Option("--json", help="Where to write the JSON report.")] = None,
    output_dir: Annotated[Path, typer.Option("--output-dir", "-o", help="Folder for the JSON and HTML reports.")] = Path("reports"),
    html: Annotated[bool, typer.Option("--html/--no-html", help="Also write the self-contained HTML report.")] = True,
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
    optimizer: Annotated[str, typer.Option("--optimizer", help="--train without get_optimizer(): adamw, adam or sgd.")] = "adamw",
    optimizer_impl: Annotated[str, typer.Option("--optimizer-impl", help="--train without get_optimizer(): for-loop, foreach or fused.")] = "for-loop",
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
    with _errors(debug):
        from neuronprobe.files import check_outputs
        from neuronprobe.options import check_seconds
        from neuronprobe.process.worker import analyze_in_worker, limits_from_options
        from neuronprobe.support import check_target

        check_target(target)
        from neuronprobe.support.native.stack import NATIVE, check_stack

        stack = check_stack(stack, target)  # parity's --sdk lists precisions to emulate, not the release the stack runs
        if stack == NATIVE and backend == "xla-cpu":
            raise _fail("--backend xla-cpu runs torch-xla, the XLA stack; with --stack native use --backend cpu or neuron")
        check_seconds(timeout, "--timeout")
        frozen_options, gates, live = _frozen_options(save_reference, per_module, reference, cross_backend, rtol, atol, fail_on, backend)
        options = _parity_options(set_, auto_cast, auto_cast_type, dtype, mpa, sdk, precision, tolerance, seed, "cpu" if live else backend, timeout)
        options.paths = _import_paths(import_path)
        reads, saves, folders = [model, *frozen_options.reads()], frozen_options.outputs(), _reference_folder(frozen_options)
        if json_path is not None:
            check_outputs([*_analyze_outputs(json_path, output_dir, "", html), *saves], reads, folders=folders)
        else:
            check_outputs(saves, reads, folders=[("--output-dir", output_dir), *folders])
        from neuronprobe.parity.frozen import parity_with_references, prepare
        from neuronprobe.training import TrainOptions, check_options

        frozen = prepare(frozen_options, model)  # a missing or mismatched reference: exit 2 before the run
        if not train and (train_tolerance is not None or optimizer != "adamw" or optimizer_impl != "for-loop"):
            raise _fail("--optimizer, --optimizer-impl and --train-tolerance describe the training step: add --train")
        if train_tolerance is not None and not (train_tolerance >= 0 and train_tolerance != float("inf")):
            raise _fail(f"--train-tolerance {train_tolerance:g}: give a relative error >= 0, e.g. 0.01")
        train_options = check_options(TrainOptions(optimizer, optimizer_impl)) if train else None
        command_line = " ".join(["neuronprobe", *sys.argv[1:]])
        from neuronprobe.console_io import stage_display

        with stage_display(model) as on_stage:
            report, reference_files = analyze_in_worker(
                model,
                lambda: parity_with_references(
                    model,
                    options,
                    frozen_options,
                    frozen,
                    live=live,
                    train=train_options,
                    train_tolerance=train_tolerance,
                    target=target,
                    command_line=command_line,
                ),
                limits_from_options(timeout, max_memory),
                on_stage,
            )
        from neuronprobe.gates import evaluate_gates
        from neuronprobe.report.console_parity import render_parity

        report.support_table.stack = stack  # issue 36: the stack the run describes, kept for diff
        failures = evaluate_gates(report, gates)
        console = _out_console()
        stem = report.model.replace("/", "_").replace(":", "_")
        outputs = _analyze_outputs(json_path, output_dir, stem, html)
        check_outputs([*outputs, *saves], reads, folders=folders)
        console.print(f"{report.model}: numerical parity on the CPU (no op analysis: `analyze --parity` adds it)", markup=False, highlight=False)
        assert report.parity is not None
        console.print(render_parity(report.parity))
        from neuronprobe.report.console_risky import render_risky

        console.print(render_risky(report))
        if reference_files:  # first, and for this run only: a concurrent run into the same folder writes nothing (exit 2)
            from neuronprobe.parity.frozen import write_reference

            write_reference(frozen_options.save_reference, reference_files)
        _write(outputs[0][1], report.to_json())
        _print_frozen_and_train(console, report.parity)  # below the parity (and risky) sections
        written = [str(outputs[0][1])]
        if html:
            from neuronprobe.report.html import render_html

            _write(outputs[1][1], render_html(report))
            written.append(str(outputs[1][1]))
        if reference_files:
            written.append(f"reference {frozen_options.save_reference}")
        console.print(f"reports: {', '.join(written)}", markup=False)
        _exit_on_gates(failures)


def _frozen_options(
    save_reference: Path | None,
    per_module: bool,
    reference: Path | None,
    cross_backend: bool,
    rtol: float | None,
    atol: float | None,
    fail_on: str | None,
    backend: str,
) -> tuple[Any, Any, Any]:
    """parity's frozen-reference options, its gates and (``--backend neuron``) the live backend; exit 2 for a bad combination."""
    from neuronprobe.gates import PARITY_GATE, Gates, check_gates, known_rule_ids
    from neuronprobe.parity.frozen import ReferenceOptions

    options = ReferenceOptions(save_reference, per_module, reference, cross_backend, rtol, atol)
    gates = check_gates(Gates(tuple(_split_csv(fail_on))), lambda: known_rule_ids(_rule_table(None)))
    if PARITY_GATE in gates.fail_on and reference is None:
        from neuronprobe.gates import NEEDS_REFERENCE

        raise _fail(NEEDS_REFERENCE)
    live = None
    if backend == "neuron":
        if not options.any:
            raise _fail("--backend neuron runs the model on the device for a frozen reference: give --reference DIR or --save-reference DIR")
        from neuronprobe.backends import resolve_backend

        live = resolve_backend("neuron").live  # BackendUnavailable (exit 2) off a Neuron host
        if per_module:
            from neuronprobe.parity.frozen import DEVICE_PER_MODULE

            raise _fail(DEVICE_PER_MODULE)  # before the run, not after it
    return options, gates, live


def _reference_folder(options: Any) -> list[tuple[str, Path]]:
    return [] if options.save_reference is None else [("--save-reference", options.save_reference)]


def _print_frozen_and_train(console: Any, section: Any) -> None:
    from neuronprobe.report.reference_console import render_frozen, render_train

    if section.frozen is not None:
        console.print(render_frozen(section.frozen))
    for train in section.train:
        console.print(render_train(train))


# --- audit (issue 14) ---------------------------------------------------------------


@app.command()
def audit(
    # str, not Path: Path("") is ".", and an empty argument must be refused, not audit the current folder
    paths: Annotated[list[str] | None, typer.Argument(help="Files or folders to audit (a repository, its CI and Dockerfiles).")] = None,
    rules: Annotated[bool, typer.Option("--rules", help="List the rules with their fixes and sources, and exit.")] = False,
    stack: Annotated[
        str | None,
        typer.Option("--stack", help="Fixes for xla (torch-neuronx on trn1/inf2) or native (TorchNeuron on trn2/trn3); default from --target."),
    ] = None,
    target: Annotated[str, typer.Option(help="Neuron target: trn1, inf2 (stack xla), trn2 or trn3 (stack native).")] = defaults.DEFAULT_TARGET,
    json_path: Annotated[Path | None, typer.Option("--json", help="Write the findings as JSON here (also a --baseline).")] = None,
    sarif_path: Annotated[Path | None, typer.Option("--sarif", help="Write SARIF 2.1.0 here, for GitHub code scanning.")] = None,
    fail_on: Annotated[
        str | None,
        typer.Option("--fail-on", help="Exit 1 on a new finding at this severity or worse (error, warning, info), or of these rule ids."),
    ] = None,
    baseline: Annotated[Path | None, typer.Option("--baseline", help="A previous `audit --json`: only findings it lacks are new and gate.")] = None,
    jobs: Annotated[int | None, typer.Option("--jobs", "-j", help="Worker processes (default: one per core).")] = None,
    include_vendored: Annotated[bool, typer.Option("--include-vendored", help="Also audit vendored folders (vendor/, third_party/, ...).")] = False,
    debug: DebugOpt = False,
) -> None:
    """Find the CUDA assumptions in a repository and its CI that fail, or fail silently, on Trainium/Inferentia2."""
    with _errors(debug):
        from neuronprobe.audit.console import render_audit, render_rules
        from neuronprobe.audit.engine import check_fail_on, gate
        from neuronprobe.audit.rules import STACKS, TARGET_STACK, stack_for

        if stack is not None and stack not in STACKS:
            raise _fail(f"--stack {stack!r}: use {' or '.join(STACKS)}")
        if stack is None and target not in TARGET_STACK:
            raise _fail(f"--target {target!r}: use {', '.join(TARGET_STACK)}")
        chosen = stack_for(target, stack)
        console = _out_console()
        if rules:
            for part in render_rules(stack):
                console.print(part)
            return
        if not paths:
            raise _fail("give at least one PATH to audit (or --rules to list the rules)")
        gates = _split_csv(fail_on)
        check_fail_on(gates)
        if jobs is not None and jobs < 1:
            raise _fail(f"--jobs {jobs}: use 1 or more")
        from neuronprobe.files import check_outputs

        outputs = [(flag, p) for flag, p in (("--json", json_path), ("--sarif", sarif_path)) if p is not None]
        check_outputs(outputs, [*_audit_reads(paths, include_vendored), baseline])
        section = _audit_with_progress(paths, chosen, jobs, include_vendored, baseline)
        for part in render_audit(section):
            console.print(part)
        if json_path is not None:
            import dataclasses

            _write(json_path, _json_text(dataclasses.asdict(section), indent=2) + "\n")
            console.print(f"json: {json_path}", markup=False)
        if sarif_path is not None:
            from neuronprobe.audit.sarif import sarif_json
            from neuronprobe.version import __version__

            _write(sarif_path, sarif_json(section, __version__))
            console.print(f"sarif: {sarif_path}", markup=False)
        hit = gate(section, gates)
        if hit:
            _err_console().print(f"gate failed: {len(hit)} new finding(s) at --fail-on {','.join(gates)}", markup=False)
            raise typer.Exit(EXIT_GATE_FAILED)


def _audit_with_progress(paths: list[str], stack: str, jobs: int | None, include_vendored: bool, baseline: Path | None) -> Any:
    """Run the audit with a progress bar on stderr when stderr is a terminal."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from neuronprobe.audit.engine import audit_paths

    err = _err_console()
    if not err.is_terminal:  # a CI log: no bar, and no stray blank line where it would have been
        return audit_paths(paths, stack, jobs=jobs, include_vendored=include_vendored, baseline=baseline)
    with Progress(TextColumn("auditing"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err, transient=True) as bar:
        task = bar.add_task("audit", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        return audit_paths(paths, stack, jobs=jobs, include_vendored=include_vendored, baseline=baseline, progress=progress)


# --- report (issue 5) --------------------------------------------------------------


@app.command()
def report(
    run: Annotated[Path, typer.Argument(metavar="RUN.json", help="A report JSON written by `neuronprobe analyze`.")],
    output: Annotated[Path | None, typer.Option("--output", "-o", help="The HTML file to write (default: RUN with .html).")] = None,
    debug: DebugOpt = False,
) -> None:
    """Re-render the self-contained HTML report from a report JSON, on any machine."""
    with _errors(debug):
        from neuronprobe.files import check_outputs
        from neuronprobe.report.html import render_html
        from neuronprobe.report.model import load_report

        out = output if output is not None else run.with_suffix(".html")
        check_outputs([("--output", out)], [run])
        loaded = load_report(str(run))
        _write(out, render_html(loaded))
        _out_console().print(f"report: {out}", markup=False)


# --- diff and nightly (issue 6) ----------------------------------------------------


@app.command()
def diff(
    base: Annotated[Path, typer.Argument(help="The baseline report JSON.")],
    new: Annotated[Path, typer.Argument(help="The new report JSON.")],
    json_path: Annotated[Path | None, typer.Option("--json", help="Write the diff as JSON here.")] = None,
    html_path: Annotated[Path | None, typer.Option("--html", help="Write the NEW report as HTML here, with a 'changes since baseline' section.")] = None,
    fail_on_regression: Annotated[
        bool,
        typer.Option(
            "--fail-on-regression",
            help="Exit 1 on a regression (new problem finding, lower support %, more graphs, more padding). "
            "Runs on different backends, targets or neuronx-cc versions are shown but never gated.",
        ),
    ] = False,
    debug: DebugOpt = False,
) -> None:
    """Compare two reports: new and removed findings, support %, graphs, padding and versions."""
    with _errors(debug):
        import dataclasses

        from neuronprobe.files import check_outputs
        from neuronprobe.report.diff import diff_reports, run_label
        from neuronprobe.report.diff_console import render_diff
        from neuronprobe.report.model import load_report

        check_outputs(
            [(flag, path) for flag, path in (("--json", json_path), ("--html", html_path)) if path is not None],
            [base, new],
        )
        base_report = load_report(str(base))
        new_report = load_report(str(new))
        result = diff_reports(
            base_report,
            new_report,
            base_label=f"{base}: {run_label(base_report)}",
            new_label=f"{new}: {run_label(new_report)}",
        )
        _out_console().print(render_diff(result))
        if json_path is not None:
            _write(json_path, _json_text(dataclasses.asdict(result), indent=2) + "\n")
        if html_path is not None:
            from neuronprobe.report.html import render_html

            new_report.baseline_diff = result
            _write(html_path, render_html(new_report))
        if fail_on_regression:
            from neuronprobe.gates import Gates, evaluate_gates

            _exit_on_gates(evaluate_gates(new_report, Gates(fail_on_regression=True), diff=result))


@app.command()
def nightly(
    config: Annotated[
        Path,
        typer.Argument(help="The nightly CONFIG.toml: defaults, and one \\[\\[models]] table per model. `nightly merge SHARD_DIR...` merges shard folders."),
    ],
    shard_dirs: Annotated[list[Path] | None, typer.Argument(help="With `merge`: the shard folders of one nightly run.", show_default=False)] = None,
    output_dir: Annotated[
        Path, typer.Option("--output-dir", "-o", help="The reports folder: <date>/<model>.{json,html} and index.html (with --shard: the shard folder).")
    ] = Path("reports"),
    date: Annotated[str | None, typer.Option("--date", help="The night's name, YYYY-MM-DD (default: today in UTC); for reruns and tests.")] = None,
    require_backend: Annotated[
        str | None,
        typer.Option("--require-backend", help="Fail with exit 2 unless this backend is really there (overrides the config)."),
    ] = None,
    jobs: Annotated[
        int | None,
        typer.Option("--jobs", "-j", help="Models analysed at once, each in its own worker (default: one per core, fewer when memory is short)."),
    ] = None,
    total_memory: Annotated[
        str | None,
        typer.Option("--total-memory", help="Memory all workers share, e.g. 32G or 75% (default 75% of the machine); a worker waits while it would not fit."),
    ] = None,
    shard: Annotated[
        str | None,
        typer.Option("--shard", help="Analyse only part I of N (1-based, N <= 256) into the -o shard folder; `nightly merge` writes the history."),
    ] = None,
    history: Annotated[
        Path | None,
        typer.Option("--history", help="The reports folder: with --shard, balance shards by its last durations; with `merge`, write the night there."),
    ] = None,
    cache_dir: Annotated[
        Path | None,
        typer.Option(
            "--cache", help="Reuse the last report of a model whose inputs did not change (default: <output-dir>/.cache; with --shard: off unless given)."
        ),
    ] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Analyse every model, whatever the cache holds.")] = False,
    debug: DebugOpt = False,
) -> None:
    """Analyse every model of CONFIG, diff each against its last run on the same backend, update the history page.

    Exit 1 on a regression; 2 when the config is unusable, a model cannot be analysed or a required backend is missing;
    3 when a model's analysis hit a bug in neuronprobe.
    """
    with _errors(debug):
        from neuronprobe.files import check_outputs
        from neuronprobe.nightly.run import (
            INDEX_FILE,
            check_date,
            check_required_backend,
            input_files,
            isolated_analyze,
            load_config,
            output_files,
            plan_workers,
            run_nightly,
            today_utc,
            write_night,
        )

        if str(config) == "merge":
            from neuronprobe.nightly.shards import merge_output_files, merge_shards

            if not shard_dirs or history is None:
                raise _fail("nightly merge SHARD_DIR... --history DIR: give the shard folders and the reports folder")
            night, outputs = merge_output_files(shard_dirs, date)
            shard_inputs = [p for folder in shard_dirs for p in Path(folder).iterdir() if p.is_file()]  # merge reads them: never an output
            check_outputs([("the nightly output", history / f) for f in outputs], shard_inputs, folders=[("--history", history)])
            result = merge_shards(shard_dirs, history, date)
            write_night(result, history, _write)
            _finish_nightly(result, history / INDEX_FILE)
            return
        if shard_dirs:
            raise _fail(f"nightly: unexpected argument {str(shard_dirs[0])!r} (only `nightly merge` takes shard folders)")
        night = check_date(date) if date else today_utc()
        settings = load_config(config)
        count, memory = plan_workers(settings, jobs, total_memory)
        # Every option before the first model: the backend, the outputs against the inputs.
        check_required_backend(settings, require_backend)
        models = settings.models
        if shard is not None:
            from neuronprobe.nightly.shards import parse_shard, shard_models, shard_output_files

            index, of = parse_shard(shard)
            from neuronprobe.nightly.shards import check_shard_folder

            check_shard_folder(output_dir)
            mine = set(shard_models(settings, index, of, history))
            models = [m for m in settings.models if m.name in mine]
            outputs = shard_output_files([m.name for m in models])
        else:
            outputs = output_files(settings, night)
        cache = None
        if not no_cache and (cache_dir is not None or shard is None):
            from neuronprobe.nightly.cache import DEFAULT_CACHE_DIR, ResultCache

            cache = ResultCache(cache_dir if cache_dir is not None else output_dir / DEFAULT_CACHE_DIR, settings, require_backend, night)
        folders = [("--output-dir", output_dir), *([("--cache", cache.folder)] if cache is not None else [])]
        check_outputs([("the nightly output", output_dir / f) for f in outputs], input_files(settings), folders=folders)
        err = _err_console()
        if cache is not None and cache.off:  # no key it can trust: say so, analyse everything
            err.print(f"note: {cache.off}", markup=False)
        analyze = isolated_analyze(settings, memory.per_worker_bytes)
        command_line = " ".join(["neuronprobe", *sys.argv[1:]])
        with _night_progress(len(models)) as on_done:
            if shard is not None:
                from neuronprobe.nightly.run import analyse_models
                from neuronprobe.nightly.shards import shard_files

                analysed = analyse_models(
                    settings,
                    models,
                    require_backend=require_backend,
                    command_line=command_line,
                    analyze=analyze,
                    jobs=count,
                    memory=memory,
                    on_done=on_done,
                    cache=cache,
                )
            else:
                result = run_nightly(
                    settings,
                    output_dir,
                    night,
                    require_backend=require_backend,
                    command_line=command_line,
                    analyze=analyze,
                    jobs=count,
                    memory=memory,
                    on_done=on_done,
                    cache=cache,
                )
        if shard is not None:
            # The manifest goes last: a shard folder with a manifest is complete (a killed shard has none and cannot be merged).
            # For this run only: a second shard run into the same folder writes nothing (exit 2).
            from neuronprobe.nightly.shards import write_shard

            write_shard(output_dir, shard_files(settings, index, of, night, require_backend, analysed))
            if cache is not None:
                cache.commit()
                for line in cache.notes:
                    err.print(f"note: {line}", markup=False)
            failed = [a for a in analysed if a.report is None]
            for a in failed:
                err.print(f"error: {a.name}: {a.error}", markup=False, style="red")
            _out_console().print(f"shard {index}/{of}: {len(analysed)} model(s), {len(failed)} failed: {output_dir}", markup=False)
            return  # a shard gates nothing: the merge gives the night's exit code
        # Each file is complete or absent (write_atomic); the index goes last, so a run
        # killed while writing leaves the previous index, which links only complete reports.
        write_night(result, output_dir, _write)
        if cache is not None:  # only now: a run killed earlier leaves no cache entry
            cache.commit()
            for line in cache.notes:
                err.print(f"note: {line}", markup=False)
        _finish_nightly(result, output_dir / INDEX_FILE)


@contextlib.contextmanager
def _night_progress(total: int) -> Iterator[Callable[[Any], None]]:
    """A progress bar on a terminal; otherwise (a CI log) one line per finished model."""
    import threading

    from neuronprobe.formatting import format_duration
    from neuronprobe.report.nightly_html import STATUS_TEXT

    err = _err_console()
    lock = threading.Lock()
    done = [0]
    if not err.is_terminal:

        def line(item: Any) -> None:
            with lock:
                done[0] += 1
                if item.reused_from is not None:
                    state = f"reused the report of {item.reused_from} (inputs unchanged)"
                else:
                    state = f"{STATUS_TEXT['failed'] if item.report is None else 'analysed'} in {format_duration(item.seconds)}"
                err.print(f"[{done[0]}/{total}] {item.name}: {state}", markup=False)

        yield line
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("nightly"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err, transient=True) as bar:
        task = bar.add_task("nightly", total=total)

        def advance(item: Any) -> None:
            with lock:
                bar.advance(task)

        yield advance


def _finish_nightly(result: Any, index: Path) -> None:
    """Print the night and exit with its worst outcome: a neuronprobe bug (3), a model that could not be analysed (2), a regression (1)."""
    _print_nightly(result, index)
    if result.internal_errors:
        raise typer.Exit(EXIT_INTERNAL)
    if result.failures:
        raise typer.Exit(EXIT_UNUSABLE)
    if result.gate_failures:
        raise typer.Exit(EXIT_GATE_FAILED)


def _print_nightly(result: Any, index: Path) -> None:
    """A table of tonight's models, then every regression, failure and warning on a line of its own."""
    from rich.table import Table
    from rich.text import Text

    from neuronprobe.report.nightly_html import STATUS_TEXT

    console, err = _out_console(), _err_console()
    table = Table(title=f"nightly {result.date}", title_justify="left", show_edge=False)
    for column in ("model", "status", "baseline"):
        table.add_column(column)
    for o in result.outcomes:
        table.add_row(Text(o.name), Text(STATUS_TEXT[o.status]), Text(o.baseline_date or "-"))
    console.print(table)
    for o in result.outcomes:
        if o.diff is not None and not o.diff.comparable:
            console.print(f"{o.name}: not comparable, not gated: {o.diff.not_comparable_reason}", markup=False)
    console.print(f"history: {index}", markup=False)
    for warning in result.warnings:
        err.print(f"warning: {warning}", markup=False)
    for o in result.failures:
        err.print(f"error: {o.name}: {o.error}", markup=False, style="red")
    if result.internal_errors:
        err.print(f"error: {BUG_SENTENCE}", markup=False, style="red")
    gates = result.gate_failures
    for failure in gates:
        for line in failure.failed:
            err.print(f"regression: {line}", markup=False, style="red")
    if gates:
        err.print(f"gate failed: {sum(f.count for f in gates)} regression(s)", markup=False)


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
    sequence_parallel: Annotated[bool, typer.Option("--sequence-parallel", help="vllm-neuron: prefill buckets divisible by the TP degree.")] = False,
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
    with _errors(debug):
        import dataclasses

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
            console = _out_console()
            for line in render_serving(served):
                console.print(line, markup=False, highlight=False, soft_wrap=True)
            if json_path is not None:
                _write(json_path, _json_text(dataclasses.asdict(served), indent=2) + "\n")
                console.print(f"json: {json_path}", markup=False)
            return
        if any(v is not None for v in (max_num_batched_tokens, max_num_seqs, max_model_len, compile_budget, compile_times)):
            raise _fail(
                "--max-num-batched-tokens, --max-num-seqs, --max-model-len, --compile-budget, --compile-times: with --decode --runtime vllm-neuron or --metrics"
            )
        if lengths is None:
            raise _fail("give a lengths file (or a trace with --decode, or --metrics SCRAPE)")

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
                paths=tuple(str(p) for p in _import_paths(import_path)),
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
            decoded = run_decode(options)
            console = _out_console()
            from neuronprobe.shape_buckets.decode_console import render_decode

            for part in render_decode(decoded, config=options.config):
                console.print(part)
            if json_path is not None:
                _write(json_path, _json_text(dataclasses.asdict(decoded), indent=2) + "\n")
                console.print(f"json: {json_path}", markup=False)
            return

        from neuronprobe.shape_buckets import fit_step_times, propose_buckets, read_lengths, read_step_times
        from neuronprobe.shape_buckets.configs import CONFIG_NAMES
        from neuronprobe.shape_buckets.console import render_proposal

        if config not in (*CONFIG_NAMES, "all", "none"):
            raise _fail(f"--config {config!r}: use {', '.join(CONFIG_NAMES)}, all or none")
        if step_times is not None and cost != "tokens":
            raise _fail("give either --cost or --step-times, not both")
        from neuronprobe.files import check_outputs

        if json_path is not None:
            check_outputs([("--json", json_path)], [lengths, step_times])
        data = read_lengths(lengths, column=column, field=field_)
        cost_model: Any = cost if step_times is None else fit_step_times(*read_step_times(step_times))
        proposal = propose_buckets(
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
        console = _out_console()
        for part in render_proposal(proposal, config=config):
            console.print(part)
        if json_path is not None:
            _write(json_path, _json_text(dataclasses.asdict(proposal), indent=2) + "\n")
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


# --- doctor (issue 7) --------------------------------------------------------------


@app.command()
def doctor(
    require_backend: Annotated[
        str | None,
        typer.Option("--require-backend", help="Exit 2 unless this backend is really there (neuron: the real SDK)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the detected environment as JSON.")] = False,
    debug: DebugOpt = False,
) -> None:
    """Show the detected Neuron environment: which stack, its versions, and the backend `analyze` would use."""
    with _errors(debug):
        import dataclasses
        import json

        from neuronprobe.backends import resolve_backend
        from neuronprobe.backends.detect import detect

        detection = detect()
        chosen = None
        try:
            chosen = resolve_backend("auto", None).info
        except NeuronprobeError as exc:  # auto never raises today; say so if it ever does
            chosen = None
            _err_console().print(f"warning: --backend auto: {exc}", markup=False)
        from rich.text import Text

        from neuronprobe._torch import degraded, self_checks
        from neuronprobe.backends.xla_env import find_env
        from neuronprobe.support.native.table import native_table

        xla = find_env()
        checks = self_checks()
        native = native_table()  # issue 36: which native table a --stack native analysis would use, and its age
        if as_json:
            data = dataclasses.asdict(detection) | {
                "usable": detection.usable,
                "real": detection.is_real,
                "auto_backend": dataclasses.asdict(chosen) if chosen else None,
                "xla_cpu": dataclasses.asdict(xla) | {"usable": xla.usable},
                "torch_internals": [dataclasses.asdict(c) for c in checks],
                "degraded_features": degraded(checks),
                "native_table": {
                    "origin": native.origin,
                    "where": native.where,
                    "release": native.release,
                    "dated": native.dated,
                    "age_days": native.age_days(),
                },
            }
            _out_console().print_json(json.dumps(data))
        else:
            table = _doctor_table(detection, chosen)
            table.add_row("xla-cpu environment", Text(xla.summary()))  # a path: data, not markup
            table.add_row("native table", Text(native.label()))
            for check in checks:
                status = "ok     " if check.ok else "MISSING"
                value = f"{status} {check.internal}" + ("" if check.ok else f" ({check.detail}): degrades {check.degrades}")
                table.add_row("torch internal", Text(value, style="" if check.ok else "red"))
            table.add_row("degraded features", Text("; ".join(degraded(checks)) or "none"))
            _out_console().print(table)
        resolve_backend("auto", require_backend)  # BackendUnavailable -> one line, exit 2


def _doctor_table(detection: Any, chosen: Any) -> Any:
    from rich.table import Table
    from rich.text import Text

    from neuronprobe.backends.detect import PACKAGES

    table = Table(title="neuronprobe doctor", title_justify="left", show_header=False, show_edge=False)
    table.add_column("what", style="bold")
    table.add_column("value", overflow="fold")
    stack = detection.kind_label + (" — THE TEST FAKE, not hardware" if detection.fake else "")
    table.add_row("Neuron stack", Text(stack))
    for module, dist in PACKAGES.items():
        version = detection.versions.get(dist)
        path = detection.paths.get(module)
        value = f"{version or '(version unknown)'}  {path}" if path else "not installed"
        table.add_row(dist, Text(value))
    table.add_row("Neuron devices", Text(f"{detection.devices} (/dev/neuron*)"))
    if detection.problem:
        table.add_row("live backend", Text(f"unavailable: {detection.problem}", style="red"))
        table.add_row("what to do", Text(detection.hint))
    else:
        table.add_row("live backend", Text("available" + (" (tests only: NEURONPROBE_ALLOW_FAKE_SDK=1)" if detection.fake else "")))
    if chosen is not None:
        table.add_row("--backend auto", Text(f"{chosen.name}: {chosen.detail}"))
    for note in detection.notes:
        table.add_row("note", Text(note))
    return table


# --- rules (issue 27) --------------------------------------------------------------


# --- cache (issue 37.5): which planned graphs miss the compile cache at cold start -------------


@app.command()
def cache(
    action: Annotated[str, typer.Argument(help="explain: per planned graph, hit or miss and the key component that differs.")],
    plan: Annotated[Path, typer.Option("--plan", help="The planned deployment: a manifest JSON (scheme, versions, compiler args, target, graphs).")],
    cache_path: Annotated[Path, typer.Option("--cache", help="The compile cache folder, or the manifest written when it was built.")],
    debug: DebugOpt = False,
) -> None:
    """Explain compile-cache hits and misses for vLLM Neuron, TorchNeuron and XLA before a cold start."""
    with _errors(debug):
        if action != "explain":
            raise _fail(f"cache {action!r}: the action is explain")
        from neuronprobe.shape_buckets.cache_explain import explain, render_explanation

        console = _out_console()
        for line in render_explanation(explain(plan, cache_path)):
            console.print(line, markup=False, highlight=False, soft_wrap=True)


@app.command("rules")
def list_rules(
    rules: Annotated[Path | None, typer.Option("--rules", help="Also list the rules of this user rules file (JSON).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the rules as JSON.")] = False,
    debug: DebugOpt = False,
) -> None:
    """List every rule id a finding can carry (and --fail-on accepts): verdict, severity, catalogue, provenance."""
    with _errors(debug):
        import json

        from neuronprobe.support import rule_set

        entries = list(rule_set(rules).registry)  # a bad --rules file is refused here (exit 2)
        if as_json:
            _out_console().print_json(json.dumps([r.as_json() for r in entries]))
            return
        from rich.table import Table
        from rich.text import Text

        table = Table(title=f"{len(entries)} rules", title_justify="left", show_edge=False)
        for column in ("id", "verdict", "severity", "catalogue"):
            table.add_column(column, no_wrap=True)
        table.add_column("provenance", overflow="fold")
        for r in entries:
            verdicts = f"{r.verdicts[0]} +{len(r.verdicts) - 1}" if len(r.verdicts) > 1 else (r.verdict or "-")  # all in --json
            table.add_row(Text(r.id), Text(verdicts), Text(str(r.severity)), Text(str(r.kind)), Text(r.provenance))
        _out_console().print(table)


# --- setup (issue 10) --------------------------------------------------------------


@app.command()
def setup(
    backend: Annotated[str, typer.Argument(help="What to set up: xla-cpu, or native-table (on a Neuron host: the installed TorchNeuron's op table).")],
    path: Annotated[
        Path | None,
        typer.Option("--path", help="Where to create it (default: ${XDG_CACHE_HOME:-~/.cache}/neuronprobe/xla-cpu or .../native-table.json)."),
    ] = None,
    from_dump: Annotated[
        Path | None, typer.Option("--from-dump", help="native-table: build it from a recorded registrations dump instead of the installed SDK.")
    ] = None,
    debug: DebugOpt = False,
) -> None:
    """Create the environment a backend runs in (xla-cpu: torch 2.9 + torch-xla 2.9 from PyPI); reuses a complete one."""
    with _errors(debug):
        if backend == "native-table":
            _setup_native_table(path, from_dump)
            return
        if backend != "xla-cpu":
            raise _fail(f"setup {backend!r}: the only backend with an environment to set up is xla-cpu")
        from rich.markup import escape

        from neuronprobe.backends.xla_env import default_env_path, setup_env

        target = path or default_env_path()
        from neuronprobe.files import check_outputs

        check_outputs([], [], folders=[("--path", target)])
        err = _err_console()
        with err.status(f"setting up the xla-cpu environment at {escape(str(target))}") as status:
            env = setup_env(target, progress=lambda line: status.update(f"xla-cpu set-up: {escape(line[-150:])}"))
        out = _out_console()
        how = "already complete, reused" if env.reused else f"created in {env.setup_seconds:.0f} s"
        out.print(f"xla-cpu environment {how}: {env.path}", markup=False)
        out.print(f"python: {env.python}", markup=False)
        out.print("versions: " + ", ".join(f"{k} {v}" for k, v in sorted(env.versions.items())), markup=False)


def _setup_native_table(path: Path | None, from_dump: Path | None) -> None:
    """Write the installed TorchNeuron release's op table (issue 36), which later native analyses use."""
    import json

    from neuronprobe.files import check_outputs, write_atomic
    from neuronprobe.support.native import installed
    from neuronprobe.support.native.table import installed_path

    out = path or installed_path()
    check_outputs([("--path", out)], [from_dump])
    probe = installed.read_dump(from_dump) if from_dump is not None else installed.probe_installed()
    doc = installed.table_from_probe(probe, str(from_dump) if from_dump is not None else "the installed torch_neuronx")
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out, json.dumps(doc, indent=1) + "\n")
    _out_console().print(f"native table for {doc['release']}: {len(doc['neuron_kernel'])} overloads with a Neuron kernel, written to {out}", markup=False)


def main() -> None:
    from neuronprobe.console_io import final_exit_code, guard_streams

    guard_streams()  # a closed or broken stdout ends quietly with its own exit code
    try:
        app()
    except SystemExit as exc:
        raise SystemExit(final_exit_code(exc.code)) from None


if __name__ == "__main__":  # pragma: no cover
    main()
