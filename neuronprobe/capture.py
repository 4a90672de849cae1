"""Capture: run the model through torch's own tracers and return an :class:`OpGraph`.

Primary path: non-strict ``torch.export`` (fast, and every node carries its
``stack_trace`` and ``nn_module_stack``). When export fails (a Python branch on
tensor data, an op without a fake kernel), the failure itself becomes a
:class:`CaptureFailure` at the user's line, and dynamo with a recording
``aot_autograd`` backend captures what it can, graph breaks included. Graph
breaks are read from dynamo's ``graph_breaks`` log records, not from
``explain().graph_break_count`` (which is ``graph_count - 1`` on torch 2.13).

A good guest in the user's process: the dynamo capture compiles in isolation
(:mod:`neuronprobe._torch.dynamo_isolation`: no ``torch._dynamo.reset()``, so the
user's compiled functions keep their caches), reads graph breaks without
changing torch's log settings, and puts dynamo's counters back. Every private
torch internal is reached through :mod:`neuronprobe._torch`.
"""

from __future__ import annotations

import contextlib
import io
import linecache
import logging
import os
import re
import time
import traceback
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from neuronprobe._torch import MissingInternal, dispatcher, pytree
from neuronprobe._torch.dispatch_mode import dispatch_mode_base
from neuronprobe.defaults import DEFAULT_OP_BUDGET, OP_BUDGET_ENV
from neuronprobe.errors import InputError
from neuronprobe.usercode import is_library, is_neuronprobe

_FRAME = re.compile(r'File "(?P<file>.+?)", line (?P<line>\d+), in (?P<func>\S+)\n(?P<code>[^\n]*)')
# torch 2.13 logs each break as "Graph break [(user stack suppressed ...)] in user code at FILE:LINE",
# "Graph Break Reason: ...", then per break its gb_type line (torch/_dynamo/graph_break_registry.json)
# with "Explanation:", "Hint:" and "Developer debug context:" lines; a break met while handling
# another follows "*** While handling this graph break, another graph break occurred: ***".
_GRAPH_BREAK = re.compile(r"Graph break (?:\([^)\n]*\) )?in user code at (?P<file>.+?):(?P<line>\d+)\s*\n?.*?Graph Break Reason: (?P<reason>[^\n]+)", re.S)
_EXPLANATION = "  Explanation: "
_CONTEXT = "  Developer debug context: "

# Nodes that are bookkeeping of the tracer, not work that reaches the device.
_SKIP_TARGET_PREFIXES = ("<built-in function", "<function sym_")

MAX_EXAMPLE_SHAPES = 3


@dataclass
class TensorMeta:
    shape: list[int | str]
    dtype: str
    layout: str = "strided"

    @property
    def nbytes(self) -> int | None:
        """Bytes of a dense tensor of this shape, or None when a size is symbolic."""
        sizes = [s for s in self.shape if isinstance(s, int)]
        if len(sizes) != len(self.shape):
            return None
        n = 1
        for s in sizes:
            n *= s
        return n * _itemsize(self.dtype)

    def __str__(self) -> str:
        return f"{self.dtype}[{', '.join(str(s) for s in self.shape)}]"


def _itemsize(dtype: str) -> int:
    import torch

    try:
        return getattr(torch, dtype).itemsize
    except AttributeError:
        return 4


