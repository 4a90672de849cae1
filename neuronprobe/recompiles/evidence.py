"""Evidence on CPU: compile the model with dynamo over the traffic's distinct shapes.

Two runs, both with a recording backend that compiles nothing:

1. **The sweep**: ``torch.compile(backend=recorder, dynamic=False)``, the way
   torch-xla and ``torch_neuronx.trace`` compile (one graph per static shape),
   with ``recompile_limit`` raised above the number of shapes: dynamo's default
   of 8 silently falls back to eager after the 8th compile. Each call that makes
   dynamo compile is a *compile event*; its guard-failure reasons (from
   ``torch._dynamo.guard_failures``, e.g. ``tensor 'x' size mismatch at index 1.
   expected 8, actual 16``) say why, and a hash of the captured graph's op
   sequence (shapes and constants ignored) says whether the *same* graph was
   traced again at a new shape (buckets fix it) or a *different* one (a Python
   loop or branch over a size: buckets only bound it).
2. **The probe**: a few of the same shapes under ``dynamic=True`` with duck
   shaping off. Sizes become symbols, and every place that turns a size into a
   Python decision leaves a guard in dynamo's ShapeEnv with its source line:
   ``Eq(s0, 8)`` at ``for i in range(x.shape[1])`` (the size is specialised),
   ``s0 <= 64`` at ``if x.shape[1] > 64`` (a branch). Evaluating those guards over
   *every* signature of the traffic finds the causes even for shapes the sweep
   did not compile.

Each run compiles in isolation and cleans up after itself
(:mod:`neuronprobe._torch.dynamo_isolation`): there is no ``torch._dynamo.reset()``,
so a notebook user's compiled functions keep their caches, and the guard
failures and counters the runs add are taken back out. A torch internal the runs
need and this torch lacks becomes a limitation naming what is degraded.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import os
import re
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from neuronprobe._torch import MissingInternal, dynamo_config, dynamo_counters, dynamo_guards, filenames, shape_env
from neuronprobe._torch.dynamo_isolation import compile_isolated, isolated_compiles
from neuronprobe.capture.graph import quiet_torch, relative_path, source_line, user_frame_from_stack
from neuronprobe.recompiles.traffic import Const, Key, Signature, TensorTemplate, Traffic
from neuronprobe.report.model import Limitation, ObservedCompiles, RecompileCause
from neuronprobe.usercode import is_library
from neuronprobe.vocabulary import CauseKind

GRAPH_HASH_CHARS = 12
# The probe compiles this many shapes with symbolic sizes: enough to see each side
# of a branch the sweep already told apart, few enough to stay cheap.
PROBE_SHAPES = 3
# Guards are evaluated on at most this many distinct size tuples of the traffic.
MAX_GUARD_ROWS = 20_000
# Headroom over the number of shapes for dynamo's per-frame and total recompile limits.
RECOMPILE_HEADROOM = 8

_REASON_PREFIX = re.compile(r"^\s*\d+/(?P<entry>\d+):\s*")
_EXPECTED = re.compile(r"\.?\s*expected -?\d+, actual -?\d+\.?")
_SIZE_MISMATCH = re.compile(r"tensor '(?P<source>.+?)' size mismatch at index (?P<dim>\d+)")
_SUBSCRIPT = re.compile(r"\['([^']+)'\]")
_SIZE_SOURCE = re.compile(r"^L\['(?P<name>[^']+)'\]\.size\(\)\[(?P<dim>\d+)\]$")
_USER_LOC = re.compile(r"^(?P<file>.+):(?P<line>\d+) in (?P<func>\S+)$")


@dataclass
class RunShape:
    """One distinct signature of the traffic, with inputs to call the model with."""

    sig_index: int
    signature: Signature
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    label: str


@dataclass
class CompileEvent:
    """A call that made dynamo compile: what it compiled and why."""

    shape: int  # index into the shapes run
    graph_hash: str
    graphs: int  # graphs compiled for this call (more than 1 with graph breaks)
    # (cache entry, normalised reason) of each guard failure; entry 0 is the frame's first graph
    reasons: list[tuple[int, str]] = field(default_factory=list)
    lines: Counter[tuple[str, int]] = field(default_factory=Counter)  # ops per user line


@dataclass
class GuardRecord:
    """A shape guard dynamo added while tracing with symbolic sizes."""

    expr: Any  # sympy expression
    user_loc: str | None
    sources: dict[Any, list[str]]  # symbol -> source names, e.g. "L['x'].size()[1]"


@dataclass
class Sweep:
    shapes: list[RunShape]  # the shapes that ran (failed ones are left out)
    events: list[CompileEvent]
    failures: list[tuple[RunShape, BaseException]]
    files: set[str] = field(default_factory=set)  # source files seen in graph stack traces
    missing: list[MissingInternal] = field(default_factory=list)  # torch internals this torch lacks


@dataclass
class Evidence:
    observed: ObservedCompiles
    causes: list[RecompileCause]
    limitations: list[Limitation]
    shapes: list[RunShape]


# --- choosing and building the shapes ---------------------------------------------------------------


def _size(sig: Signature) -> int:
    return sum(int(np.prod(e)) if e else 1 for _, e in sig if not isinstance(e, Const))


def choose_shapes(traffic: Traffic, max_compiles: int) -> list[int]:
    """Signature indices to compile, in first-seen order: all, or an even spread by size.

    The spread keeps the smallest and the largest shape, so a branch over a size
    threshold is usually seen on both sides.
    """
    n = len(traffic.signatures)
    if max_compiles <= 0:
        return []
    if n <= max_compiles:
        return list(range(n))
    by_size = sorted(range(n), key=lambda i: (_size(traffic.signatures[i]), i))
    picks = {by_size[round(x)] for x in np.linspace(0, n - 1, max_compiles)}
    return sorted(picks)


def build_inputs(
    traffic: Traffic, sig_index: int, templates: dict[Key, TensorTemplate], make_inputs: Any, where: str
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Inputs with the signature's shapes: the model's make_inputs for --lengths, else templates."""
    from neuronprobe.errors import ModelLoadError
    from neuronprobe.loaders.resolve import split_inputs

    if traffic.pairs is not None and make_inputs is not None:
        b, length = traffic.pairs[sig_index]
        try:
            inputs = make_inputs(b, length)
        except Exception as exc:
            raise ModelLoadError(f"{where}: make_inputs({b}, {length}) raised {type(exc).__name__}: {exc}") from exc
        return split_inputs(inputs, f"{where}: make_inputs({b}, {length})")
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for key, entry in traffic.signatures[sig_index]:
        value = entry.value if isinstance(entry, Const) else templates[key].make(entry)
        if isinstance(key, int):
            args.append(value)
        else:
            kwargs[key] = value
    return tuple(args), kwargs


