"""Recompile detection: how many graphs a traffic stream compiles into, and why each one.

On Neuron every new input-shape signature is a new compile (minutes each), and
code that loops or branches over a size compiles a different graph per length
however it is padded. :func:`analyze_traffic` answers both in advance:

* :mod:`.traffic` reads the stream (``--shapes`` JSON Lines, ``--lengths`` with the
  model's ``make_inputs``, or ``sample_inputs()``) into distinct signatures;
* :mod:`.predict` counts graphs per policy (static, dynamic_batch, bucketed) for the
  whole stream without compiling, and where each is first needed;
* :mod:`.evidence` compiles the distinct shapes with dynamo on CPU and records each
  recompile's guard failure, a hash of each graph, and the source line of every
  guard that makes the graph itself change with the shape;
* on a Neuron host, a live backend that declares ``count_compiles`` in its
  :class:`~neuronprobe.backends.Capabilities` counts real compiles.

Pure: it returns a :class:`TrafficResult` and never prints, exits or writes.
"""

from __future__ import annotations

import inspect
import math
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from neuronprobe.defaults import DEFAULT_TIMEOUT_S, MIN_MAX_BUCKETS, MIN_MAX_COMPILES
from neuronprobe.errors import InputError
from neuronprobe.limits import check_batch_sizes, check_lengths
from neuronprobe.recompiles.predict import DEFAULT_COMPILE_SECONDS, POLICIES, Prediction, predict
from neuronprobe.recompiles.traffic import (
    Const,
    Key,
    TensorTemplate,
    Traffic,
    meta_signature,
    read_shapes,
    signature_text,
    templates_of,
    traffic_from_lengths,
    traffic_from_samples,
)
from neuronprobe.report.model import BucketProposal, Limitation, ObservedCompiles, RecompileCause, RecompileSection
from neuronprobe.usercode import is_library

if TYPE_CHECKING:
    from neuronprobe.backends import LiveBackend

DEFAULT_BATCH_SIZES: tuple[int, ...] = (1,)


@dataclass
class TrafficResult:
    recompiles: RecompileSection
    buckets: BucketProposal | None = None
    limitations: list[Limitation] = field(default_factory=list)


# --- options and traffic -----------------------------------------------------------------------


def check_options(options: Any, loaded: Any) -> None:
    """Every unusable combination of traffic options, as one sentence each (exit 2)."""
    if options.shapes is not None and options.lengths is not None:
        raise InputError("give either --shapes or --lengths, not both")
    if options.lengths is None:
        for flag, value in (("--batch-sizes", options.batch_sizes), ("--column", options.column), ("--field", options.field)):
            if value:
                raise InputError(f"{flag} applies to --lengths; give --lengths FILE too")
    for b in options.batch_sizes or ():
        if isinstance(b, bool) or not isinstance(b, int) or b < 1:
            raise InputError(f"--batch-sizes: {b!r} is not a batch size; use positive whole numbers, e.g. 1,4,8")
    check_batch_sizes(options.batch_sizes)
    if options.batch_sizes and len(set(options.batch_sizes)) != len(options.batch_sizes):
        raise InputError(f"--batch-sizes {','.join(map(str, options.batch_sizes))}: a batch size is repeated")
    if options.max_compiles < MIN_MAX_COMPILES:
        raise InputError(f"--max-compiles {options.max_compiles}: use {MIN_MAX_COMPILES} (no CPU evidence) or more")
    if options.max_buckets < MIN_MAX_BUCKETS:
        raise InputError(f"--max-buckets {options.max_buckets}: use a whole number >= {MIN_MAX_BUCKETS}")
    cs = options.compile_seconds
    if cs is not None and (not math.isfinite(cs) or cs < 0):
        raise InputError(f"--compile-seconds {cs}: use a number of seconds >= 0")
    if options.buckets:
        from neuronprobe.shape_buckets.runtime import check_edges

        check_edges(options.buckets)
    if options.lengths is not None and loaded.make_inputs is None:
        raise InputError(
            f"{loaded.source}: --lengths needs make_inputs(batch_size, seq_len) in the model file to build inputs of each length; define it, or give --shapes"
        )