@dataclass
class OpCall:
    """One aten op call of the captured forward."""

    index: int
    namespace: str
    name: str
    overload: str
    inputs: list[TensorMeta] = field(default_factory=list)
    outputs: list[TensorMeta] = field(default_factory=list)
    constants: dict[str, Any] = field(default_factory=dict)  # non-tensor arguments by schema name
    arg_tensors: dict[str, list[TensorMeta]] = field(default_factory=dict)  # tensor arguments by schema name
    tags: list[str] = field(default_factory=list)
    module: str | None = None
    module_type: str | None = None
    file: str | None = None
    line: int | None = None
    source_line: str | None = None
    data_dependent_output: bool = False  # output size holds an unbacked symbol (u0)
    has_composite_implicit: bool = False
    # For a CompositeImplicitAutograd op: the aten ops it decomposes into (None: not inspected).
    parts: list[OpCall] | None = None
    has_composite_explicit: bool = False
    phase: str = "forward"  # training step: forward | backward | optimizer (see training.py)
    # For each tensor input, in order: the index of the call whose output it is (None: a graph input,
    # a parameter, a constant, or an op the capture does not record). Dataflow for rules that follow values.
    sources: list[int | None] = field(default_factory=list)

    @property
    def key(self) -> str:
        """The support-table key: ``name`` for the default overload, else ``name.overload``."""
        return self.name if self.overload == "default" else f"{self.name}.{self.overload}"

    @property
    def op(self) -> str:
        """The dispatcher name, e.g. ``aten::index_put_`` or ``aten::add.Tensor``."""
        return f"{self.namespace}::{self.key}"

    def shapes(self) -> str:
        ins = ", ".join(str(t) for t in self.inputs)
        outs = ", ".join(str(t) for t in self.outputs)
        return f"({ins}) -> ({outs})"


@dataclass
class CaptureFailure:
    """Why the primary capture failed, placed at the user's line."""

    kind: str  # "control_flow" | "unsupported_op" | "error"
    message: str
    exception: str
    file: str | None = None
    line: int | None = None
    source_line: str | None = None
    op: str | None = None


@dataclass
class BreakRecord:
    reason: str
    file: str | None = None
    line: int | None = None
    source_line: str | None = None
    # dynamo's own words for what broke (gb_type, explanation, debug context; every break met at this
    # point, the first one first): what the error patterns classify. Empty for a count without a log line.
    detail: str = ""


@dataclass
class OpGraph:
    calls: list[OpCall]
    method: str
    seconds: float = 0.0
    failure: CaptureFailure | None = None
    graph_breaks: list[BreakRecord] = field(default_factory=list)
    dynamo_graphs: int = 0
    notes: list[str] = field(default_factory=list)
    output_tensors: int | None = None  # tensors the forward returns; None when unknown
    # Why dynamo stopped partway through the forward (``GuardOnDataDependentSymNode: u1``), or None when it ran
    # the forward to its end: such a capture holds only the ops before the stop (also one of ``notes``, in words).
    stopped: str | None = None
    assumed: list[AssumedBranch] = field(default_factory=list)  # branches on data-dependent sizes, followed with an assumed size


@dataclass
class AssumedBranch:
    """A branch on a data-dependent size that the fake capture followed with an assumed size, at the user's line."""

    symbol: str
    size: int
    file: str | None = None
    line: int | None = None
    source_line: str | None = None


# --- frames -----------------------------------------------------------------------


def user_frame_from_stack(stack_trace: str | None) -> tuple[str | None, int | None, str | None]:
    """Innermost frame of a recorded stack trace that is the user's code."""
    if not stack_trace:
        return None, None, None
    found: tuple[str | None, int | None, str | None] = (None, None, None)
    for m in _FRAME.finditer(stack_trace):
        file = m.group("file")
        if not is_library(file):
            found = (file, int(m.group("line")), m.group("code").strip() or None)
    if found[0] is not None and not found[2]:
        found = (found[0], found[1], source_line(found[0], found[1]))
    return found


def _model_frame_from_stack(stack: traceback.StackSummary) -> tuple[str | None, int | None, str | None]:
    """The innermost frame of the model's own code that led to this point, walking out from the innermost.

    Reaching neuronprobe first means no model code asked (torch checking its own
    trace afterwards): there is no line to give, and (None, None, None) says so.
    """
    for fr in reversed(stack):
        if is_neuronprobe(fr.filename):
            break
        if not is_library(fr.filename):
            return fr.filename, fr.lineno, (fr.line or "").strip() or None
    return None, None, None


def user_frame_from_traceback(exc: BaseException) -> tuple[str | None, int | None, str | None]:
    found: tuple[str | None, int | None, str | None] = (None, None, None)
    for fr in traceback.extract_tb(exc.__traceback__):
        if not is_library(fr.filename):
            found = (fr.filename, fr.lineno, (fr.line or "").strip() or None)
    return found