# --- graph hashing --------------------------------------------------------------------------------


def _target_name(node: Any) -> str:
    target = node.target
    if isinstance(target, str):
        return target
    module = getattr(target, "__module__", None) or ""
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or str(target)
    return f"{module}.{name}" if module else str(name)


def graph_ops(gm: Any) -> list[str]:
    """The op sequence of an FX graph: what it computes, without shapes or constants."""
    return [f"{n.op}:{_target_name(n)}" for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")]


def graph_hash(graphs: Sequence[Any]) -> str:
    digest = hashlib.sha1()
    for gm in graphs:
        digest.update("\n".join(graph_ops(gm)).encode())
        digest.update(b"\n--\n")
    return digest.hexdigest()[:GRAPH_HASH_CHARS]


def _user_lines(graphs: Sequence[Any], files: set[str]) -> Counter[tuple[str, int]]:
    lines: Counter[tuple[str, int]] = Counter()
    for gm in graphs:
        for n in gm.graph.nodes:
            if n.op not in ("call_function", "call_method", "call_module"):
                continue
            stack = n.meta.get("stack_trace")
            file, line, _ = user_frame_from_stack(stack)
            if file and line:
                lines[(file, line)] += 1
                files.add(file)
    return lines


def normalise_reason(text: str) -> tuple[int, str]:
    """``0/1: tensor 'x' size mismatch at index 1. expected 8, actual 16`` -> ``(1, "tensor 'x' size mismatch at index 1")``.

    The number after the slash is the cache entry the call was checked against.
    """
    first = text.strip().splitlines()[0] if text.strip() else text
    m = _REASON_PREFIX.match(first)
    entry = int(m.group("entry")) if m else 0
    return entry, _EXPECTED.sub("", _REASON_PREFIX.sub("", first)).strip()


def size_mismatch(reason: str) -> tuple[str, int] | None:
    """(input name, dim) of a size-mismatch guard failure; ``inputs['input_ids']`` names ``input_ids``."""
    m = _SIZE_MISMATCH.search(reason)
    if not m:
        return None
    source = m.group("source")
    keys = _SUBSCRIPT.findall(source)
    return (keys[-1] if keys else source), int(m.group("dim"))


# --- running dynamo ---------------------------------------------------------------------------------


@contextlib.contextmanager
def _kept_state(missing: list[MissingInternal]) -> Iterator[None]:
    """The runs' compiles in isolation; dynamo's guard failures and counters as they were, afterwards."""
    try:
        failures: dynamo_guards.Counts | None = dynamo_guards.counts()
    except MissingInternal as exc:
        missing.append(exc)
        failures = None
    try:
        counters: dynamo_counters.Snapshot | None = dynamo_counters.snapshot()
    except MissingInternal:  # capture names it; here it only means nothing to restore
        counters = None
    try:
        with isolated_compiles():
            yield
    finally:
        if failures is not None:
            dynamo_guards.restore(failures)
        if counters is not None:
            dynamo_counters.restore(counters)


def _limits(n: int, missing: list[MissingInternal]) -> contextlib.AbstractContextManager[None]:
    """Dynamo's recompile limits above ``n`` (the default 8 falls back to eager silently)."""
    try:
        dynamo_config.require()
    except MissingInternal as exc:
        missing.append(exc)
        return contextlib.nullcontext()
    return dynamo_config.raised_recompile_limits(n + RECOMPILE_HEADROOM)


def _new_reasons(before: dynamo_guards.Counts | None) -> list[str]:
    return dynamo_guards.since(before) if before is not None else []


def _mark(missing: list[MissingInternal]) -> dynamo_guards.Counts | None:
    try:
        return dynamo_guards.counts()
    except MissingInternal as exc:
        if not any(m.internal == exc.internal for m in missing):
            missing.append(exc)
        return None


def sweep(module: Any, shapes: Sequence[RunShape]) -> Sweep:
    """Compile ``module`` with dynamic=False over ``shapes`` in order; one event per call that compiled."""
    import torch

    graphs: list[Any] = []

    def recorder(gm: Any, example_inputs: Any) -> Any:
        graphs.append(gm)
        return gm.forward

    result = Sweep(shapes=[], events=[], failures=[])
    with _kept_state(result.missing), quiet_torch(), _limits(len(shapes), result.missing), torch.no_grad():
        compiled = compile_isolated(module, recorder, dynamic=False)
        for shape in shapes:
            before, failures = len(graphs), _mark(result.missing)
            try:
                compiled(*shape.args, **shape.kwargs)
            except Exception as exc:  # a shape the model cannot take is reported, not fatal
                result.failures.append((shape, exc))
                continue
            result.shapes.append(shape)
            new = graphs[before:]
            if not new:
                continue
            reasons = list(dict.fromkeys(normalise_reason(r) for r in _new_reasons(failures)))
            result.events.append(
                CompileEvent(
                    shape=len(result.shapes) - 1,
                    graph_hash=graph_hash(new),
                    graphs=len(new),
                    reasons=reasons,
                    lines=_user_lines(new, result.files),
                )
            )
    return result


def probe(module: Any, shapes: Sequence[RunShape], missing: list[MissingInternal] | None = None) -> tuple[list[GuardRecord], list[str]]:
    """Compile a few shapes with symbolic sizes and collect the shape guards with their source lines.

    A ShapeEnv internal this torch lacks goes to ``missing`` (the caller's limitation), not into silence.
    """
    import torch

    records: list[GuardRecord] = []
    errors: list[str] = []
    lacking: list[MissingInternal] = [] if missing is None else missing

    def recorder(gm: Any, example_inputs: Any) -> Any:
        try:
            guards = shape_env.current_guards()
        except MissingInternal as exc:
            if not lacking:
                lacking.append(exc)
            return gm.forward
        records.extend(GuardRecord(g.expr, g.user_loc, g.sources) for g in guards)
        return gm.forward

    symbols: contextlib.AbstractContextManager[Any]
    try:
        symbols = shape_env.distinct_symbols()
    except MissingInternal as exc:
        lacking.append(exc)
        symbols = contextlib.nullcontext()
    with _kept_state(lacking), quiet_torch(), _limits(len(shapes), lacking), symbols, torch.no_grad():
        compiled = compile_isolated(module, recorder, dynamic=True)
        for shape in shapes:
            try:
                compiled(*shape.args, **shape.kwargs)
            except Exception as exc:
                errors.append(f"{shape.label}: {type(exc).__name__}: {_first_line(exc)}")
    return records, errors


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


# --- from guards to causes ------------------------------------------------------------------------------


def resolve_file(short: str, candidates: Sequence[str]) -> str:
    """Dynamo prints paths shortened against torch's folder; find the real file among ``candidates``."""
    if os.path.isabs(short) and os.path.exists(short):
        return short
    for pool in (candidates, [getattr(m, "__file__", None) for m in list(sys.modules.values())]):
        for c in pool:
            if not c:
                continue
            if c == short or c.endswith(os.sep + short) or _shortened(c) == short:
                return c
    return short


def _shortened(path: str) -> str | None:
    """Torch's own shortening of ``path``; None without it (the doctor names the degradation)."""
    try:
        return filenames.shorten_filename(path)
    except MissingInternal:
        return None


def parse_user_loc(text: str | None, candidates: Sequence[str]) -> tuple[str | None, int | None, str | None]:
    """``code  # short/path.py:12 in forward`` -> (file, line, code)."""
    if not text:
        return None, None, None
    code, sep, tail = text.rpartition("  # ")
    m = _USER_LOC.match(tail.strip())
    if not sep or not m:
        return None, None, None
    file = resolve_file(m.group("file"), candidates)
    line = int(m.group("line"))
    return file, line, (code.strip() or source_line(file, line))


@dataclass
class _GuardCause:
    kind: str  # "specialization" | "branch"
    dims: list[tuple[str, int]]  # (parameter, dim)
    expr: Any
    symbols: list[Any]
    file: str | None
    line: int | None
    code: str | None
    outcomes: dict[tuple[int, ...], Any]  # size tuple -> outcome (the value, or the branch taken)


def _is_specialization(expr: Any) -> bool:
    import sympy

    if not isinstance(expr, sympy.Eq):
        return False
    sides = (expr.lhs, expr.rhs)
    return any(isinstance(s, sympy.Symbol) for s in sides) and any(s.is_number for s in sides)


def _evaluate(expr: Any, symbols: Sequence[Any], row: Sequence[int]) -> bool | None:
    import sympy

    try:
        value = expr.xreplace({s: sympy.Integer(int(v)) for s, v in zip(symbols, row, strict=False)})
    except Exception:
        return None
    if value in (sympy.true, True):
        return True
    if value in (sympy.false, False):
        return False
    return None


class SizeTable:
    """Sizes of (parameter, dim) over the traffic's distinct signatures; -1 where absent."""

    def __init__(self, traffic: Traffic, params: dict[Key, str]) -> None:
        self._traffic = traffic
        self._params = params
        self._cache: dict[tuple[str, int], np.ndarray] = {}

    def column(self, param: str, dim: int) -> np.ndarray:
        key = (param, dim)
        if key not in self._cache:
            out = np.full(len(self._traffic.signatures), -1, dtype=np.int64)
            for i, sig in enumerate(self._traffic.signatures):
                for k, entry in sig:
                    if self._params.get(k, str(k)) == param and not isinstance(entry, Const) and len(entry) > dim:
                        out[i] = entry[dim]
            self._cache[key] = out
        return self._cache[key]


def guard_causes(records: Sequence[GuardRecord], sizes: SizeTable, candidates: Sequence[str]) -> list[_GuardCause]:
    """The guards that split this traffic: a specialised size that varies, or a branch both sides of which occur."""
    out: dict[tuple[Any, ...], _GuardCause] = {}
    for rec in records:
        expr = rec.expr
        symbols = sorted(getattr(expr, "free_symbols", ()), key=str)
        dims: list[tuple[str, int]] = []
        for sym in symbols:
            match = next((m for m in (_SIZE_SOURCE.match(s) for s in rec.sources.get(sym, [])) if m), None)
            if match is None:
                break
            dims.append((match.group("name"), int(match.group("dim"))))
        if not symbols or len(dims) != len(symbols):
            continue
        matrix = np.stack([sizes.column(p, d) for p, d in dims], axis=1)
        matrix = matrix[(matrix >= 0).all(axis=1)]
        if matrix.size == 0:
            continue
        rows = np.unique(matrix, axis=0)
        if rows.shape[0] < 2:
            continue  # the sizes it guards never change in this traffic
        file, line, code = parse_user_loc(rec.user_loc, candidates)
        if _is_specialization(expr) and len(symbols) == 1:
            kind = "specialization"
            outcomes: dict[tuple[int, ...], Any] = {tuple(int(v) for v in r): int(r[0]) for r in rows}
        else:
            kind = "branch"
            outcomes = {}
            for r in rows[:MAX_GUARD_ROWS]:
                result = _evaluate(expr, symbols, r)
                if result is None:
                    outcomes = {}
                    break
                outcomes[tuple(int(v) for v in r)] = result
            if len(set(outcomes.values())) < 2:
                continue  # every call of this traffic takes the same side
        key = (file, line, kind, tuple(dims)) if file else (str(expr), kind, tuple(dims))
        if key not in out:
            out[key] = _GuardCause(kind, dims, expr, symbols, file, line, code, outcomes)
        else:
            out[key].outcomes.update(outcomes)
    return list(out.values())


def _event_sizes(shape: RunShape, dims: Sequence[tuple[str, int]], params: dict[Key, str]) -> tuple[int, ...] | None:
    values = []
    for param, dim in dims:
        entry = next((e for k, e in shape.signature if params.get(k, str(k)) == param), None)
        if entry is None or isinstance(entry, Const) or len(entry) <= dim:
            return None
        values.append(int(entry[dim]))
    return tuple(values)


def _graph_changes(cause: _GuardCause, result: Sweep, params: dict[Key, str]) -> bool | None:
    """True/False when compiled shapes on different sides of the guard had different/equal graphs; None if untested."""
    groups: dict[Any, set[str]] = {}
    for event in result.events:
        sizes = _event_sizes(result.shapes[event.shape], cause.dims, params)
        if sizes is None:
            continue
        outcome = cause.outcomes.get(sizes)
        if outcome is None:
            outcome = sizes[0] if cause.kind == "specialization" else _evaluate(cause.expr, cause.symbols, sizes)
        if outcome is not None:
            groups.setdefault(outcome, set()).add(event.graph_hash)
    if len(groups) < 2:
        return None
    hashes = list(groups.values())
    return any(a != b for a in hashes for b in hashes)


def _pretty(expr: Any, cause: _GuardCause) -> str:
    import sympy

    names = {s: sympy.Symbol(f"{p}.shape[{d}]") for s, (p, d) in zip(cause.symbols, cause.dims, strict=False)}
    return str(expr.xreplace(names))


def _cause_from_guard(cause: _GuardCause, changes: bool | None) -> RecompileCause:
    param, dim = cause.dims[0]
    size = f"{param}.shape[{dim}]"
    n = len(cause.outcomes)
    unconfirmed = " (not confirmed by a compiled graph: the shapes compiled did not cover two sides)" if changes is None else ""
    if cause.kind == "specialization":
        if changes is False:
            reason = f"{size} is read as a Python number here: each of its {n} sizes bakes a different constant into the same ops"
            fix = "buckets fix it: the graph's ops do not change with the size"
        else:
            reason = f"{size} is specialised here (a Python loop or number over a size): each of its {n} sizes traces a different graph{unconfirmed}"
            fix = (
                "use tensor ops over the whole sequence (a fixed maximum length with a mask, cumsum, a scan) "
                "instead of a Python loop over the size: buckets only bound the graph count, every bucket still "
                "compiles a different (longer) graph, and the loop also runs over the padding"
            )
        count = max(n - 1, 0)
    else:
        sides = Counter(cause.outcomes.values())
        guard = _pretty(cause.expr, cause)
        reason = f"Python branch on {size}: the traffic has {sides[True]} size(s) where {guard} holds and {sides[False]} where it does not{unconfirmed}"
        if changes is False:
            reason += "; both sides trace the same ops"
        fix = (
            "compute both paths and select with torch.where, or decide outside forward; with buckets the padded "
            "length decides the branch, so put the threshold on a bucket edge"
        )
        count = max(len(sides) - 1, 0)
    return RecompileCause(
        reason=reason,
        count=count,
        file=cause.file,
        line=cause.line,
        graph_changes_with_shape=changes is not False,
        source_line=cause.code,
        kind=CauseKind(cause.kind),
        input=param,
        dim=dim,
        fix=fix,
    )


def _diff_cause(result: Sweep) -> RecompileCause | None:
    """When graphs differ but no guard explains it: the user lines whose op counts differ between graphs."""
    hashes = list(dict.fromkeys(e.graph_hash for e in result.events))
    if len(hashes) < 2:
        return None
    first = result.events[0]
    other = next(e for e in result.events if e.graph_hash != first.graph_hash)
    changed = sorted(
        (k for k in set(first.lines) | set(other.lines) if first.lines[k] != other.lines[k]),
        key=lambda k: (-abs(first.lines[k] - other.lines[k]), k),
    )
    file, line = changed[0] if changed else (None, None)
    return RecompileCause(
        reason=f"the captured graph changes with the input shape: {len(hashes)} different graphs over {len(result.shapes)} shapes compiled",
        count=len(hashes) - 1,
        file=file,
        line=line,
        graph_changes_with_shape=True,
        source_line=source_line(file, line),
        kind=CauseKind.GRAPH_CHANGE,
        fix="find the Python code that depends on the size at this line and express it with tensor ops",
    )


# --- the whole evidence step ---------------------------------------------------------------------------


def candidate_files(module: Any, model_path: str | None, extra: set[str]) -> list[str]:
    files: list[str] = []
    if model_path:
        files.append(os.path.abspath(model_path))
    for m in module.modules():
        try:
            f = inspect.getsourcefile(type(m))
        except (TypeError, OSError):
            f = None
        if f and f not in files:
            files.append(f)
    files.extend(sorted(extra - set(files)))
    return files


def _probe_shapes(result: Sweep) -> list[RunShape]:
    """First shape, the first of each other graph, then the largest: at most PROBE_SHAPES."""
    picks: list[int] = []
    seen: set[str] = set()
    for e in result.events:
        if e.graph_hash not in seen:
            seen.add(e.graph_hash)
            picks.append(e.shape)
    if result.shapes:
        picks.append(max(range(len(result.shapes)), key=lambda i: _size(result.shapes[i].signature)))
    if not picks and result.shapes:
        picks.append(0)
    return [result.shapes[i] for i in list(dict.fromkeys(picks))[:PROBE_SHAPES]]


def observed_from(result: Sweep, distinct: int, max_compiles: int, on_meta: bool) -> ObservedCompiles:
    hashes = [e.graph_hash for e in result.events]
    ran = len(result.shapes)
    notes = []
    if ran < distinct:
        notes.append(f"compiled {ran} of {distinct} distinct shapes (--max-compiles {max_compiles})")
    distinct_graphs = len(set(hashes))
    if distinct_graphs > 1:
        notes.append(f"{distinct_graphs} different graphs: the graph itself changes with the shape")
    elif hashes:
        notes.append("every compile traced the same graph at a new shape")
    most = max((e.graphs for e in result.events), default=1)
    if most > 1:
        notes.append(f"graph breaks split the forward into up to {most} graphs per compile")
    matches: bool | None = len(result.events) == ran if ran else None
    if not ran:
        notes.append("no shape ran under dynamo (see the limitations)")
    elif not matches:
        notes.append(
            f"dynamo compiled {len(result.events)} times for {ran} distinct shapes: some shapes reused a graph, "
            "because dynamo does not guard the sizes in which they differ (e.g. an unused input); "
            "a static Neuron trace keys on every input shape"
        )
    if on_meta:
        notes.append("traced on the meta device (no weights): shapes and guards do not depend on values")
    return ObservedCompiles(
        compiles=len(result.events),
        graph_hashes=hashes,
        source="dynamo-cpu",
        shapes_run=ran,
        matches_static=matches,
        note="; ".join(notes),
        compiled_shapes=[result.shapes[e.shape].label for e in result.events],
    )


def shape_reason_counts(result: Sweep) -> tuple[dict[tuple[str, int], tuple[int, str]], dict[str, int]]:
    """Recompiles per guard that failed against the first graph: by (input, dim) for sizes, by text otherwise.

    Only failures against cache entry 0 count, so that a recompile is attributed the
    way the prediction attributes it (what changed since the first call), once.
    """
    sizes: dict[tuple[str, int], tuple[int, str]] = {}
    other: dict[str, int] = {}
    for e in result.events:
        for reason in dict.fromkeys(r for entry, r in e.reasons if entry == 0):
            key = size_mismatch(reason)
            if key is not None:
                n, _ = sizes.get(key, (0, reason))
                sizes[key] = (n + 1, reason)
            else:
                other[reason] = other.get(reason, 0) + 1
    return sizes, other


def collect_evidence(
    module: Any,
    traffic: Traffic,
    shapes: Sequence[RunShape],
    params: dict[Key, str],
    *,
    max_compiles: int,
    model_path: str | None,
    on_meta: bool,
    where: tuple[str | None, int | None, str | None],
) -> tuple[Evidence, Sweep]:
    """Sweep, probe, and turn both into an ObservedCompiles and the causes they prove."""
    limitations: list[Limitation] = []
    result = sweep(module, shapes)
    missing = list(result.missing)
    for shape, exc in result.failures:
        limitations.append(
            Limitation(
                "recompile evidence",
                f"{shape.label}: the forward raised {type(exc).__name__} under dynamo ({_first_line(exc)}); this shape is left out of the CPU evidence",
            )
        )
    observed = observed_from(result, len(traffic.signatures), max_compiles, on_meta)
    candidates = candidate_files(module, model_path, result.files)
    causes: list[RecompileCause] = []
    if result.shapes:
        records, errors = probe(module, _probe_shapes(result), missing)
        if errors:
            limitations.append(
                Limitation(
                    "recompile causes",
                    "the symbolic-size probe failed on "
                    + "; ".join(errors[:2])
                    + ": places where the graph changes with the shape come from the graphs' stack traces only",
                )
            )
        sizes = SizeTable(traffic, params)
        for gc in guard_causes(records, sizes, candidates):
            causes.append(_cause_from_guard(gc, _graph_changes(gc, result, params)))
        if not any(c.graph_changes_with_shape for c in causes):
            diff = _diff_cause(result)
            if diff is not None:
                causes.append(diff)
    for exc in {m.internal: m for m in missing}.values():
        limitations.append(Limitation("recompile evidence", str(exc)))
    file, line, code = where
    _, other = shape_reason_counts(result)
    for reason, n in other.items():
        causes.append(
            RecompileCause(
                reason=reason,
                count=n,
                file=file,
                line=line,
                source_line=code,
                kind=CauseKind.GUARD,
                observed=n,
                fix="see the guard: dynamo recompiled because this changed between calls",
            )
        )
    for c in causes:
        if c.file and not is_library(c.file):
            c.file = relative_path(c.file)
    return Evidence(observed, causes, limitations, list(result.shapes)), result
