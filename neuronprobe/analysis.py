"""The pipeline ``analyze()`` runs: load -> capture -> classify -> (traffic) -> Report.

Pure: it returns a :class:`Report` and never prints, exits or writes files.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import platform
import socket
import subprocess
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neuronprobe.backends import ResolvedBackend, resolve_backend
from neuronprobe.capture.graph import (
    AssumedBranch,
    BreakRecord,
    CaptureFailure,
    ForwardError,
    OpCall,
    OpGraph,
    capture,
    implausible,
    region_words,
    relative_path,
    user_frame_from_traceback,
)
from neuronprobe.console_io import stage
from neuronprobe.defaults import (
    DEFAULT_BACKEND,
    DEFAULT_MAX_BUCKETS,
    DEFAULT_MAX_COMPILES,
    DEFAULT_OP_TIMEOUT_S,
    DEFAULT_TIMEOUT_S,
)
from neuronprobe.errors import InputError, ModelLoadError
from neuronprobe.loaders.resolve import HF_PREFIX, LoadedModel, hf_build_scope, load_model, model_imports, split_inputs
from neuronprobe.report.model import (
    CallFrame,
    CaptureInfo,
    Finding,
    GraphBreak,
    Limitation,
    OpSummary,
    PredictionDiff,
    PredictionMismatch,
    Report,
    RunMetadata,
    Summary,
    SupportTableInfo,
    place_cells,
)
from neuronprobe.support import (
    DEFAULT_TARGET,
    Classification,
    RuleSet,
    check_target,
    classify,
    load_table,
    rule_by_id,
    rule_set,
    select_sdk,
)
from neuronprobe.support.device_dtypes import device_dtypes
from neuronprobe.support.integer_downcast import adjust, parse_flags
from neuronprobe.support.native.classify import classify_native, first_reader, wide_inputs
from neuronprobe.support.native.compile import (
    COMPILE,
    EAGER,
    check_native_mode,
    compiled_breaks,
    compiled_recompiles,
    compiled_verdict,
    fallback_execution_disabled,
)
from neuronprobe.support.native.stack import NATIVE, check_native_sdk, check_stack
from neuronprobe.support.native.table import NativeTable, native_table
from neuronprobe.usercode import user_exit_guard
from neuronprobe.vocabulary import SUPPORTED_VERDICTS, Origin, Phase, SourceLocation, Verdict

if TYPE_CHECKING:  # pragma: no cover
    from neuronprobe.capture.strategies import Captured
    from neuronprobe.training import TrainOptions

# Verdicts whose ops cut the lazy device graph: torch-xla materialises pending
# work before running them on the host (or before reading a data-dependent size).
GRAPH_CUTTING_VERDICTS = frozenset({Verdict.CPU_FALLBACK, Verdict.DYNAMIC_SHAPE})
GIT_TIMEOUT_S = 5
CONTROL_FLOW_OP = "<python branch on tensor value>"
BRANCH_RULE = "data-dependent-branch"  # built in: a branch on a tensor value (export failure or graph break)
# Built in: a graph break on Python dynamo cannot follow (no op to put in the support table). TorchNeuron's
# torch.compile(backend="neuron") is Dynamo -> AOTAutograd -> neuronx-cc (TorchNeuron sources, named in
# ../shared/research/neuron_api.md), so dynamo's breaks are its graph boundaries; torch-xla's lazy trace is not dynamo.
PYTHON_BREAK_RULE = "graph-break-python"
PYTHON_BREAK_MESSAGE = (
    "dynamo cannot capture this Python, so the graph breaks here: under torch.compile (TorchNeuron's neuron backend "
    "on trn2/trn3) the forward splits at this line into separate device graphs and the code between them runs "
    "outside any compiled graph, on every call; torch-neuronx's XLA trace (trn1/inf2) does not go through dynamo "
    "and is not split by it"
)
# Its fix is the registry's (support/data/builtin_rules.json).


@dataclass
class AnalyzeOptions:
    target: str = DEFAULT_TARGET
    backend: str = DEFAULT_BACKEND
    require_backend: str | None = None
    sdk: str | None = None  # Neuron SDK release whose rules apply (None: detected, else the newest known)
    rules: Path | None = None  # a user's rule file, applied before the bundled rules
    overrides: list[str] = field(default_factory=list)
    timeout: float = DEFAULT_TIMEOUT_S
    op_timeout: float = DEFAULT_OP_TIMEOUT_S
    command_line: str = ""
    train: TrainOptions | None = None  # analyse the whole training step (--train)
    max_memory: int | None = None  # the analysis's --max-memory in bytes (None: the default share of the machine)
    entry: str | None = None  # the model's method to analyse (--entry; None: the file's ENTRY, else forward)
    paths: list[Path] = field(default_factory=list)  # --path DIRs: package roots a model file imports from
    stack: str | None = None  # xla | native (None: the SDK's documented default for the target and release; issue 36)
    support_table: Path | None = None  # --support-table: a native release's torch_api_compatibility.md (or JSON)
    compiler_args: str | None = None  # --compiler-args: neuronx-cc flags (else NEURON_CC_FLAGS), for the integer downcasts
    native_mode: str | None = None  # --native-mode eager|compile: TorchNeuron eager or torch.compile(backend="neuron") (None: eager)


@dataclass(frozen=True)
class TrafficOptions:
    """The traffic to predict compiles for, and how to bucket it (``--shapes``/``--lengths`` and friends).

    The nightly config's ``[[models]]`` tables hold these same fields (``nightly.ModelConfig.traffic``).
    """

    shapes: Path | None = None
    lengths: Path | None = None
    column: str | None = None
    field: str | None = None
    batch_sizes: list[int] | None = None
    buckets: list[int] | None = None
    max_buckets: int = DEFAULT_MAX_BUCKETS
    compile_seconds: float | None = None
    max_compiles: int = DEFAULT_MAX_COMPILES

    @property
    def given(self) -> bool:
        return self.shapes is not None or self.lengths is not None


@dataclass
class ClassifiedCall:
    call: OpCall
    verdict: Classification


# --- the analysis of a module object or a spec (request/run.py and request/api.py build their options) ---


def analyze_module(model: Any, example_inputs: Any, options: AnalyzeOptions, traffic: TrafficOptions | None = None, name: str | None = None) -> Report:
    """Analyse a ``torch.nn.Module`` object in this process (the Python API and the notebook's cell magic)."""
    resolved = _resolve(options)
    rules = rule_set(options.rules)
    args, kwargs = split_inputs(example_inputs if example_inputs is not None else (), "example_inputs")
    loaded = LoadedModel(name=name or type(model).__name__, source="<python>", module=model, args=args, kwargs=kwargs)
    if options.entry is not None and options.entry != "forward":
        loaded = _entry_of(loaded, options.entry)
    with user_exit_guard(loaded.name, _source_file(model)), environment_kept():
        report = quiet_report(_analyze_loaded(loaded, options, traffic or TrafficOptions(), resolved, rules))
    place_cells(report)  # a model defined in a notebook: In [n], line k, not the kernel's temporary file
    return report


def quiet_report(report: Report) -> Report:
    """No PyTorch internal-assert text or dispatcher dump in what the user reads (issue 33.8): each
    limitation's reason and finding's message is quieted (support/data/error_patterns.json ``quiet``),
    the whole text kept in its ``detail`` (the JSON; the console shows it with --debug)."""
    from neuronprobe.support.error_patterns import quieted

    for limitation in report.not_analysed:
        q = quieted(limitation.why)
        if q.detail:
            limitation.why, limitation.detail = q.shown, limitation.detail or q.detail
    for finding in report.findings:
        q = quieted(finding.message)
        if q.detail:
            finding.message, finding.detail = q.shown, finding.detail or q.detail
    return report


@contextlib.contextmanager
def environment_kept() -> Iterator[None]:
    """Leave the process environment as it was: the notebook's process is the user's.

    torch writes ``TORCHINDUCTOR_CACHE_DIR`` into ``os.environ`` the first time a compile in the
    process asks for inductor's cache folder (``torch/_inductor/runtime/cache_dir_utils.py``, torch
    2.13), which the dynamo capture and the recompile evidence do; a fresh kernel would keep it.
    """
    saved = dict(os.environ)
    try:
        yield
    finally:
        for key in set(os.environ) - set(saved):
            del os.environ[key]
        for key, value in saved.items():
            if os.environ.get(key) != value:
                os.environ[key] = value


def analyze_spec(spec: str, options: AnalyzeOptions, traffic: TrafficOptions | None = None) -> Report:
    """Analyse a model file or ``hf:`` spec (what ``neuronprobe analyze`` runs)."""
    resolved = _resolve(options)  # before any work: --require-backend fails closed
    from neuronprobe._torch.neuron_device import compile_backend_scope

    rules = rule_set(options.rules)  # the user's rules file, parsed once and passed down (a bad one: exit 2 before any work)
    from neuronprobe.loaders.resolve import check_entry

    check_entry(spec, options.entry)
    is_file = not spec.startswith("hf:") and Path(spec).is_file()
    # hf: models stay offline and transformers quiet for the whole analysis (forwards log advice too), not after it.
    scope = hf_build_scope() if spec.startswith(HF_PREFIX) else contextlib.nullcontext()
    traffic = traffic or TrafficOptions()
    # The model's folder (and --path) first on sys.path from loading to the last forward, as `python model.py` has it.
    imports = model_imports(spec if is_file else None, options.paths)
    # --stack native: torch.compile(backend="neuron") in the model builds (TorchNeuron's name, a pass-through while analysing)
    compile_name = compile_backend_scope() if options.stack == NATIVE else contextlib.nullcontext()
    with scope, imports, compile_name, user_exit_guard(spec, spec if is_file else None):  # sys.exit() in the model file is an error, not an exit
        return quiet_report(_analyze_with_strategies(spec, options, traffic, resolved, rules))


def _analyze_with_strategies(spec: str, options: AnalyzeOptions, traffic: TrafficOptions, resolved: ResolvedBackend, rules: RuleSet) -> Report:
    """Capture the way that works (meta, fake, cpu-shrunk; see capture/strategies.py), then analyse that capture once.

    The strategies load and capture only; classification, the live backend's observation, traffic and the
    report run on the winner alone, so a model whose first way fails pays for that way's capture, not its analysis.
    """
    from neuronprobe.capture import strategies as cs
    from neuronprobe.loaders.resolve import HF_DEFAULT_BATCH, HF_DEFAULT_SEQ_LEN, HF_PREFIX

    def capture_one(loaded: LoadedModel) -> cs.Captured:
        return capture_model(loaded, options)

    stage("load")
    if spec.startswith(HF_PREFIX):
        model_type = spec[len(HF_PREFIX) :]
        outcome = cs.capture_hf(model_type, list(options.overrides), HF_DEFAULT_SEQ_LEN, HF_DEFAULT_BATCH, capture_one)
        if outcome.captured is None:
            cs.check_input_blame(model_type, list(options.overrides), outcome, HF_DEFAULT_SEQ_LEN, HF_DEFAULT_BATCH, capture_one)
            return _unanalysable(f"hf_{model_type}", spec, options, resolved, outcome)
    else:
        from neuronprobe.backends.xla_tensors import registrations

        with registrations() as registered:  # the line of each register_buffer / nn.Parameter (issue 33.7)
            loaded = load_model(spec, options.overrides, options.entry, options.paths)
        loaded.registered = registered
        outcome = cs.capture_loaded(loaded, capture_one)
        if outcome.captured is None:
            return _unanalysable(loaded.name, loaded.source, options, resolved, outcome)
    return cs.finish(_report_of(outcome.captured, options, traffic, resolved, rules), outcome)


def _unanalysable(name: str, source: str, options: AnalyzeOptions, resolved: ResolvedBackend, outcome: Any) -> Report:
    """A report with no ops whose limitation gives every strategy's reason (the CLI exits 4 on it)."""
    from neuronprobe.capture import strategies as cs

    table = load_table()
    reasons = cs.give_up_reason(outcome)
    report = Report(
        model=name,
        target=options.target,
        backend=resolved.info,
        capture=CaptureInfo(method="none", export_error=f"no capture strategy worked ({reasons})"),
        support_table=native_support_info(native_table(options.support_table), options.target)
        if options.stack == NATIVE
        else SupportTableInfo(version=table.label(select_sdk(table, options.sdk, None)), target=options.target, provenance=list(table.provenance)),
        metadata=run_metadata(LoadedModel(name=name, source=source, module=_Empty()), options),
        not_analysed=[Limitation(what="the whole model", why=f"no capture strategy could run its forward: {reasons}")],
    )
    return cs.finish(report, outcome)


class _Empty:
    """A stand-in module for the metadata of a model that could not be built or run."""

    def parameters(self) -> list[Any]:
        return []


def _entry_of(loaded: LoadedModel, entry: str) -> LoadedModel:
    """A module object analysed through one of its methods (``entry="generate"``); a wrong name is the caller's error."""
    import dataclasses

    from neuronprobe.loaders.entry import EntryError, entry_module

    try:
        return dataclasses.replace(loaded, module=entry_module(loaded.module, entry), entry=entry)
    except EntryError as exc:
        raise InputError(f"entry={entry!r}: {exc}") from exc


def _source_file(model: Any) -> str | None:
    """The file that defines a module's class, to name the line of a sys.exit() in it."""
    import inspect

    try:
        return inspect.getsourcefile(type(model))
    except (TypeError, OSError):
        return None


def _resolve(options: AnalyzeOptions) -> ResolvedBackend:
    check_target(options.target)
    options.stack = check_stack(options.stack, options.target, options.sdk)
    options.native_mode = check_native_mode(options.native_mode, options.stack)
    if options.native_mode == COMPILE:
        fallback_execution_disabled(os.environ)  # a bad TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION is refused before any model runs
    if options.stack == NATIVE:
        native_table(options.support_table)  # a bad --support-table is refused before any model runs
    elif options.support_table is not None:
        raise InputError("--support-table: a TorchNeuron compatibility table is for --stack native (trn2/trn3)")
    if options.sdk is not None:
        check_native_sdk(options.sdk) if options.stack == NATIVE else load_table().check_sdk(options.sdk)
    parse_flags(options.compiler_args, os.environ)  # a bad flag value is refused before any model runs
    if options.stack != NATIVE and options.backend == "native-cpu":
        raise InputError("--backend native-cpu plays TorchNeuron's neuron device, the native stack; use it with --stack native (trn2/trn3)")
    if options.backend == "native-cpu" and options.native_mode == COMPILE:
        raise InputError("--backend native-cpu observes eager dispatch, not torch.compile graphs; use --native-mode eager, or --backend static for compile")
    if options.stack == NATIVE and "xla-cpu" in (options.backend, options.require_backend):
        raise InputError("--backend xla-cpu observes torch-xla, the XLA stack; for --stack native use --backend static or neuron")
    resolved = resolve_backend(options.backend, options.require_backend)
    if options.backend == "native-cpu":  # the stand-in follows the same table as the static answer
        resolved.live.support_table = options.support_table  # type: ignore[union-attr]
    if options.stack == NATIVE and options.backend == "auto" and (resolved.info.name == "xla-cpu" or resolved.live is None):
        from neuronprobe.backends.native_cpu import NativeCpuBackend  # auto on the native stack: the stand-in, if _auto_choice keeps it

        stand_in = NativeCpuBackend(options.support_table, chosen_by_auto=True)
        return ResolvedBackend(stand_in.info(), stand_in)
    if options.stack == NATIVE and (resolved.info.name == "xla-cpu" or resolved.live is None):  # torch-xla answers for the other stack
        from neuronprobe.backends import static_info

        return ResolvedBackend(
            static_info(
                f"predicted from the native support table (TorchNeuron {'torch.compile' if options.native_mode == COMPILE else 'eager'}); xla-cpu observes the XLA stack, not this one"
            )
        )
    return resolved


# --- the pipeline --------------------------------------------------------------------


def _analyze_loaded(loaded: LoadedModel, options: AnalyzeOptions, traffic: TrafficOptions, resolved: ResolvedBackend, rules: RuleSet | None = None) -> Report:
    """Capture a model as it is (no strategy search: a module object the caller built) and analyse it."""
    return _report_of(capture_model(loaded, options), options, traffic, resolved, rules or rule_set(options.rules))


def capture_model(loaded: LoadedModel, options: AnalyzeOptions) -> Captured:
    """The capture of one loaded model: its forward's op graph and, with ``--train``, its training step.

    What a capture strategy tries; a forward that raises or returns no tensor is a :class:`ModelLoadError`.
    """
    from neuronprobe.capture.strategies import Captured

    # hf: models on meta weights and entry-point wrappers (loaders/entry.py) hold the model as ``.model``
    prefix = "model." if (loaded.on_meta and loaded.source.startswith("hf:")) or loaded.entry else ""
    training: Any = None  # the training module, imported only for --train
    step = None
    stage("capture")
    if options.train is not None:
        from neuronprobe import training as training_module

        training = training_module
        training.check_trainable(loaded.module, loaded.name)
        loaded = training.with_labels(loaded)
        if loaded.train_step is not None:
            # train_step() calls the model itself: run it first to learn what the forward is called with.
            step = training.capture_training(loaded, options.train, prefix)
    try:
        if step is not None:
            graph = training.capture_step_forward(step, loaded, prefix, capture)
        else:
            with training.train_mode(loaded.module) if training else contextlib.nullcontext():
                graph = capture(loaded.module, loaded.args, loaded.kwargs, prefix, assume_sizes=loaded.assume_sizes, anchors=_anchors(loaded))
    except ForwardError as err:
        file, line, _ = user_frame_from_traceback(err.original)
        where = f"{relative_path(file)}:{line}" if file else loaded.source
        raise ModelLoadError(f"{where}: the model's forward raised {type(err.original).__name__}: {err.original}") from err.original
    if graph.output_tensors == 0:
        raise ModelLoadError(
            f"{_forward_where(loaded)}: the model's forward returned no tensor; return the output tensor(s), there is nothing to compile otherwise"
        )
    if training is not None and step is None:
        step = training.capture_training(loaded, options.train, prefix)
    return Captured(loaded, graph, step)


def _report_of(captured: Captured, options: AnalyzeOptions, traffic: TrafficOptions, resolved: ResolvedBackend, rules: RuleSet) -> Report:
    """Classify a capture, observe it on the live backend, predict its traffic and assemble the report: once per analysis.

    ``rules``: the bundled rules and the user's (``--rules``), which classify the ops and register the ids their findings carry.
    """
    table = rules.table
    loaded, graph, step = captured.loaded, captured.graph, captured.step
    training: Any = None
    if options.train is not None:
        from neuronprobe import training as training_module

        training = training_module
    stage("classify")
    stack = options.stack or check_stack(None, options.target, options.sdk)
    sdk = select_sdk(table, options.sdk if stack != NATIVE else None, resolved.info.versions.get("neuronx-cc"))
    dtypes = device_dtypes(options.target, os.environ)  # XLA_USE_BF16 and friends, as torch-xla would read them here
    native = native_table(options.support_table) if stack == NATIVE else None
    by_table = (lambda call: classify(call, options.target, table, sdk, dtypes)) if native is None else (lambda call: classify_native(call, native))
    flags = parse_flags(options.compiler_args, os.environ)
    release = sdk if native is None else check_native_sdk(options.sdk)
    base = lambda call: adjust(call, by_table(call), flags, release, Classification, own_default=native is not None)  # noqa: E731
    compiled = native is not None and options.native_mode == COMPILE
    if compiled:  # torch.compile(backend="neuron"): a host op fails its graph's compile
        eager_base = base
        base = lambda call: compiled_verdict(eager_base(call), call, os.environ)  # noqa: E731
    classified = [ClassifiedCall(c, base(c)) for c in graph.calls]
    counted = [c for c in classified if c.verdict.rule != "bookkeeping"]
    if training is not None:
        counted.extend(c for c in (ClassifiedCall(call, training.classify_training(call, base)) for call in step.calls) if c.verdict.rule != "bookkeeping")

    findings = _findings(counted, rules)
    findings.extend(_device_move_findings(loaded))
    findings.extend(_failure_findings(graph.failure))
    if native is not None:
        findings.extend(_wide_input_findings(loaded, graph.calls))
    findings.extend(_assumed_findings(graph.assumed, findings))
    from neuronprobe.decoding import decode_findings

    findings.extend(decode_findings(graph.calls))  # a generate() loop whose sequence grows per token
    breaks = _graph_breaks(graph.graph_breaks)
    break_findings = _break_findings(graph.graph_breaks, findings)
    findings.extend(break_findings)
    if compiled:  # fullgraph=True raises at each break
        findings = compiled_breaks(findings, break_findings)
    if training is not None and step is not None:  # after the forward's own findings, which a read in it joins
        findings.extend(training.host_read_findings(step.host_reads, device_graph_count(counted), findings))
    findings.sort(key=lambda f: (-f.verdict.rank, f.file or "", f.line or 0))

    limitations = _limitations(graph)
    report = Report(
        model=loaded.name,
        target=options.target,
        backend=resolved.info,
        ops=_inventory(counted),
        findings=findings,
        graph_breaks=breaks,
        capture=CaptureInfo(
            method=graph.method,
            export_error=f"{graph.failure.exception}: {graph.failure.message}" if graph.failure else None,
            seconds=round(graph.seconds, 3),
            nodes=len(graph.calls) + (len(step.calls) if step is not None else 0),
            stopped=graph.stopped,
            incomplete=implausible(graph),
            entry=loaded.entry,
            regions=[region_words(r) for r in graph.regions],
        ),
        support_table=SupportTableInfo(version=table.label(sdk), target=options.target, provenance=[*table.provenance, dtypes.describe()])
        if native is None
        else native_support_info(native, options.target, options.native_mode or EAGER),
        metadata=run_metadata(loaded, options),
        not_analysed=limitations,
    )
    observation = None
    if resolved.live is not None:
        resolved = _auto_choice(report, loaded, options, resolved, counted)
    if resolved.live is not None:
        stage("observe")
        observation = _apply_observation(report, loaded, options, resolved, counted, step)
        if observation is None:  # auto: the observation failed and the static report stands
            resolved = ResolvedBackend(report.backend)
    if traffic.given or loaded.sample_inputs is not None:
        stage("traffic")
        _apply_traffic(report, loaded, traffic, resolved, options)
        if compiled and report.recompiles is not None:
            compiled_recompiles(report.recompiles)
    report.summary = summarize(report.ops, report.findings, counted, graph)
    from neuronprobe.training import phase_summaries

    report.summary.phases = phase_summaries(report.ops, report.findings)
    if training is not None and step is not None:
        _apply_training(report, training, step, options, traffic, device_graph_count(counted), observation)
    report.summary.counts = report.verdict_counts()  # the counts row, from the findings shown (issue 33)
    return report


def _anchors(loaded: LoadedModel) -> tuple[Any, ...]:
    """The entry method whose own lines the capture keeps (an entry point other than forward)."""
    from neuronprobe.loaders.entry import entry_function

    function = entry_function(loaded.module) if loaded.entry else None
    return (function,) if function is not None else ()


def _wide_input_findings(loaded: LoadedModel, calls: list[OpCall]) -> list[Finding]:
    """--stack native: an int64 example input beyond int32's range, at the first line that reads it."""
    out = []
    for name, largest, shape in wide_inputs(loaded.args, loaded.kwargs):
        call = first_reader(calls, shape)
        site = SourceLocation(relative_path(call.file), call.line) if call is not None else SourceLocation(loaded.source, None)
        message = f"the example input {name} (int64, shape {shape}) holds {largest}, beyond int32's range: TorchNeuron computes int64 as int32 on the device and it wraps"
        out.append(
            Finding.at(
                "native-int64-input", site, call.op if call is not None else "<input>", message, source_line=call.source_line if call is not None else None
            )
        )
    return out


def native_support_info(native: NativeTable, target: str, mode: str = EAGER) -> SupportTableInfo:
    """The report's table line for the native stack: which table answered, what it describes, how old it is."""
    return SupportTableInfo(
        version=native.label(),
        target=target,
        provenance=list(native.provenance),
        stack=NATIVE,
        origin=native.origin,
        age_days=native.age_days(),
        mode=mode,
    )


def _forward_where(loaded: LoadedModel) -> str:
    """``model.py:12`` for the forward's definition in a model file, else the model's source."""
    import inspect

    try:
        file = inspect.getsourcefile(type(loaded.module).forward)
        _, line = inspect.getsourcelines(type(loaded.module).forward)
    except (TypeError, OSError):
        return loaded.source
    if loaded.path is not None and file and os.path.realpath(file) == os.path.realpath(loaded.path):
        return f"{loaded.path}:{line}"
    return loaded.source


def _apply_training(
    report: Report,
    training: Any,
    step: Any,
    options: AnalyzeOptions,
    traffic: TrafficOptions,
    graphs: int,
    observation: Any = None,
) -> None:
    """The training step's own report parts: TrainInfo, measured-rule provenance, the epoch's batch shapes."""
    report.train = training.train_info(step, options.train, graphs)
    report.summary.device_graphs = max(report.summary.device_graphs, report.train.graphs_per_step)
    if observation is not None:
        training.observed_train_info(report.train, observation)
    report.support_table.provenance.extend(training.provenance())
    report.not_analysed.extend(Limitation(what="training step", why=n) for n in step.notes)
    lists = traffic.batch_sizes if not traffic.given else None
    epoch = training.epoch_batches(options.train, lists)
    if epoch is None:
        return
    section = training.epoch_recompiles(epoch[0], epoch[1], traffic.compile_seconds)
    if report.recompiles is None:
        report.recompiles = section
    else:
        report.recompiles.causes.extend(section.causes)


def _findings(classified: list[ClassifiedCall], rules: RuleSet) -> list[Finding]:
    """One finding per (verdict, rule, file:line): a float64 line with five ops is one thing to fix."""
    groups: dict[tuple[Verdict, str, str | None, int | None, Phase], list[ClassifiedCall]] = defaultdict(list)
    for c in classified:
        if not c.verdict.verdict.reported:  # lowered and decomposed calls say nothing; notes do
            continue
        groups[(c.verdict.verdict, c.verdict.rule, c.call.file, c.call.line, Phase(c.call.phase))].append(c)
    out = []
    for (verdict, rule, file, line, phase), items in groups.items():
        first = items[0]
        others = sorted({i.call.op for i in items} - {first.call.op})
        message = first.verdict.reason + (f" (also on this line: {', '.join(others)})" if others else "")
        out.append(
            Finding.at(
                rule,
                SourceLocation(relative_path(file), line),
                first.call.op,
                message,
                verdict=verdict,
                fix=first.verdict.fix,
                module=first.call.module,
                ncc_code=first.verdict.ncc_code,
                source_line=first.call.source_line,
                count=len(items),
                bytes_per_call=sum(transfer_bytes(i.call) for i in items) if verdict == Verdict.CPU_FALLBACK else 0,
                shapes=first.call.shapes(),
                phase=phase,
                registry=rules.registry,  # a user's rule id is registered in this analysis's rules only
            )
        )
        out[-1].call_chain = call_chain(first.call.chain, file, line)
    return out


def _device_move_findings(loaded: LoadedModel) -> list[Finding]:
    """Parameters and buffers the device cannot hold (a sparse layout, complex32), at their registering line, predicted."""
    from neuronprobe.backends.xla_findings import move_findings
    from neuronprobe.backends.xla_tensors import static_move_problems
    from neuronprobe.vocabulary import Origin

    return move_findings(static_move_problems(loaded.module, loaded.registered), origin=Origin.PREDICTED)


def call_chain(chain: list[tuple[str, int, str]], file: str | None, line: int | None) -> list[CallFrame]:
    """The model-code callers of ``file:line`` (its own frame, the chain's last, left out), outermost first."""
    frames = list(chain)
    if frames and file is not None and (frames[-1][0], frames[-1][1]) == (file, line):
        frames.pop()
    return [CallFrame(relative_path(f), n, name) for f, n, name in frames]


def transfer_bytes(call: OpCall) -> int:
    """Host<->device bytes for one fallback call: its inputs go down, its outputs come back."""
    return sum(t.nbytes or 0 for t in [*call.inputs, *call.outputs])


def _failure_findings(failure: CaptureFailure | None) -> list[Finding]:
    if failure is None or failure.kind == "error":
        return []
    if failure.kind == "control_flow":
        return [
            Finding.at(
                BRANCH_RULE,
                SourceLocation(relative_path(failure.file), failure.line),
                CONTROL_FLOW_OP,
                f"a Python branch on a tensor value: torch.export cannot trace it ({failure.exception}), "
                "and a Neuron trace freezes whichever branch the example input took",
                source_line=failure.source_line,
            )
        ]
    custom = failure.op is not None and failure.op != "" and not failure.op.startswith("aten::")
    if custom:
        rule, fix = (
            "custom-op",
            "register a fake kernel (@op.register_fake) so the op can be traced, and a Neuron lowering "
            "(an NKI kernel) so it runs on the device; or express it with aten ops",
        )
    else:
        rule, fix = "unsupported-op", None  # the registry's fix
    return [
        Finding.at(
            rule,
            SourceLocation(relative_path(failure.file), failure.line),
            failure.op or "<unsupported op>",
            f"capture failed on an op without a tracing (fake) kernel: {failure.message}",
            fix=fix,
            source_line=failure.source_line,
        )
    ]


def _assumed_findings(branches: list[AssumedBranch], existing: list[Finding]) -> list[Finding]:
    """A branch on a data-dependent size that the fake capture followed with an assumed size: still a branch on data."""
    seen = {(f.file, f.line, f.verdict) for f in existing}
    out: list[Finding] = []
    for b in branches:
        file = relative_path(b.file)
        if (file, b.line, Verdict.CONTROL_FLOW) in seen:
            continue
        seen.add((file, b.line, Verdict.CONTROL_FLOW))
        out.append(
            _branch_finding(
                file,
                b.line,
                b.source_line,
                message=f"a Python branch on a data-dependent size ({b.symbol}, known only from tensor data): the capture "
                f"assumed {b.size} elements and followed that branch; a Neuron trace freezes whichever branch the example input took",
                fix="keep the size static (pad to a fixed count and mask) or move the branch out of forward",
            )
        )
    return out


def _branch_finding(file: str | None, line: int | None, source_line: str | None, message: str, fix: str) -> Finding:
    """A ``control_flow`` finding of the branch rule at the user's line."""
    return Finding.at(BRANCH_RULE, SourceLocation(file, line), CONTROL_FLOW_OP, message, fix=fix, source_line=source_line)


def _graph_breaks(records: list[BreakRecord]) -> list[GraphBreak]:
    counts: Counter[tuple[str, str | None, int | None]] = Counter((b.reason, b.file, b.line) for b in records)
    lines = {(b.reason, b.file, b.line): b.source_line for b in records}
    return [GraphBreak(reason=r, file=relative_path(f), line=ln, source_line=lines[(r, f, ln)], count=n) for (r, f, ln), n in counts.items()]


def _break_findings(records: list[BreakRecord], existing: list[Finding]) -> list[Finding]:
    """Every graph break is a finding at its line: no break is silent (issue 23).

    Ops that broke the dynamo graph ran eagerly between two graphs, so they are
    in no captured graph: the finding names them and says so. Which reasons
    count as what (a data-dependent size, a host read of a value, a branch on a
    value, a sparse tensor, Python dynamo cannot follow), and the rule each
    picks, is rule data (support/data/error_patterns.json); the last pattern
    takes every break the others do not name.
    """
    from neuronprobe.support.error_patterns import OP_ATEN, load_error_patterns

    seen = {(f.file, f.line) for f in existing if f.file is not None}
    table = load_table()
    patterns = load_error_patterns()
    counts = Counter((relative_path(b.file), b.line) for b in records)
    out: list[Finding] = []
    unplaced: set[str] = set()
    for b in records:
        file = relative_path(b.file)
        if file is not None and (file, b.line) in seen:
            continue
        if file is None and b.reason in unplaced:
            continue
        matched = patterns.graph_break(b.detail or b.reason)
        if matched is None:  # only when the bundled catch-all pattern was removed
            continue
        pattern, op = matched
        count = counts[(file, b.line)] if file is not None else 1
        between = f"graph break on {pattern.cause.words}: {b.reason}"
        if pattern.rule == BRANCH_RULE:
            finding = _branch_finding(
                file,
                b.line,
                b.source_line,
                message=f"a Python branch on a tensor value breaks the graph; {between}",
                fix="make the branch a tensor op: torch.where(cond, a, b), or torch.cond",
            )
        elif pattern.rule == PYTHON_BREAK_RULE:
            finding = Finding.at(PYTHON_BREAK_RULE, SourceLocation(file, b.line), op, f"{PYTHON_BREAK_MESSAGE}; {between}", source_line=b.source_line)
        else:
            rule = rule_by_id(table, pattern.rule, op)
            named = f"aten::{op}" if pattern.op == OP_ATEN else op
            finding = Finding.at(
                rule.id,
                SourceLocation(file, b.line),
                named,
                f"{rule.message}; dynamo ran it eagerly between two graphs, so it is in no captured graph; {between}",
                verdict=rule.verdict,
                fix=rule.fix_for(op),
                ncc_code=rule.ncc_code,
                source_line=b.source_line,
            )
        finding.count = count
        out.append(finding)
        if file is None:
            unplaced.add(b.reason)
        else:
            seen.add((file, b.line))
    return out


def _inventory(classified: list[ClassifiedCall]) -> list[OpSummary]:
    groups: dict[tuple[str, Verdict, Phase], list[ClassifiedCall]] = defaultdict(list)
    for c in classified:
        groups[(c.call.op, c.verdict.verdict, Phase(c.call.phase))].append(c)
    rows = []
    for (op, verdict, phase), items in groups.items():
        shapes: list[str] = []
        for i in items:
            s = i.call.shapes()
            if s not in shapes and len(shapes) < 3:
                shapes.append(s)
        rows.append(
            OpSummary(
                op=op,
                count=len(items),
                verdict=verdict,
                rule=items[0].verdict.rule,
                reason=items[0].verdict.reason,
                dtypes=sorted({t.dtype for i in items for t in [*i.call.inputs, *i.call.outputs]}),
                example_shapes=shapes,
                modules=sorted({i.call.module for i in items if i.call.module})[:5],
                phase=phase,
            )
        )
    rows.sort(key=lambda r: (-r.verdict.rank, -r.count, r.op))
    return rows


def device_graph_count(classified: list[ClassifiedCall]) -> int:
    """Runs of device ops between graph-cutting ops, in program order (torch-xla's lazy execution)."""
    graphs, in_run = 0, False
    for c in classified:
        if c.verdict.verdict in GRAPH_CUTTING_VERDICTS:
            in_run = False
        elif not in_run:
            graphs, in_run = graphs + 1, True
    return max(graphs, 1)


def summarize(ops: list[OpSummary], findings: list[Finding], classified: list[ClassifiedCall], graph: OpGraph) -> Summary:
    counts = {v: 0 for v in Verdict}
    for row in ops:
        counts[row.verdict] += row.count
    total = sum(counts.values())
    supported = sum(counts[v] for v in SUPPORTED_VERDICTS)
    device_graphs = device_graph_count(classified)
    if graph.dynamo_graphs:
        device_graphs = max(device_graphs, graph.dynamo_graphs)
    return Summary(
        ops_total=total,
        distinct_ops=len({r.op for r in ops}),
        support_percentage=round(100.0 * supported / total, 2) if total else 100.0,
        counts=counts,
        findings_total=len(findings),
        device_graphs=device_graphs,
        fallback_bytes_per_call=sum(f.bytes_per_call for f in findings if f.verdict == Verdict.CPU_FALLBACK),
        graph_breaks=len(graph.graph_breaks),  # every recorded break, repeats included
    )


def _limitations(graph: OpGraph) -> list[Limitation]:
    out = [Limitation(what="dynamo capture", why=n) for n in graph.notes]
    incomplete = implausible(graph)
    if incomplete is not None:
        out.append(Limitation(what="capture completeness", why=incomplete))
    if graph.failure is not None:
        where = f" at {relative_path(graph.failure.file)}:{graph.failure.line}" if graph.failure.file else ""
        out.append(
            Limitation(
                what="torch.export capture",
                why=f"failed{where} ({graph.failure.exception}); ops were captured with dynamo instead, "
                "so ops that ran between dynamo graphs are only known from the graph-break reasons",
            )
        )
    return out


# --- metadata ------------------------------------------------------------------------


def _git(folder: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def git_state(folder: Path) -> tuple[str | None, bool | None]:
    commit = _git(folder, "rev-parse", "HEAD")
    if commit is None:
        return None, None
    status = _git(folder, "status", "--porcelain", "--untracked-files=no")
    return commit, bool(status) if status is not None else None


def _first_tensor(loaded: LoadedModel) -> Any:
    import torch

    for value in [*loaded.args, *loaded.kwargs.values()]:
        if isinstance(value, torch.Tensor):
            return value
    return None


def _model_dtype(loaded: LoadedModel) -> str:
    for p in loaded.module.parameters():
        return str(p.dtype).replace("torch.", "")
    return ""


def run_metadata(loaded: LoadedModel, options: AnalyzeOptions) -> RunMetadata:
    from neuronprobe.version import __version__

    commit, dirty = git_state(loaded.path.resolve().parent) if loaded.path else (None, None)
    first = _first_tensor(loaded)
    return RunMetadata(
        tool_version=__version__,
        time=_dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
        host=socket.gethostname(),
        command_line=options.command_line or " ".join(sys.argv),
        git_commit=commit,
        git_dirty=dirty,
        python=platform.python_version(),
        platform=platform.platform(),
        dtype=_model_dtype(loaded),
        batch_size=int(first.shape[0]) if first is not None and first.dim() > 0 else None,
        seq_len=int(first.shape[1]) if first is not None and first.dim() > 1 else None,
        model_source=loaded.source,
    )


# --- live backend and traffic hooks -----------------------------------------------


def _chosen_by_auto(resolved: ResolvedBackend) -> bool:
    return resolved.live is not None and resolved.live.capabilities().falls_back_to_static


def _stay_static(report: Report, reason: str, observer: str = "xla-cpu") -> ResolvedBackend:
    """``auto`` keeps the static analysis: the summary's backend line and a limitation say why."""
    from neuronprobe.backends import static_info

    table = "the native support table" if observer == "native-cpu" else "the bundled support table"
    info = static_info(f"predicted from {table}; auto: {observer} not used: {reason}")
    report.backend = info
    report.not_analysed.append(Limitation(what=f"{observer} backend (auto)", why=f"{reason}; the findings are the static table's predictions"))
    return ResolvedBackend(info)


def _observer_name(resolved: ResolvedBackend) -> str:
    return resolved.live.info().name if resolved.live is not None else "xla-cpu"


def _auto_choice(report: Report, loaded: LoadedModel, options: AnalyzeOptions, resolved: ResolvedBackend, calls: list[ClassifiedCall]) -> ResolvedBackend:
    """``auto`` with xla-cpu: observe what fits (a shrunken copy of an ``hf:`` model if need be), else stay static."""
    if not _chosen_by_auto(resolved):
        return resolved
    from neuronprobe.backends import xla_auto
    from neuronprobe.process.worker import default_max_memory

    budget = options.max_memory if options.max_memory is not None else default_max_memory()
    if _observer_name(resolved) == "native-cpu":  # the native stack's stand-in (backends/native_cpu.py)
        from neuronprobe.backends.native_cpu import choose

        native = choose(loaded, [c.call for c in calls], max_memory=budget, native_mode=options.native_mode, train=options.train is not None)
        return resolved if native.observe else _stay_static(report, native.reason, "native-cpu")
    choice = xla_auto.choose(loaded, [c.call for c in calls], max_memory=budget, train=options.train is not None)
    if not choice.observe:
        return _stay_static(report, choice.reason)
    shrink = resolved.live.capabilities().observe_shrunk if resolved.live is not None else None
    if shrink is None:  # only a backend that can build a shrunken copy is auto's to shrink
        if choice.shrink:
            return _stay_static(report, choice.reason)
    else:
        shrink(choice.shrink)
    if choice.shrink:
        report.not_analysed.append(
            Limitation(
                what="xla-cpu backend: shrunken copy",
                why=f"{choice.reason}: torch-xla observed a shrunken copy instead{f' ({choice.changes})' if choice.changes else ''}; "
                + (
                    f"its shapes, counts and bytes do not hold for the real model, nor its op kinds: it lacks the real model's {', '.join(choice.kinds_lost)}"
                    if choice.kinds_lost
                    else "its op kinds and lines hold for the real model, its shapes, counts and bytes do not"
                ),
            )
        )
    return resolved


def _apply_observation(
    report: Report,
    loaded: LoadedModel,
    options: AnalyzeOptions,
    resolved: ResolvedBackend,
    calls: list[ClassifiedCall],
    step: Any = None,
) -> Any:
    """Add the live backend's observation to the report. Under ``auto``, an observation that fails in any way
    keeps the static report with a limitation (and returns None); only an explicit backend makes it an error."""
    assert resolved.live is not None
    try:
        observation = _observe(loaded, options, resolved, calls, step)
    except Exception as exc:
        if not _chosen_by_auto(resolved):
            raise
        from neuronprobe.backends.xla_auto import observation_failed

        _stay_static(report, f"its observation failed: {observation_failed(exc)}", _observer_name(resolved))
        return None
    _place_observed(observation.findings, calls)
    report.findings.extend(observation.findings)
    report.not_analysed.extend(observation.limitations)
    report.backend = resolved.live.info()  # now with the steps that ran and analyze's own support %
    report.prediction_diff = prediction_diff(report, observation.op_verdicts)
    refine = resolved.live.capabilities().refine_diff  # a backend that can also match by line (xla-cpu)
    if refine is not None:
        refine(report, observation, calls)
    from neuronprobe.backends.xla_diff import count_uncaptured

    count_uncaptured(report, calls)  # an observed problem the capture never saw is a disagreement too
    report.findings = merge_origins(report.findings, calls)  # after the diff, which compares the two origins
    return observation


def _observe(loaded: LoadedModel, options: AnalyzeOptions, resolved: ResolvedBackend, calls: list[ClassifiedCall], step: Any) -> Any:
    assert resolved.live is not None
    if options.train is not None:
        from neuronprobe import training

        observation = training.observe_training(resolved.live, loaded, options.train, options.target, options.timeout, options.op_timeout)
        training.place_observed(observation, calls, step.host_reads if step is not None else [])
        return observation
    return resolved.live.observe(loaded, options.target, timeout=options.timeout, op_timeout=options.op_timeout)


def _op_base(op: str) -> str:
    """``aten::softmax.int`` -> ``aten::softmax``: the SDK names ops without their overload."""
    return op.split(".", 1)[0]


def _place_observed(findings: list[Finding], calls: list[ClassifiedCall]) -> None:
    """Observed findings the SDK could not place (fallback counters, compile errors) get the captured op's line:
    of the same op, else the one captured line whose op decomposes into it (``max_pool2d`` for
    ``max_pool2d_with_indices``; see :mod:`neuronprobe.backends.xla_diff`)."""
    from neuronprobe.backends.xla_diff import kin_table, op_family

    first: dict[str, OpCall] = {}
    kins = kin_table([c.call for c in calls])
    by_kin: dict[str, dict[tuple[str, int | None], OpCall]] = {}
    for c in calls:
        if c.call.file:
            first.setdefault(c.call.op, c.call)
            first.setdefault(_op_base(c.call.op), c.call)
            for family in kins.get(c.call.op, ()):
                by_kin.setdefault(family, {}).setdefault((c.call.file, c.call.line), c.call)
    for f in findings:
        places = by_kin.get(op_family(f.op), {})
        call = first.get(f.op) or first.get(_op_base(f.op)) or (next(iter(places.values())) if len(places) == 1 else None)
        if call is None:
            continue
        if f.line is None:
            f.file, f.line = relative_path(call.file), call.line
        if f.module is None:
            f.module = call.module
        if f.source_line is None and (f.file, f.line) == (relative_path(call.file), call.line):
            f.source_line = call.source_line


def merge_origins(findings: list[Finding], calls: list[ClassifiedCall]) -> list[Finding]:
    """One finding per (line, problem): an observed problem absorbs the predicted problem it confirms or corrects.

    A predicted and an observed problem at the same file:line and phase are the same problem when the
    observed op is the predicted op's kin (its own family or one it decomposes into: ``aten::nonzero``
    under a boolean-mask ``aten::index.Tensor``), or when each is the only problem of its origin on
    that line. The observed verdict wins (the device's own counters outrank the table); the merged
    finding lists both origins, keeps the prediction's fix (written for the construct the user wrote,
    where an observed fix knows only the op) and says in its message what was predicted when that differs.
    """
    from neuronprobe.backends.xla_diff import kin, kin_table, op_family

    kins = kin_table([c.call for c in calls])
    predicted: dict[tuple[str | None, int | None, Phase], list[Finding]] = defaultdict(list)
    observed: dict[tuple[str | None, int | None, Phase], list[Finding]] = defaultdict(list)
    for f in findings:
        if f.verdict.is_problem and f.line is not None:
            (observed if f.origin is Origin.OBSERVED else predicted)[(f.file, f.line, f.phase)].append(f)
    absorbed: set[int] = set()
    for key, seen in observed.items():
        guesses = predicted.get(key, [])
        for o in seen:
            open_guesses = [p for p in guesses if id(p) not in absorbed]
            match = [p for p in open_guesses if op_family(o.op) in kin(p.op, kins) or op_family(p.op) == op_family(o.op)]
            if not match and len(seen) == 1 and len(open_guesses) == 1:
                match = open_guesses
            for p in match:
                _absorb(o, p)
                absorbed.add(id(p))
    return [f for f in findings if id(f) not in absorbed]


def _absorb(observed: Finding, guess: Finding) -> None:
    """Fold the predicted finding ``guess`` into ``observed`` (whose verdict wins)."""
    if guess.verdict is not observed.verdict or guess.op != observed.op:
        observed.message += f" (predicted: {guess.verdict} for {guess.op}: {guess.message})"
    observed.origins = [o for o in Origin if o in {*observed.origins, *guess.origins}]
    observed.fix = guess.fix or observed.fix
    observed.count = max(observed.count, guess.count)
    observed.bytes_per_call = max(observed.bytes_per_call, guess.bytes_per_call)
    observed.ncc_code = observed.ncc_code or guess.ncc_code
    observed.source_line = observed.source_line or guess.source_line
    observed.module = observed.module or guess.module
    observed.shapes = observed.shapes or guess.shapes
    observed.call_chain = observed.call_chain or guess.call_chain
    observed.confirmation = observed.confirmation or guess.confirmation


def prediction_diff(report: Report, observed: dict[str, str]) -> PredictionDiff:
    """Ops the table called fine that the SDK rejected, and the reverse.

    The SDK names ops without overloads (``aten::softmax``) where the capture has
    them (``aten::softmax.int``): an observed name matches its exact op, else
    every overload of it, taking the most severe prediction.
    """
    predicted: dict[str, Verdict] = {}
    for row in report.ops:
        for key in {row.op, _op_base(row.op)}:
            worst = predicted.get(key)
            if worst is None or row.verdict.rank > worst.rank:
                predicted[key] = row.verdict
    where: dict[str, tuple[str | None, int | None]] = {}
    detail: dict[str, str] = {}
    for f in report.findings:
        for key in (f.op, _op_base(f.op)):
            if f.origin == "predicted" or key not in where or where[key][0] is None:
                where[key] = (f.file, f.line)
            if f.origin == "observed":
                detail.setdefault(key, f.message)
    diff = PredictionDiff()
    for op, seen in sorted(observed.items()):
        guess = predicted.get(op) or predicted.get(_op_base(op))
        if guess is None:
            continue
        seen_verdict = Verdict(seen)
        ok_guess, ok_seen = guess in SUPPORTED_VERDICTS, seen_verdict in SUPPORTED_VERDICTS
        file, line = where.get(op) or where.get(_op_base(op)) or (None, None)
        note = detail.get(op) or detail.get(_op_base(op)) or ""
        if ok_guess and not ok_seen:
            diff.predicted_ok_observed_failing.append(PredictionMismatch(op, guess, seen_verdict, file, line, note))
        elif not ok_guess and ok_seen:
            diff.predicted_failing_observed_ok.append(PredictionMismatch(op, guess, seen_verdict, file, line, note))
    return diff


def _apply_traffic(report: Report, loaded: LoadedModel, traffic: TrafficOptions, resolved: ResolvedBackend, options: AnalyzeOptions) -> None:
    from neuronprobe.recompiles import analyze_traffic

    # The live backend (a Neuron host) counts real compiles when it declares count_compiles (Capabilities).
    result = analyze_traffic(loaded, traffic, live=resolved.live, timeout=options.timeout)
    report.recompiles = result.recompiles
    if result.buckets is not None:
        report.buckets = result.buckets
    report.not_analysed.extend(result.limitations)


__all__ = ["AnalyzeOptions", "InputError", "TrafficOptions", "analyze_module", "analyze_spec"]