def relative_path(path: str | None) -> str | None:
    """A path relative to the working folder when it lies inside it: reports stay portable across checkouts."""
    if not path or path.startswith("<"):
        return path
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def source_line(file: str | None, line: int | None) -> str | None:
    if not file or not line:
        return None
    text = linecache.getline(file, line).strip()
    return text or None


# --- export path -----------------------------------------------------------------------


def _tensor_metas(value: Any) -> list[TensorMeta]:
    import torch

    out: list[TensorMeta] = []
    if isinstance(value, torch.Tensor):
        shape: list[int | str] = []
        for s in value.shape:
            try:
                shape.append(int(s))
            except Exception:  # symbolic size
                shape.append(str(s))
        layout = str(value.layout).replace("torch.", "")
        out.append(TensorMeta(shape=shape, dtype=str(value.dtype).replace("torch.", ""), layout=layout))
    elif isinstance(value, (list, tuple)):
        for v in value:
            out.extend(_tensor_metas(v))
    return out


_UNBACKED = re.compile(r"\bu\d+\b")


def _unbacked_symbols(value: Any) -> set[str]:
    """Unbacked symbols (u0, u1, ...) in a value's sizes: sizes only known from tensor data."""
    import torch

    if isinstance(value, torch.Tensor):
        return {m for s in value.shape if not isinstance(s, int) for m in _UNBACKED.findall(str(s))}
    if isinstance(value, (list, tuple)):
        return set().union(*(_unbacked_symbols(v) for v in value)) if value else set()
    if isinstance(value, torch.SymInt):
        return set(_UNBACKED.findall(str(value)))
    return set()


def _arg_value(arg: Any) -> Any:
    import torch.fx

    if isinstance(arg, torch.fx.Node):
        return arg.meta.get("val")
    if isinstance(arg, (list, tuple)):
        return type(arg)(_arg_value(a) for a in arg)
    return arg


def _is_constant(value: Any) -> bool:
    """Plain values a rule can test; lists of them too (``dilation=[2, 2]``, ``output_size``)."""
    if isinstance(value, (list, tuple)):
        return all(_is_constant(v) for v in value)
    return value is None or isinstance(value, (bool, int, float, str))


_DYNAMO_SELF = re.compile(r"^L\['self'\]\.?|^L__self___?")
_DYNAMO_INDEX = re.compile(r"\[(\d+)\]|\['([^'\]]+)'\]")


def module_path(path: str) -> str:
    """Dynamo spells module paths ``L['self'].layers[0]``; export spells them ``layers.0``: use export's."""
    path = _DYNAMO_SELF.sub("", path)
    path = _DYNAMO_INDEX.sub(lambda m: "." + (m.group(1) or m.group(2)), path)
    return path.lstrip(".")


def _module_of(node: Any, strip_prefix: str) -> tuple[str | None, str | None]:
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return None, None
    path, mtype = list(stack.values())[-1]
    if isinstance(mtype, type):
        mtype = f"{mtype.__module__}.{mtype.__qualname__}"
    path = module_path(str(path))
    if strip_prefix and path.startswith(strip_prefix):
        path = path[len(strip_prefix) :]
    return path or None, str(mtype) if mtype else None


