"""The parity run: the fp32 reference on the CPU, then the model under each precision, compared module by module.

``hf:``, ``tv:`` and ``timm:`` models are built again on the CPU with real, randomly
initialised weights from a fixed seed (an ``hf:`` model too large for that is built
shrunken, as the ``cpu-shrunk`` capture strategy does, and the section says so). Model
files run as given. The inputs are the model file's ``sample_inputs()`` (the first
:data:`~neuronprobe.defaults.PARITY_MAX_SAMPLES`) when it defines one, else its example inputs.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuronprobe import defaults
from neuronprobe.errors import InputError
from neuronprobe.loaders.resolve import HF_PREFIX, VISION_PREFIXES, LoadedModel, split_inputs
from neuronprobe.parity import drift, emulate, metrics
from neuronprobe.parity.drift import Tolerance, module_prefix
from neuronprobe.parity.precision import Precision, precision_info
from neuronprobe.parity.result import ParityResult
from neuronprobe.report.model import ModuleDrift, OutputAgreement, ParitySection, PrecisionRun, Report, TopKCheck
from neuronprobe.vocabulary import ParityRun


def _weight_bytes(module: Any) -> int:
    return sum(p.numel() * 4 for p in module.parameters() if p.is_floating_point())


def real_weights(loaded: LoadedModel, seed: int, shrink: bool | None = None) -> LoadedModel:
    """``loaded`` with real CPU weights drawn from ``seed``: hf:/tv:/timm: rebuilt on the CPU, a model file as given.

    ``shrink`` None: an ``hf:`` model is shrunk only when its fp32 weights exceed
    :data:`~neuronprobe.defaults.PARITY_MAX_WEIGHT_BYTES`.
    """
    import torch

    from neuronprobe.capture.strategies import has_meta_weights
    from neuronprobe.loaders.resolve import load_hf

    if loaded.source.startswith(HF_PREFIX):
        if shrink is None:
            shrink = _weight_bytes(loaded.module) > defaults.PARITY_MAX_WEIGHT_BYTES
        torch.manual_seed(seed)
        return load_hf(loaded.source[len(HF_PREFIX) :], loaded.overrides, device="cpu", shrink=shrink, input_plan=loaded.input_plan)
    if loaded.source.startswith(VISION_PREFIXES):
        from neuronprobe.loaders.vision import load_vision

        torch.manual_seed(seed)
        return load_vision(loaded.source, device="cpu")
    if has_meta_weights(loaded.module):
        raise InputError(f"{loaded.source}: get_model() builds the model on the meta device; parity needs real weights to compare numbers")
    return loaded


def parity_inputs(loaded: LoadedModel) -> tuple[list[tuple[tuple[Any, ...], dict[str, Any]]], str]:
    """The inputs parity runs, and where they came from (for the section)."""
    if loaded.sample_inputs is not None:
        samples = list(itertools.islice(iter(loaded.sample_inputs()), defaults.PARITY_MAX_SAMPLES))
        if samples:
            where = f"{loaded.source}: sample_inputs()"
            return [split_inputs(s, where) for s in samples], f"sample_inputs(): the first {len(samples)}"
    origin = "get_example_inputs()" if loaded.path is not None else "the loader's example inputs"
    return [(loaded.args, loaded.kwargs)], origin


def _merge(rows_per_input: list[list[ModuleDrift]]) -> tuple[list[ModuleDrift], dict[str, int]]:
    """One row per module call over every input (worst of each statistic), in the first input's order, and
    for each call the first input where it exceeds."""
    order: list[str] = []
    merged: dict[str, ModuleDrift] = {}
    first_bad: dict[str, int] = {}
    for i, rows in enumerate(rows_per_input):
        for r in rows:
            if r.exceeds and r.module not in first_bad:
                first_bad[r.module] = i
            m = merged.get(r.module)
            if m is None:
                order.append(r.module)
                merged[r.module] = ModuleDrift(r.module, r.module_type, r.file, r.line, r.max_abs, r.rel, r.ulps, r.nonfinite, r.exceeds)
                continue
            m.max_abs, m.rel, m.ulps = max(m.max_abs, r.max_abs), max(m.rel, r.rel), max(m.ulps, r.ulps)
            m.nonfinite += r.nonfinite
            m.exceeds = m.exceeds or r.exceeds
    return [merged[k] for k in order], first_bad


def _merge_agreements(items: list[OutputAgreement | None]) -> OutputAgreement | None:
    present = [a for a in items if a is not None]
    if not present:
        return None
    out = present[0]
    for a in present[1:]:
        out.rows += a.rows
        out.top1_same += a.top1_same
        for mine, theirs in zip(out.topk, a.topk, strict=False):
            mine.checked += theirs.checked
            mine.failed += theirs.failed
            if mine.worst_position is None:
                mine.worst_position = theirs.worst_position
        if out.greedy_divergence is None and a.greedy_divergence is not None:
            out.greedy_divergence, out.divergence_gap, out.divergence_tie = a.greedy_divergence, a.divergence_gap, a.divergence_tie
    return out


def _call(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any], seed: int, state: dict[str, Any] | None = None) -> Callable[[], Any]:
    """The forward on these inputs from ``seed``; ``state``: the weights and buffers to run with instead (served dtype)."""
    import torch

    def forward() -> Any:
        torch.manual_seed(seed)
        if state is not None:
            return torch.func.functional_call(module, state, args, kwargs)
        return module(*args, **kwargs)

    return forward


def run_precision(
    module: Any,
    inputs: list[tuple[tuple[Any, ...], dict[str, Any]]],
    references: list[drift.Reference],
    precision: Precision,
    *,
    seed: int = defaults.DEFAULT_PARITY_SEED,
    tolerance: Tolerance = drift.DEFAULT_TOLERANCE,
    attribute: bool = True,
    first_output: list[Any] | None = None,
    strip: str = "",
    casts: emulate.WeightCasts | None = None,
) -> PrecisionRun:
    """The model (fp32, on the CPU) under ``precision``, each input compared with its reference.

    ``first_output``: a list that receives the first input's output tensors (fp32), for the xla-cpu comparison.
    A precision that narrows nothing (no auto-cast, served in fp32) computes exactly what the reference computed:
    it is not run again; its rows are the reference's, with no error, and its ``note`` says so.
    ``casts``: the weights cast to a narrower dtype, shared by the precisions of one parity run."""
    if precision.is_fp32:
        return _as_reference(precision, references)
    start = time.perf_counter()
    low = precision.low_type
    rows_per_input: list[list[ModuleDrift]] = []
    outputs: list[ModuleDrift] = []
    agreements: list[OutputAgreement | None] = []
    casts = casts if casts is not None else emulate.WeightCasts()
    state = emulate.served_state(module, precision, casts)  # the weights cast when served in bf16/fp16 (the model is not copied)
    for (args, kwargs), ref in zip(inputs, references, strict=True):
        a, k = emulate.served_inputs(args, kwargs, precision)
        with emulate.emulated(precision, module, state, casts) as emulator:
            got = drift.compare(module, _call(module, a, k, seed, state), ref, low, tolerance, strip, measuring=emulator.paused)
        if first_output is not None and not first_output:
            first_output.extend(t.detach().float() for t in drift.float_tensors(got.final_value))
        rows_per_input.append(got.modules)
        outputs.append(got.output)
        agreements.append(metrics.agreement(ref.final_value, got.final_value, ref.expected_logits))
    rows, first_bad = _merge(rows_per_input)
    output, _ = _merge([[o] for o in outputs])
    first = drift.first_exceeding(rows)
    if first is not None and attribute:
        args, kwargs = inputs[first_bad[first.module]]
        a, k = emulate.served_inputs(args, kwargs, precision)
        with emulate.emulated(precision, module, state, casts) as emulator:
            first.dominant_op = drift.dominant_op(module, first.module, _call(module, a, k, seed, state), emulator, strip)
    return PrecisionRun(
        precision_info(precision),
        modules=rows,
        first_exceeding=first,
        output=output[0] if output else None,
        agreement=_merge_agreements(agreements),
        seconds=round(time.perf_counter() - start, 3),
    )


# An fp32 precision's note: the same forward as the reference, bit for bit (the emulation narrows nothing).
SAME_AS_REFERENCE = "narrows nothing: the fp32 reference's own forward, so not run again (no error by construction)"


def _as_reference(precision: Precision, references: list[drift.Reference]) -> PrecisionRun:
    first = references[0]
    rows = [ModuleDrift(c.key, c.module_type, c.file, c.line, 0.0, 0.0, 0.0, 0, False) for c in first.calls]
    output = ModuleDrift("", rows[-1].module_type if rows else "", None, None, 0.0, 0.0, 0.0, 0, False)
    agreements = [metrics.agreement(r.final_value, r.final_value) for r in references]
    return PrecisionRun(precision_info(precision), modules=rows, output=output, agreement=_merge_agreements(agreements), note=SAME_AS_REFERENCE)


def run_parity_full(
    loaded: LoadedModel,
    precisions: Sequence[Precision],
    *,
    seed: int = defaults.DEFAULT_PARITY_SEED,
    tolerance: Tolerance = drift.DEFAULT_TOLERANCE,
    keep_outputs: bool = False,
    shrink: bool | None = None,
    attribute: bool = True,
    xla: bool = False,
    xla_timeout: float = defaults.DEFAULT_TIMEOUT_S,
) -> ParityResult:
    """:func:`run_parity`, also returning the model as it ran, its inputs and (``keep_outputs``) every module call's
    fp32 output, for the frozen references (``ParityResult.per_module``).

    ``xla``: also run the model in bf16 through torch-xla 2.9 on the CPU (the xla-cpu worker) on the first
    input, next to the emulation of the same precision (added to ``precisions`` when missing)."""
    import torch

    from neuronprobe.parity import xla as xla_run

    env = xla_run.xla_env_or_fail() if xla else None  # before any work: a missing environment is exit 2 at once
    precisions = list(precisions)
    if xla and xla_run.XLA_PRECISION not in precisions:
        precisions.append(xla_run.XLA_PRECISION)

    with torch.random.fork_rng(devices=[]):  # seeded weights and forwards; the caller's RNG is left as it was
        return _run_parity_full(loaded, precisions, seed, tolerance, keep_outputs, shrink, attribute, xla, xla_timeout, env)


def _run_parity_full(
    loaded: LoadedModel,
    precisions: Sequence[Precision],
    seed: int,
    tolerance: Tolerance,
    keep_outputs: bool,
    shrink: bool | None,
    attribute: bool,
    xla: bool,
    xla_timeout: float,
    env: Any,
) -> ParityResult:
    import torch

    from neuronprobe.parity import xla as xla_run

    real = real_weights(loaded, seed, shrink)
    real.module.eval()
    inputs, origin = parity_inputs(real)
    shrunk = next((n for n in real.notes if n.startswith("shrunken config")), None)
    section = ParitySection(
        seed=seed,
        rtol=tolerance.rtol,
        atol=tolerance.atol,
        inputs=origin,
        shrunk=f"shrunk: {shrunk}" if shrunk else None,
        emulated=list(emulate.EMULATED),
        not_emulated=list(emulate.NOT_EMULATED),
    )
    start = time.perf_counter()
    references = []
    with torch.no_grad():
        for args, kwargs in inputs:
            references.append(drift.record_reference(real.module, _call(real.module, args, kwargs, seed), strip=module_prefix(real)))
    section.reference_seconds = round(time.perf_counter() - start, 3)
    emulated_bf16: list[Any] = []
    casts = emulate.WeightCasts()  # each weight cast to bf16 once for every precision that needs it
    for precision in precisions:
        keep = emulated_bf16 if xla and precision == xla_run.XLA_PRECISION else None
        section.runs.append(
            run_precision(
                real.module,
                inputs,
                references,
                precision,
                seed=seed,
                tolerance=tolerance,
                attribute=attribute,
                first_output=keep,
                strip=module_prefix(real),
                casts=casts,
            )
        )
    del casts
    if xla:
        row, tensors = xla_run.run_xla_bf16(real, inputs[0], references[0], tolerance=tolerance, timeout=xla_timeout, env=env)
        section.runs.append(row)
        if tensors is not None:
            emulated_row = next(r for r in section.runs if r.run is ParityRun.EMULATED and r.precision.label == xla_run.XLA_PRECISION.label)
            section.xla_vs_emulation = xla_run.compare_with_emulation(tensors, emulated_bf16, row, emulated_row)
    return ParityResult(
        section,
        real,
        inputs,
        reference_outputs=[r.final_value for r in references],
        per_module=[r.outputs for r in references] if keep_outputs else [],
    )


def run_parity(
    loaded: LoadedModel,
    precisions: Sequence[Precision],
    *,
    seed: int = defaults.DEFAULT_PARITY_SEED,
    tolerance: Tolerance = drift.DEFAULT_TOLERANCE,
    shrink: bool | None = None,
) -> ParitySection:
    """The fp32 reference and one run per precision, as the report's parity section."""
    return run_parity_full(loaded, precisions, seed=seed, tolerance=tolerance, shrink=shrink).section