def load_traffic(loaded: Any, options: Any) -> Traffic:
    """The stream from --shapes, --lengths (with make_inputs) or the model's sample_inputs()."""
    if options.shapes is not None:
        return read_shapes(options.shapes)
    if options.lengths is not None:
        from neuronprobe.shape_buckets import read_lengths

        data = read_lengths(options.lengths, column=options.column, field=options.field)
        check_lengths(data.lengths, options.lengths, loaded.module, loaded.source)
        batch_sizes = list(options.batch_sizes or DEFAULT_BATCH_SIZES)
        source = data.source + (f" column {data.column}" if data.column else "")
        if options.batch_sizes:
            source += f" x batch sizes {','.join(map(str, batch_sizes))}"
        return traffic_from_lengths(data.lengths, batch_sizes, meta_signature(loaded.make_inputs, loaded.source), source)
    if loaded.sample_inputs is not None:
        return traffic_from_samples(loaded.sample_inputs, loaded.source)
    raise InputError("no traffic: give --shapes or --lengths, or define sample_inputs() in the model file")


def forward_params(module: Any) -> list[str]:
    """The forward's parameter names, in order (what dynamo's guards call the inputs)."""
    try:
        sig = inspect.signature(module.forward)
    except (TypeError, ValueError):
        return []
    return [
        p.name
        for p in sig.parameters.values()
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    ]


def forward_location(module: Any) -> tuple[str | None, int | None, str | None]:
    """Where the model's forward is defined: where a plain shape change points."""
    try:
        file = inspect.getsourcefile(type(module).forward)
        lines, start = inspect.getsourcelines(type(module).forward)
    except (TypeError, OSError):
        return None, None, None
    if not file or is_library(file):
        return None, None, None
    text = next((ln.strip() for ln in lines if ln.strip().startswith("def ")), lines[0].strip() if lines else None)
    offset = next((i for i, ln in enumerate(lines) if ln.strip().startswith("def ")), 0)
    rel = os.path.relpath(file)
    return (file if rel.startswith("..") else rel), start + offset, text


def input_names(traffic: Traffic, loaded: Any) -> tuple[dict[Key, str], dict[Key, TensorTemplate]]:
    """Display names (positional index -> parameter name) and tensor templates, checked against the model.

    A traffic input the model's example inputs do not have is an InputError naming the
    file and line where it first appears: its dtype would be a guess.
    """
    params = forward_params(loaded.module)
    names: dict[Key, str] = {}
    templates = templates_of(loaded.args, loaded.kwargs)
    for i in range(len(loaded.args)):
        if i < len(params) and i in templates:
            templates.setdefault(params[i], templates[i])
    templates.update(traffic.templates)
    checked: set[Key] = set()
    for index, sig in enumerate(traffic.signatures):
        for key, entry in sig:
            if key in checked:
                continue
            checked.add(key)
            names[key] = params[key] if isinstance(key, int) and key < len(params) else str(key)
            if isinstance(entry, Const) or key in templates:
                continue
            where = traffic.where(index)
            if isinstance(key, int):
                raise InputError(
                    f"{where}: {len(sig)} positional inputs, but the model's example inputs have "
                    f"{len(loaded.args)} positional tensor(s); give one shape per positional input"
                )
            known = sorted(str(k) for k in templates if isinstance(k, str))
            raise InputError(
                f"{where}: input {key!r} is not one of the model's example inputs ({', '.join(known) or 'none by name'}); "
                "name each input as get_example_inputs() does"
            )
    return names, templates


# --- the whole analysis ---------------------------------------------------------------------------


def _seconds_per_graph(options: Any, live: ObservedCompiles | None) -> tuple[float, str]:
    if options.compile_seconds is not None:
        return float(options.compile_seconds), "--compile-seconds"
    if live is not None and live.seconds > 0 and live.compiles > 0:
        return live.seconds / live.compiles, "measured by the live backend"
    return DEFAULT_COMPILE_SECONDS, "an estimate; give --compile-seconds"


def _merge_observed(causes: list[RecompileCause], counts: dict[tuple[str, int], tuple[int, str]], ran: bool) -> None:
    """Put dynamo's own guard-failure counts on the predicted shape causes they confirm."""
    if not ran:
        return
    for c in causes:
        if c.kind == "shape" and c.dim is not None and c.input is not None:
            c.observed = counts.get((c.input, c.dim), (0, ""))[0]


def call_inputs(args: tuple[Any, ...], kwargs: dict[str, Any], params: list[str]) -> tuple[Any, ...] | dict[str, Any]:
    """One call's inputs in get_example_inputs() form: a tuple, a dict, or (both given) all by name."""
    if not kwargs:
        return tuple(args)
    if not args:
        return dict(kwargs)
    return {**{params[i]: a for i, a in enumerate(args)}, **kwargs}