def calls_from_graph(graph: Any, strip_module_prefix: str = "") -> list[OpCall]:
    """Walk an FX graph's call_function nodes into OpCalls (aten and custom ops)."""

    calls: list[OpCall] = []
    parts_by_op: dict[str, list[OpCall] | None] = {}
    produced_by: dict[Any, int] = {}  # fx node -> index of the call whose output it is (getitem: its op's)
    for node in graph.nodes:
        if node.op == "call_function" and node.args and node.args[0] in produced_by and not dispatcher.is_op_overload(node.target):
            produced_by[node] = produced_by[node.args[0]]  # operator.getitem of a multi-output op
        if node.op != "call_function" or not dispatcher.is_op_overload(node.target):
            continue
        call = _bare_call(node.target, len(calls))
        produced_by[node] = call.index
        input_symbols: set[str] = set()
        for i, arg in enumerate(node.target._schema.arguments):
            if i < len(node.args):
                value = _arg_value(node.args[i])
            elif arg.name in node.kwargs:
                value = _arg_value(node.kwargs[arg.name])
            else:
                continue
            metas = _tensor_metas(value)
            input_symbols |= _unbacked_symbols(value)
            if metas:
                call.inputs.extend(metas)
                call.arg_tensors[arg.name] = metas
                call.sources.extend(_producers(node.args[i] if i < len(node.args) else node.kwargs[arg.name], produced_by, len(metas)))
            elif _is_constant(value):
                call.constants[arg.name] = value
        val = node.meta.get("val")
        call.outputs = _tensor_metas(val)
        # Only the op that creates a data-dependent size is its source; ops downstream merely carry it.
        call.data_dependent_output = bool(_unbacked_symbols(val) - input_symbols)
        call.file, call.line, call.source_line = user_frame_from_stack(node.meta.get("stack_trace"))
        call.module, call.module_type = _module_of(node, strip_module_prefix)
        if call.has_composite_implicit or call.has_composite_explicit:
            # Parts carry arguments, so the same op with other arguments is replayed again.
            replay_key = f"{call.op}|{call.constants}|{[str(m) for m in call.inputs]}"
            if replay_key not in parts_by_op:
                parts_by_op[replay_key] = composite_parts(node, explicit=not call.has_composite_implicit)
            call.parts = parts_by_op[replay_key]
        calls.append(call)
    return calls


def _producers(arg: Any, produced_by: dict[Any, int], count: int) -> list[int | None]:
    """The producing call of each tensor in one argument (a node, or a list of them), ``count`` entries."""
    nodes = list(arg) if isinstance(arg, (list, tuple)) else [arg]
    found = [produced_by.get(n) if not isinstance(n, (list, tuple)) else None for n in nodes]
    return found if len(found) == count else [None] * count


def _to_meta(value: Any) -> Any:
    """A captured argument as a meta tensor of the same shape and dtype (no data, no memory)."""
    import torch

    if isinstance(value, torch.Tensor):
        shape = [int(s) for s in value.shape]  # raises on symbolic sizes: the caller gives up
        return torch.empty(shape, dtype=value.dtype, device="meta")
    if isinstance(value, (list, tuple)):
        return type(value)(_to_meta(v) for v in value)
    if isinstance(value, torch.SymInt):
        return int(value)
    return value


SMALL_REPLAY_NUMEL = 1 << 16  # elements: a retry on real CPU tensors stays cheap


def _to_small_cpu(value: Any) -> Any:
    """A meta tensor as a zero-filled CPU tensor, or ValueError when it is too large to allocate casually."""
    import torch

    if isinstance(value, torch.Tensor):
        if value.numel() > SMALL_REPLAY_NUMEL:
            raise ValueError("too large to replay on CPU")
        return torch.zeros(value.shape, dtype=value.dtype)
    if isinstance(value, (list, tuple)):
        return type(value)(_to_small_cpu(v) for v in value)
    return value


def composite_parts(node: Any, explicit: bool = False) -> list[OpCall] | None:
    """Run a composite op once on meta tensors and record the aten ops it becomes.

    The decomposition happens in the dispatcher above Python dispatch modes, so
    a recording mode sees exactly the parts a backend would be asked to lower.
    Returns None when the op cannot be replayed (symbolic sizes, odd arguments).
    """
    try:
        args = [_to_meta(_arg_value(a)) for a in node.args]
        kwargs = {k: _to_meta(_arg_value(v)) for k, v in node.kwargs.items()}
    except Exception:
        return None
    return replay_parts(node.target, args, kwargs, explicit)