@dataclass
class ParityOptions:
    """What ``neuronprobe parity`` (and ``analyze --parity``) asks for."""

    precisions: list[Precision] = field(default_factory=list)  # empty: precision.DEFAULT_PRECISIONS
    seed: int = defaults.DEFAULT_PARITY_SEED
    tolerance: Tolerance = drift.DEFAULT_TOLERANCE
    overrides: list[str] = field(default_factory=list)  # hf: --set KEY=VALUE
    xla: bool = False  # --backend xla-cpu: also the bf16 run through torch-xla 2.9
    xla_timeout: float = defaults.DEFAULT_TIMEOUT_S
    keep_outputs: bool = False  # every module call's fp32 output in ParityResult.per_module
    after_run: Callable[[ParityResult], None] | None = None  # `parity`: sees the run before it is let go (issue 25 points 4, 5)
    paths: list[Path] = field(default_factory=list)  # --path DIRs: package roots a model file imports from


def parity_for_spec(spec: str, options: ParityOptions) -> ParityResult:
    """Load ``spec`` (a model file, ``hf:``, ``tv:``, ``timm:``) from the seed and run parity on it."""
    import contextlib

    import torch

    from neuronprobe.console_io import stage
    from neuronprobe.loaders.resolve import hf_build_scope, load_model, model_imports
    from neuronprobe.parity.precision import DEFAULT_PRECISIONS
    from neuronprobe.usercode import user_exit_guard

    model_file = spec if not spec.startswith((HF_PREFIX, *VISION_PREFIXES)) else None
    scope = hf_build_scope() if spec.startswith(HF_PREFIX) else contextlib.nullcontext()
    imports = model_imports(model_file, options.paths)  # the model's folder first on sys.path, as `python model.py` has it
    with scope, imports, user_exit_guard(spec, model_file), torch.random.fork_rng(devices=[]):  # the caller's RNG is left as it was
        torch.manual_seed(options.seed)  # a model file's get_model() draws its weights now
        stage("load")
        loaded = load_model(spec, options.overrides, paths=options.paths)
        return run_parity_full(
            loaded,
            options.precisions or list(DEFAULT_PRECISIONS),
            seed=options.seed,
            tolerance=options.tolerance,
            keep_outputs=options.keep_outputs,
            xla=options.xla,
            xla_timeout=options.xla_timeout,
        )