def _run_live(live: LiveBackend | None, loaded: Any, inputs: list[Any], timeout: float) -> tuple[ObservedCompiles | None, list[Limitation]]:
    if live is None:
        return None, []
    count = live.capabilities().count_compiles
    if count is None:
        return None, [Limitation("recompiles on Neuron", f"the {live.info().name} backend declares no count_compiles; the counts are from dynamo on CPU")]
    try:
        observed = count(loaded, inputs, timeout=timeout)
    except Exception as exc:  # the hardware run is evidence, not a precondition
        return None, [Limitation("recompiles on Neuron", f"counting compiles failed: {type(exc).__name__}: {exc}")]
    if observed.matches_static is None:
        ran = observed.shapes_run or len(inputs)
        observed.matches_static = observed.compiles == ran
    return observed, []


def analyze_traffic(loaded: Any, options: Any, *, live: LiveBackend | None = None, timeout: float = DEFAULT_TIMEOUT_S) -> TrafficResult:
    """Predict graphs per policy for the traffic, and prove the causes on CPU (and on Neuron when live)."""
    check_options(options, loaded)
    traffic = load_traffic(loaded, options)
    names, templates = input_names(traffic, loaded)
    where = forward_location(loaded.module)
    limitations = [Limitation("traffic", n) for n in traffic.notes]

    prediction: Prediction = predict(
        traffic,
        buckets=options.buckets,
        max_buckets=options.max_buckets,
        seconds_per_graph=options.compile_seconds if options.compile_seconds is not None else DEFAULT_COMPILE_SECONDS,
        names=names,
        where=where,
    )

    from neuronprobe.recompiles.evidence import RunShape, build_inputs, choose_shapes, collect_evidence, shape_reason_counts

    chosen = choose_shapes(traffic, options.max_compiles)
    shapes = []
    for i in chosen:
        args, kwargs = build_inputs(traffic, i, templates, loaded.make_inputs, loaded.source)
        shapes.append(RunShape(i, traffic.signatures[i], args, kwargs, signature_text(traffic.signatures[i], names)))

    # The live count goes first: its SDK worker is a forked child, and a child forked after
    # this process ran OpenMP-parallel CPU ops (the sweep below runs real forwards) can hang.
    params = forward_params(loaded.module)
    calls = [call_inputs(s.args, s.kwargs, params) for s in shapes]
    live_observed, live_limits = _run_live(live, loaded, calls, timeout)
    limitations.extend(live_limits)

    cpu: ObservedCompiles | None = None
    causes = list(prediction.causes)
    if shapes:
        evidence, sweep_result = collect_evidence(
            loaded.module,
            traffic,
            shapes,
            names,
            max_compiles=options.max_compiles,
            model_path=str(loaded.path) if loaded.path else None,
            on_meta=loaded.on_meta,
            where=where,
        )
        cpu = evidence.observed
        limitations.extend(evidence.limitations)
        _merge_observed(causes, shape_reason_counts(sweep_result)[0], ran=bool(sweep_result.shapes))
        # Where the graph itself changes first (buckets only bound those), then shapes, then other guards.
        changing = [c for c in evidence.causes if c.kind != "guard"]
        causes = changing + causes + [c for c in evidence.causes if c.kind == "guard"]
    elif options.max_compiles == 0:
        limitations.append(Limitation("recompile evidence", "--max-compiles 0: nothing was compiled on CPU; the counts are predictions"))

    per_graph, seconds_source = _seconds_per_graph(options, live_observed)
    for p in prediction.policies.values():
        p.compile_seconds = round(p.graphs * per_graph, 3)

    section = RecompileSection(
        calls=traffic.calls,
        distinct_signatures=len(traffic.signatures),
        predicted={name: prediction.policies[name] for name in POLICIES},
        observed=live_observed if live_observed is not None else cpu,
        causes=causes,
        buckets=list(prediction.edges),
        compile_seconds_per_graph=round(per_graph, 3),
        source=traffic.source,
        compile_seconds_source=seconds_source,
        cpu_evidence=cpu if live_observed is not None else None,
    )
    return TrafficResult(section, prediction.proposal, limitations)


__all__ = [
    "DEFAULT_COMPILE_SECONDS",
    "POLICIES",
    "TrafficResult",
    "analyze_traffic",
    "predict",
    "read_shapes",
]