def replay_parts(target: Any, args: Any, kwargs: dict[str, Any], explicit: bool = False) -> list[OpCall] | None:
    """The aten ops one composite op calls, recorded while it runs (on meta tensors when it can).

    ``explicit``: call the op's CompositeExplicitAutograd kernel directly. A
    backend without its own kernel (torch-xla) runs that kernel, so the ops it
    calls (often the op's out= form, or ``.item()``) are what gets lowered. A
    replay stopped by a value read on meta tensors keeps what it saw up to the
    read: the read is the finding.
    """
    import torch

    seen: list[Any] = []

    class Record(dispatch_mode_base()):  # type: ignore[misc]
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            seen.append(func)
            first = dispatcher.is_op_overload(func) and func not in described
            if first:  # described before it runs: a value read on meta tensors raises
                described[func] = describe_call(func, args, kwargs or {}, None, len(described))
            out = func(*args, **(kwargs or {}))
            if first:
                described[func].outputs = _tensor_metas(out)
            return out

    described: dict[Any, OpCall] = {}

    def run(args: Any, kwargs: dict[str, Any]) -> bool:
        seen.clear()
        described.clear()
        try:
            with quiet_torch(), Record():
                if explicit:
                    dispatcher.call_composite_explicit(target, *args, **kwargs)
                else:
                    target(*args, **kwargs)
        except Exception:
            return bool(seen and seen[-1] is torch.ops.aten._local_scalar_dense.default)
        return True

    if not run(args, kwargs):
        # Some kernels mix devices (a CPU scalar with a meta tensor) or have no meta
        # support: small arguments are replayed once more as zero-filled CPU tensors.
        try:
            small_args = [_to_small_cpu(a) for a in args]
            small_kwargs = {k: _to_small_cpu(v) for k, v in kwargs.items()}
        except ValueError:
            return None
        if not run(small_args, small_kwargs):
            return None
    # One part per op, with the arguments of its first call: the rules read them.
    return [described[func] for func in dict.fromkeys(seen) if func in described]


def describe_call(func: Any, args: Any, kwargs: dict[str, Any], out: Any, index: int) -> OpCall:
    """An OpCall for one dispatched call: tensor arguments and plain values by schema name, outputs."""
    call = _bare_call(func, index)
    for i, arg in enumerate(func._schema.arguments):
        if i < len(args):
            value = args[i]
        elif arg.name in kwargs:
            value = kwargs[arg.name]
        else:
            continue
        metas = _tensor_metas(value)
        if metas:
            call.inputs.extend(metas)
            call.arg_tensors[arg.name] = metas
        elif _is_constant(value):
            call.constants[arg.name] = value
    call.outputs = _tensor_metas(out)
    return call


def _bare_call(func: Any, index: int) -> OpCall:
    """An OpCall for an OpOverload: its name, overload, tags and which composite kernels it has."""
    namespace, _, name = func._schema.name.partition("::")
    overload = func._schema.overload_name or "default"
    qual = func._schema.name if overload == "default" else f"{func._schema.name}.{overload}"
    return OpCall(
        index=index,
        namespace=namespace,
        name=name,
        overload=overload,
        tags=sorted(str(t).replace("Tag.", "") for t in getattr(func, "tags", ())),
        has_composite_implicit=_has_kernel(qual, dispatcher.COMPOSITE_IMPLICIT),
        # Not CompositeExplicitAutogradNonFunctional: the dispatcher never uses those
        # kernels for XLA (a functional backend), so they are no decomposition there.
        has_composite_explicit=_has_kernel(qual, dispatcher.COMPOSITE_EXPLICIT),
    )


def _has_kernel(qualname: str, key: str) -> bool:
    """Without the dispatcher query no op is known to decompose: ``neuronprobe doctor`` names that degradation."""
    try:
        return dispatcher.has_kernel(qualname, key)
    except MissingInternal:
        return False


def _drop(record: logging.LogRecord) -> bool:
    return False


@contextlib.contextmanager
def quiet_torch() -> Iterator[None]:
    """Failed exports print partial graph code, warnings and log lines: keep them off the user's console.

    Everything is scoped to the block and put back on the way out, exceptions
    included: ``sys.stdout``/``sys.stderr`` (swapped, not the file descriptors),
    the warning filters, and the drop filter on torch's log handlers. Handlers
    added inside the block (the graph-break recorder) are not filtered.
    """
    sink = io.StringIO()
    loggers = [
        logger
        for name, logger in list(logging.Logger.manager.loggerDict.items())
        if (name == "torch" or name.startswith("torch.")) and isinstance(logger, logging.Logger)
    ]
    handlers = [h for logger in loggers for h in logger.handlers]
    for h in handlers:
        h.addFilter(_drop)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stderr(sink), contextlib.redirect_stdout(sink):
            warnings.simplefilter("ignore")
            yield
    finally:
        for h in handlers:
            h.removeFilter(_drop)


