"""What ``neuronprobe buckets TRACE --decode`` does between parsing its options and printing (cli.py stays thin)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from neuronprobe.errors import InputError
from neuronprobe.report.model import DecodeProposal
from neuronprobe.shape_buckets.costs import fit_step_times
from neuronprobe.shape_buckets.decode import propose_decode_buckets
from neuronprobe.shape_buckets.decode_console import DECODE_CONFIG_NAMES
from neuronprobe.shape_buckets.decode_trace import read_decode_trace
from neuronprobe.shape_buckets.memory import ModelShape
from neuronprobe.shape_buckets.reading import read_step_times


@dataclass
class DecodeOptions:
    trace: Path
    max_buckets: int
    prompt_column: str | None = None
    output_column: str | None = None
    time_column: str | None = None
    runtime: str = "nxdi"
    speculation_length: int = 0
    max_len: int | None = None
    step_times: Path | None = None
    model: str | None = None
    overrides: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()  # --path: folders a model file imports packages from
    target: str = "trn1"
    dtype: str = "bfloat16"
    reserve_gib: float | None = None
    tp_degree: int | None = None
    max_batch: int | None = None
    tokens_per_second: float | None = None
    max_graphs: int | None = None
    holdout: float | None = None
    config: str = "nxd_inference"
    json_path: Path | None = None
    unused: dict[str, bool] = field(default_factory=dict)  # prefill-only options the user gave
    # Loads a model file's attention shape (spec, --set values) in a killable worker: the CLI's,
    # so that the file's code never runs in the command's own process. None: a model file is refused.
    load_shape: Callable[[str, tuple[str, ...], tuple[str, ...]], ModelShape] | None = None


def run_decode(o: DecodeOptions) -> DecodeProposal:
    """Check the options, read the trace (and step times), propose. InputError (exit 2) for anything unusable."""
    given = [flag for flag, on in o.unused.items() if on]
    if given:
        raise InputError(f"{', '.join(given)}: prefill options; --decode reads --prompt-column/--output-column and fits each runtime's own rule (--runtime)")
    if o.config not in (*DECODE_CONFIG_NAMES, "all", "none"):
        raise InputError(f"--config {o.config!r}: with --decode use {', '.join(DECODE_CONFIG_NAMES)}, all or none")
    if o.overrides and not (o.model or "").startswith("hf:"):
        raise InputError("--set applies to --model hf:<model_type> only")
    if o.paths and (o.model is None or o.model.startswith("hf:")):
        raise InputError("--path applies to --model with a model file: the folders it imports packages from")
    if o.tp_degree is not None and o.model is None:
        raise InputError("--tp-degree needs --model (it picks the per-core step model)")
    if o.max_graphs is not None and o.max_batch is None:
        raise InputError("--max-graphs counts batch x sequence graphs: give --max-batch too (at batch 1 use --max-buckets)")
    model_file = o.model if o.model is not None and not o.model.startswith("hf:") else None
    if o.json_path is not None:
        from neuronprobe.files import check_outputs
        from neuronprobe.loaders.resolve import model_file_imports

        check_outputs([("--json", o.json_path)], [o.trace, o.step_times, model_file, *model_file_imports(model_file, o.paths)])
    trace = read_decode_trace(o.trace, o.prompt_column, o.output_column, o.time_column)
    fit = fit_step_times(*read_step_times(o.step_times)) if o.step_times is not None else None
    model: str | ModelShape | None = o.model
    if model_file is not None:
        if not model_file.endswith(".py"):
            raise InputError(f"--model {model_file}: give hf:<model_type> or a model file ending in .py")
        if o.load_shape is None:
            raise InputError(f"--model {model_file}: a model file is imported only in a worker; use the command line or hf:<model_type>")
        model = o.load_shape(model_file, o.overrides, o.paths)
    return propose_decode_buckets(
        trace,
        o.max_buckets,
        runtime=o.runtime,
        speculation_length=o.speculation_length,
        max_len=o.max_len,
        step_times=fit,
        model=model,
        model_overrides=o.overrides,
        model_paths=o.paths,
        target=o.target,
        dtype=o.dtype,
        reserve_gib=o.reserve_gib,
        tp_degree=o.tp_degree,
        max_batch=o.max_batch,
        tokens_per_second=o.tokens_per_second,
        max_graphs=o.max_graphs,
        holdout=o.holdout,
    )