# Why a `neuronprobe parity` report has no op analysis (its top-line verdict is therefore not_analysed).
NUMBERS_ONLY = "`neuronprobe parity` compares numbers only; `neuronprobe analyze MODEL --parity` adds the op analysis and its verdict"


def _with_risky(report: Report, result: ParityResult) -> Report:
    """The risky low-precision constructs each emulated precision reaches, as findings of ``report`` (:mod:`.risky`)."""
    from neuronprobe.parity import risky

    return risky.add_risky(report, result)


def parity_report(spec: str, options: ParityOptions, *, target: str = defaults.DEFAULT_TARGET, command_line: str = "") -> Report:
    """A report holding only the parity section (``neuronprobe parity``); the op analysis is named as not run."""
    from neuronprobe.analysis import AnalyzeOptions, run_metadata
    from neuronprobe.report.model import CaptureInfo, Limitation

    result = parity_for_spec(spec, options)
    if options.after_run is not None:  # frozen references and --train read the whole run (neuronprobe.parity.frozen)
        options.after_run(result)
    report = Report(model=result.loaded.name, target=target, capture=CaptureInfo(export_error="not run: " + NUMBERS_ONLY))
    report.metadata = run_metadata(result.loaded, AnalyzeOptions(target=target, command_line=command_line))
    report.not_analysed.append(Limitation(what="op analysis", why=NUMBERS_ONLY))
    report.parity = result.section
    return _with_risky(report, result)


def add_parity(report: Report, spec: str, options: ParityOptions) -> Report:
    """``analyze --parity``: the analysis report with the parity section (its verdict is unchanged)."""
    result = parity_for_spec(spec, options)
    report.parity = result.section
    return _with_risky(report, result)


__all__ = [
    "ParityOptions",
    "ParityResult",
    "TopKCheck",
    "add_parity",
    "parity_for_spec",
    "parity_report",
    "precision_info",
    "real_weights",
    "run_parity",
    "run_parity_full",
    "run_precision",
]