def _classify_failure(exc: BaseException) -> CaptureFailure:
    from neuronprobe._torch.check import MissingInternal
    from neuronprobe._torch.symbolic_shapes import data_dependent_error

    file, line, code = user_frame_from_traceback(exc)
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    name = type(exc).__name__
    full = str(exc)
    try:
        on_data = isinstance(exc, data_dependent_error())
    except MissingInternal:  # the message patterns below still class it (doctor names the degraded check)
        on_data = False
    if on_data:
        return CaptureFailure("control_flow", text, name, file, line, code)
    from neuronprobe.support.error_patterns import load_error_patterns

    # torch's wording picks the rest: the patterns are rule data (support/data/error_patterns.json).
    matched = load_error_patterns().export_failure(full, name)
    if matched is not None:
        pattern, op = matched
        return CaptureFailure(pattern.kind, text, name, file, line, code, op if pattern.kind == "unsupported_op" else None)
    return CaptureFailure("error", text, name, file, line, code)


def capture_export(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any], strip_module_prefix: str = "") -> OpGraph:
    import torch

    start = time.perf_counter()
    with quiet_torch():
        ep = torch.export.export(module, args, kwargs, strict=False)
    calls = calls_from_graph(ep.graph, strip_module_prefix)
    graph = OpGraph(calls=calls, method="export", seconds=time.perf_counter() - start)
    graph.output_tensors = _exported_output_tensors(ep)
    return graph


def _exported_output_tensors(ep: Any) -> int:
    """How many tensors the exported forward returns (None, a string or a number is no tensor)."""
    import torch

    outputs = [n for n in ep.graph.nodes if n.op == "output"]
    leaves = pytree.tree_leaves(outputs[0].args) if outputs else []
    return sum(isinstance(getattr(v, "meta", {}).get("val"), torch.Tensor) for v in leaves)


def _count_tensors(value: Any) -> int:
    import torch

    return sum(isinstance(v, torch.Tensor) for v in pytree.tree_leaves(value))


# --- dynamo path --------------------------------------------------------------------------


def _parse_breaks(messages: list[str]) -> list[BreakRecord]:
    """One record per logged break (repeats included), at its line, with dynamo's gb_type as the reason.

    The "Graph Break Reason" line is often only "Failed to handle graph break
    gracefully..."; the gb_type and explanation under it say what broke
    ("Dynamic shape operator: Operator `aten.nonzero.default`'s output shape
    depends on input Tensor data."), so they become the reason when present.
    """
    out: list[BreakRecord] = []
    for msg in messages:
        m = _GRAPH_BREAK.search(msg)
        if not m:
            continue
        file, line = m.group("file"), int(m.group("line"))
        entries = _break_entries(msg[m.end() :].split("\nUser code traceback:", 1)[0])
        reason = _break_reason(entries[0]) if entries else m.group("reason").strip()
        detail = "\n".join(" | ".join(part for part in entry if part) for entry in entries) or m.group("reason").strip()
        out.append(BreakRecord(reason=reason, file=file, line=line, source_line=source_line(file, line), detail=detail))
    return out


BREAK_REASON_CHARS = 300


def _break_reason(entry: tuple[str, str, str]) -> str:
    """``gb_type: explanation (context)``: what broke, with the exception or op dynamo names."""
    kind, explanation, context = entry
    text = f"{kind}: {explanation}" + (f" ({context})" if context and context not in explanation else "")
    return text if len(text) <= BREAK_REASON_CHARS else text[: BREAK_REASON_CHARS - 3] + "..."


def _break_entries(body: str) -> list[tuple[str, str, str]]:
    """(gb_type, explanation, developer context) of each break described in one log message, in order."""
    lines = body.splitlines()
    entries: list[list[str]] = []
    for i, text in enumerate(lines):
        if text.startswith(_EXPLANATION) and i > 0 and lines[i - 1].strip() and not lines[i - 1].startswith(" "):
            entries.append([lines[i - 1].strip(), text[len(_EXPLANATION) :].strip(), ""])
        elif text.startswith(_CONTEXT) and entries and not entries[-1][2]:
            entries[-1][2] = text[len(_CONTEXT) :].strip()
    return [(kind, explanation, context) for kind, explanation, context in entries]


def _graph_break_log(notes: list[str]) -> contextlib.AbstractContextManager[list[str]]:
    """Records of dynamo's ``graph_breaks`` artifact; without its loggers, an empty list and a note."""
    from neuronprobe._torch import logs

    try:
        logs.artifact_loggers(logs.GRAPH_BREAKS)
    except MissingInternal as exc:
        notes.append(str(exc))
        return contextlib.nullcontext([])
    return logs.recorded_artifact(logs.GRAPH_BREAKS)


@contextlib.contextmanager
def _dynamo_counters_kept(notes: list[str]) -> Iterator[list[str]]:
    """Yield a list that receives the graph-break reasons counted inside; dynamo's counters and guard failures are put back."""
    from neuronprobe._torch import dynamo_counters, dynamo_guards

    reasons: list[str] = []
    try:
        counters = dynamo_counters.snapshot()
    except MissingInternal as exc:
        notes.append(str(exc))
        counters = None
    try:
        failures = dynamo_guards.counts()
    except MissingInternal:  # only restored here; the recompile sweep is what reports it missing
        failures = None
    try:
        yield reasons
    finally:
        if counters is not None:
            reasons.extend(dynamo_counters.new_graph_break_reasons(counters))
            dynamo_counters.restore(counters)
        if failures is not None:
            dynamo_guards.restore(failures)


def capture_dynamo(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any], strip_module_prefix: str = "") -> OpGraph:
    """Compile with a recording aot_autograd backend, fullgraph off; collect aten graphs and breaks.

    The compile is isolated from the user's own compiled functions and cleaned up
    after (see :mod:`neuronprobe._torch.dynamo_isolation`).
    """
    import torch

    from neuronprobe._torch import aot
    from neuronprobe._torch.dynamo_isolation import compile_isolated, isolated_compiles

    graphs: list[Any] = []

    def record(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        graphs.append(gm)
        return gm.forward

    start = time.perf_counter()
    notes: list[str] = []
    output_tensors: int | None = None
    stopped: str | None = None
    messages: list[str] = []
    with _dynamo_counters_kept(notes) as counted:
        try:
            backend = aot.aot_backend(record)
            with quiet_torch(), _graph_break_log(notes) as messages, isolated_compiles(), torch.no_grad():
                compiled = compile_isolated(module, backend, dynamic=False)
                output_tensors = _count_tensors(compiled(*args, **kwargs))
        except MissingInternal as exc:
            notes.append(str(exc))
        except Exception as exc:
            stopped = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            notes.append(f"dynamo capture stopped: {stopped}")
    breaks = _parse_breaks(messages)
    # Breaks at the very start of a frame (sparse tensors, unique) leave no log
    # line with a location; the counters still have their reasons.
    logged = {b.reason for b in breaks}
    for first in counted:
        if not any(first in r or r in first for r in logged):
            breaks.append(BreakRecord(reason=first, detail=first))
    calls: list[OpCall] = []
    for gm in graphs:
        offset = len(calls)  # each graph numbers its calls from 0: so do their producers
        for call in calls_from_graph(gm.graph, strip_module_prefix):
            call.index = len(calls)
            call.sources = [None if s is None else s + offset for s in call.sources]
            calls.append(call)
    return OpGraph(
        calls=calls,
        method="dynamo",
        seconds=time.perf_counter() - start,
        graph_breaks=breaks,
        dynamo_graphs=len(graphs),
        notes=notes,
        output_tensors=output_tensors,
        stopped=stopped,
    )


class ForwardError(Exception):
    """The model's forward raises on its example inputs even in eager mode: the model's own bug."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(str(original))
        self.original = original


def _check_eager(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    import torch

    try:
        with quiet_torch(), torch.no_grad():
            module(*args, **kwargs)
    except Exception as exc:
        if _on_data(exc):
            # Fake tensors (the fake strategy) have no values: a size only the data gives (nonzero's count,
            # iterated by MoE routing) cannot be guarded on even eagerly. That is not the model's bug.
            return
        raise ForwardError(exc) from exc


def _on_data(exc: BaseException) -> bool:
    """A guard on a data-dependent size or value: the tracer's limit, not the model's error."""
    from neuronprobe._torch.symbolic_shapes import data_dependent_error

    try:
        return isinstance(exc, data_dependent_error())
    except MissingInternal:
        return False


def capture(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any], strip_module_prefix: str = "", assume_sizes: bool = False) -> OpGraph:
    """Export first; on failure, record why and fall back to dynamo for the rest.

    An unexplained export failure is checked against an eager run first: if
    the forward raises there too, that is the user's bug (:class:`ForwardError`),
    not something to analyse.

    ``assume_sizes`` (the fake capture strategy): a branch on a data-dependent
    size is followed with an assumed size instead of ending the trace, and the
    graph lists each such branch (:mod:`neuronprobe._torch.assumed_sizes`).
    """
    with _assuming(assume_sizes) as assumed, _fake_weights_convertible(module), _bounded_ops():
        graph = _capture(module, args, kwargs, strip_module_prefix)
    graph.assumed = _assumed_branches(assumed)
    return graph


class RunawayForward(InputError):
    """The forward recorded more ops than the op budget: a loop that does not end (exit 2, at its line)."""


def op_budget_limit() -> int:
    """The op budget: ``NEURONPROBE_OP_BUDGET`` when it is a positive integer, else :data:`DEFAULT_OP_BUDGET`."""
    value = os.environ.get(OP_BUDGET_ENV, "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else DEFAULT_OP_BUDGET


@contextlib.contextmanager
def _bounded_ops() -> Iterator[None]:
    """The capture under the op budget; past it, a :class:`RunawayForward` naming the model's line."""
    from neuronprobe._torch.op_budget import Runaway, op_budget

    try:
        with op_budget(op_budget_limit()):
            yield
    except Runaway as stop:
        file, line, code = _model_frame_from_stack(stop.stack)
        where = f"{relative_path(file)}:{line}" if file else "the model's forward"
        shown = f" ({code})" if code else ""
        raise RunawayForward(
            f"{where}: the forward recorded more than {stop.budget:,} ops{shown} and was stopped as a runaway loop "
            f"(no real model has a graph this size); fix the loop, or raise {OP_BUDGET_ENV}"
        ) from None


@contextlib.contextmanager
def _fake_weights_convertible(module: Any) -> Iterator[None]:
    """Fake weights (the fake strategy): a ``module.to(dtype)`` in the forward that changes nothing runs as on real weights."""
    from neuronprobe._torch import fake_tensor

    if not any(fake_tensor.is_fake(p) for p in module.parameters()):
        yield
        return
    try:
        block = fake_tensor.no_op_conversions_of_fakes()
    except MissingInternal:  # the conversion raises as before; doctor names the degradation
        yield
        return
    with block:
        yield


@contextlib.contextmanager
def _assuming(enabled: bool) -> Iterator[list[Any]]:
    from neuronprobe._torch import assumed_sizes

    if not enabled:
        yield []
        return
    try:
        block = assumed_sizes.assumed_sizes()
    except MissingInternal:  # a guard on a size stays a failed export; doctor names the degradation
        yield []
        return
    with block as record:
        yield record


def _assumed_branches(assumed: list[Any]) -> list[AssumedBranch]:
    """One entry per line of the model's code (a guard is asked again at every retrace), in the order they were met."""
    out: dict[tuple[str | None, int | None], AssumedBranch] = {}
    for a in assumed:
        file, line, code = _model_frame_from_stack(a.stack)
        if file is None:  # torch's own check after the trace, on a size an earlier branch already assumed
            continue
        out.setdefault((file, line), AssumedBranch(a.symbol, a.size, file, line, code or source_line(file, line)))
    return list(out.values())


def _capture(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any], strip_module_prefix: str) -> OpGraph:
    try:
        return capture_export(module, args, kwargs, strip_module_prefix)
    except Exception as exc:  # every export failure is information, not the end
        failure = _classify_failure(exc)
    if failure.kind == "error":
        _check_eager(module, args, kwargs)
    graph = capture_dynamo(module, args, kwargs, strip_module_prefix)
    graph.failure = failure
    graph.method = "export+dynamo"
    return graph
