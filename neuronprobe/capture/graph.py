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
import operator
import os
import re
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from neuronprobe._torch import MissingInternal, dispatcher, pytree
from neuronprobe._torch.dispatch_mode import dispatch_mode_base
from neuronprobe.defaults import DEFAULT_OP_BUDGET, OP_BUDGET_ENV
from neuronprobe.errors import InputError
from neuronprobe.usercode import chain_in_stack_trace, is_library, is_neuronprobe, model_frames

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
    # The model-code frames from the user's entry point down to ``file:line`` (usercode.ChainFrame, outermost first).
    chain: list[tuple[str, int, str]] = field(default_factory=list)

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
    regions: list[Region] = field(default_factory=list)  # higher-order regions entered (no_grad bodies, cond branches...)
    parameters: ParameterCoverage | None = None  # how much of the module's parameters the ops read; None: unknown


@dataclass
class ParameterCoverage:
    """Parameter elements the captured ops read, of the module's total: the plausibility test's evidence."""

    read: int
    total: int

    @property
    def share(self) -> float:
        return self.read / self.total if self.total else 1.0


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


def model_frame_from_stack(stack: traceback.StackSummary) -> tuple[str | None, int | None, str | None]:
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
    """Walk an FX graph's op calls into OpCalls (aten and custom ops), the bodies of its regions included."""
    return walk_graph(graph, strip_module_prefix).calls


@dataclass
class Region:
    """A higher-order region the capture entered (a ``@torch.no_grad()`` forward, an autocast block, a
    ``torch.cond`` branch, a ``while_loop`` body): its kind, where the model enters it, and the op calls
    recorded inside it (nested regions' included)."""

    kind: str
    ops: int = 0
    file: str | None = None
    line: int | None = None


@dataclass
class Walked:
    """What one walk of a captured graph found: its op calls, the regions it entered, and the graph inputs
    (top-level placeholders) that some op reads, through regions too: what the plausibility test counts."""

    calls: list[OpCall] = field(default_factory=list)
    regions: list[Region] = field(default_factory=list)
    inputs_read: set[str] = field(default_factory=set)


@dataclass
class _Scope:
    """The enclosing region's frame and module: ops of a body traced without its own user frame
    (``torch.cond`` branches are retraced from dynamo's generated code) inherit the region's line."""

    frame: tuple[str | None, int | None, str | None] = (None, None, None)
    module: tuple[str | None, str | None] = (None, None)


def walk_graph(graph: Any, strip_module_prefix: str = "") -> Walked:
    """Every op call of ``graph``, entering each higher-order region and ``call_module`` GraphModule.

    Dataflow crosses region boundaries: a body's placeholders are bound to the call's operands (see
    :mod:`neuronprobe._torch.regions`), and a ``getitem`` of a region's result to the op that made the
    body's output, so rules that follow values see through ``no_grad`` and autocast blocks.
    """
    walked = Walked()
    top_inputs = {n: str(n.name) for n in graph.nodes if n.op == "placeholder"}
    _walk(graph, walked, strip_module_prefix, _Scope(), {}, top_inputs, {}, depth=0)
    return walked


MAX_REGION_DEPTH = 32  # nested regions deeper than this are a cycle or a pathological graph: not entered


def _walk(
    graph: Any,
    walked: Walked,
    strip: str,
    scope: _Scope,
    produced_by: dict[Any, int],
    inputs: dict[Any, str],
    parts_by_op: dict[str, list[OpCall] | None],
    depth: int,
) -> list[int | None]:
    """Walk one graph (the top one or a region's body); returns the producer of each of its outputs."""
    import torch.fx

    from neuronprobe._torch import regions

    calls = walked.calls
    region_results: dict[Any, list[int | None]] = {}
    outputs: list[int | None] = []
    for node in graph.nodes:
        if node.op == "output":
            outputs = [produced_by.get(n) if isinstance(n, torch.fx.Node) else None for n in pytree.tree_leaves(node.args)]
            continue
        if node.op == "call_function" and dispatcher.is_op_overload(node.target):
            call = _op_call(node, node.target, list(node.args), dict(node.kwargs), len(calls), strip, scope, produced_by, inputs, walked, parts_by_op)
            produced_by[node] = call.index
            calls.append(call)
            continue
        if node.op == "call_function" and node.target is operator.getitem and isinstance(node.args[0], torch.fx.Node):
            source = node.args[0]
            if source in region_results and isinstance(node.args[1] if len(node.args) > 1 else None, int):
                index = node.args[1]
                made = region_results[source][index] if 0 <= index < len(region_results[source]) else None
                if made is not None:
                    produced_by[node] = made
                continue
            if source in produced_by:
                produced_by[node] = produced_by[source]  # operator.getitem of a multi-output op
                continue
        if node.op not in ("call_function", "call_module") or depth >= MAX_REGION_DEPTH:
            continue
        wrapped = _wrapped_op(node)
        if wrapped is not None:  # auto_functionalized(op, **kwargs), with_effects(token, op, *args): the op is the work
            op, args, kwargs = wrapped
            call = _op_call(node, op, args, kwargs, len(calls), strip, scope, produced_by, inputs, walked, parts_by_op)
            produced_by[node] = call.index
            calls.append(call)
            continue
        if node.op == "call_module":
            body = regions.submodule(graph.owning_module, node.target)
            bodies = [body] if isinstance(body, torch.fx.GraphModule) else []
            operands = [a for a in pytree.tree_leaves((node.args, node.kwargs)) if isinstance(a, torch.fx.Node)]
            kind = type(body).__name__ if body is not None else str(node.target)
        else:
            bodies, operands = regions.bodies_and_operands(node)
            kind = regions.region_kind(node.target)
        if not bodies:
            continue
        frame = user_frame_from_stack(node.meta.get("stack_trace"))
        module = _module_of(node, strip)
        inner = _Scope(frame if frame[0] is not None else scope.frame, module if module[0] is not None or module[1] else scope.module)
        region = Region(kind=kind, file=inner.frame[0], line=inner.frame[1])
        walked.regions.append(region)
        before = len(calls)
        results: list[int | None] = []
        for body in bodies:
            placeholders = [n for n in body.graph.nodes if n.op == "placeholder"]
            bound = regions.bind(placeholders, operands)
            body_produced = {p: produced_by[o] for p, o in bound.items() if o in produced_by}
            body_inputs = {p: inputs[o] for p, o in bound.items() if o in inputs}
            outs = _walk(body.graph, walked, strip, inner, body_produced, body_inputs, parts_by_op, depth + 1)
            results = results or outs  # cond: both branches are walked; the first names the results' producers
        region.ops = len(calls) - before
        if region.file is None:  # a no_grad or autocast region's call has no stack: it starts at its first op's line
            first = next((c for c in calls[before:] if c.file is not None), None)
            region.file, region.line = (first.file, first.line) if first is not None else (None, None)
        region_results[node] = results
        if len(results) == 1 and results[0] is not None:
            produced_by[node] = results[0]
    return outputs


def _wrapped_op(node: Any) -> tuple[Any, list[Any], dict[str, Any]] | None:
    """The op a wrapper call runs (``auto_functionalized(op, **kwargs)`` for a custom op that mutates its
    input, ``with_effects(token, op, *args)`` for one with side effects), with its arguments, or None."""
    for i, arg in enumerate(node.args[:2]):
        if dispatcher.is_op_overload(arg):
            return arg, list(node.args[i + 1 :]), {k: v for k, v in node.kwargs.items() if not k.startswith("_")}
    return None


def schema_arguments(target: Any, args: Any, kwargs: dict[str, Any]) -> Iterator[tuple[Any, Any]]:
    """Each schema argument an op call was given, with its value (positional first, then by name)."""
    for i, arg in enumerate(target._schema.arguments):
        if i < len(args):
            yield arg, args[i]
        elif arg.name in kwargs:
            yield arg, kwargs[arg.name]


def _op_call(
    node: Any,
    target: Any,
    args: list[Any],
    kwargs: dict[str, Any],
    index: int,
    strip: str,
    scope: _Scope,
    produced_by: dict[Any, int],
    inputs: dict[Any, str],
    walked: Walked,
    parts_by_op: dict[str, list[OpCall] | None],
) -> OpCall:
    """One OpCall for one op node: arguments by schema name, outputs, data-dependence, line and module."""
    import torch.fx

    call = _bare_call(target, index)
    input_symbols: set[str] = set()
    for arg, raw in schema_arguments(target, args, kwargs):
        for n in raw if isinstance(raw, (list, tuple)) else [raw]:
            if isinstance(n, torch.fx.Node) and n in inputs:
                walked.inputs_read.add(inputs[n])
        value = _arg_value(raw)
        metas = _tensor_metas(value)
        input_symbols |= _unbacked_symbols(value)
        if metas:
            call.inputs.extend(metas)
            call.arg_tensors[arg.name] = metas
            call.sources.extend(_producers(raw, produced_by, len(metas)))
        elif _is_constant(value):
            call.constants[arg.name] = value
    val = node.meta.get("val")
    call.outputs = _tensor_metas(val)
    # Only the op that creates a data-dependent size is its source; ops downstream merely carry it.
    call.data_dependent_output = bool(_unbacked_symbols(val) - input_symbols)
    call.file, call.line, call.source_line = user_frame_from_stack(node.meta.get("stack_trace"))
    call.chain = chain_in_stack_trace(node.meta.get("stack_trace"))
    if call.file is None:
        call.file, call.line, call.source_line = scope.frame
    call.module, call.module_type = _module_of(node, strip)
    if call.module is None and call.module_type is None:
        call.module, call.module_type = scope.module
    if (call.has_composite_implicit or call.has_composite_explicit) and target is node.target:
        # Parts carry arguments, so the same op with other arguments is replayed again.
        replay_key = f"{call.op}|{call.constants}|{[str(m) for m in call.inputs]}"
        if replay_key not in parts_by_op:
            parts_by_op[replay_key] = composite_parts(node, explicit=not call.has_composite_implicit)
        call.parts = parts_by_op[replay_key]
    return call


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
    for arg, value in schema_arguments(func, args, kwargs):
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
    with quiet_torch(), _model_stack_traces():
        ep = torch.export.export(module, args, kwargs, strict=False)
    walked = walk_graph(ep.graph, strip_module_prefix)
    graph = OpGraph(calls=walked.calls, method="export", seconds=time.perf_counter() - start, regions=walked.regions)
    graph.output_tensors = _exported_output_tensors(ep)
    graph.parameters = _export_coverage(ep, walked)
    return graph


def _export_coverage(ep: Any, walked: Walked) -> ParameterCoverage:
    """Parameter elements read by the exported ops: the lifted parameter placeholders an op reads, through
    regions too (``graph_signature.inputs_to_parameters`` names every parameter of the module once)."""
    sizes = {n.name: _numel(n.meta.get("val")) for n in ep.graph.nodes if n.op == "placeholder"}
    names = set(ep.graph_signature.inputs_to_parameters)
    total = sum(sizes.get(n, 0) for n in names)
    read = sum(sizes.get(n, 0) for n in names & walked.inputs_read)
    return ParameterCoverage(read=read, total=total)


def _numel(value: Any) -> int:
    """Elements of a (fake) tensor; 0 when a size is symbolic or the value is no tensor."""
    n = 1
    for s in getattr(value, "shape", None) or ():
        try:
            n *= int(s)
        except Exception:  # an unbacked size
            return 0
    return n if hasattr(value, "shape") else 0


def region_words(region: Region) -> str:
    """A region as the report lists it: ``wrap_with_set_grad_enabled (3 ops) at model.py:5``."""
    where = f" at {relative_path(region.file)}:{region.line}" if region.file else ""
    return f"{region.kind} ({region.ops} op{'s' if region.ops != 1 else ''}){where}"


def implausible(graph: OpGraph) -> str | None:
    """Why a capture looks incomplete for its module, or None when it is plausible (the test behind
    ``TopVerdict.INCOMPLETE``): its ops read less than ``MIN_PARAMETER_COVERAGE`` of the module's parameter
    elements. A forward that runs its model reads nearly all of its weights; one whose body the capture did
    not enter (a region of a kind it cannot walk, code run outside the traced call) reads few or none."""
    from neuronprobe.defaults import MIN_PARAMETER_COVERAGE
    from neuronprobe.formatting import format_percent

    p = graph.parameters
    if p is None or p.total == 0 or p.share >= MIN_PARAMETER_COVERAGE:
        return None
    return (
        f"the captured ops ({len(graph.calls)}) read {format_percent(100 * p.share)} of the module's parameter elements "
        f"({p.read:,} of {p.total:,}; a complete capture reads at least {format_percent(100 * MIN_PARAMETER_COVERAGE, 0)}): "
        "either the capture missed code the model runs (a region it could not enter, work done outside the traced call) "
        "or this entry point uses little of the model; the findings cover only what was captured"
    )


@contextlib.contextmanager
def _model_stack_traces() -> Iterator[None]:
    """Nodes record every frame of model code (not only the ``forward`` frames): an op sits at the line that runs it."""
    from neuronprobe._torch import stack_traces

    try:
        block = stack_traces.keep_frames(model_frames)
    except MissingInternal:  # doctor names the degradation: findings then sit at the last forward() line
        yield
        return
    with block:
        yield


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

    graphs: list[tuple[Any, list[int | None]]] = []
    params = {id(p): p for p in module.parameters()} if isinstance(module, torch.nn.Module) else {}
    entering: list[list[int | None]] = [[]]  # the parameter (by id) each input of the graph being lowered is, or None

    def record(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        graphs.append((gm, entering[0]))
        return gm.forward

    start = time.perf_counter()
    notes: list[str] = []
    output_tensors: int | None = None
    stopped: str | None = None
    messages: list[str] = []
    with _dynamo_counters_kept(notes) as counted:
        try:
            lower = aot.aot_backend(record)

            def backend(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
                # Dynamo hands over the module's own parameter tensors as inputs: which input is which
                # parameter, for the plausibility test (an inference graph keeps the input order).
                entering[0] = [id(t) if id(t) in params else None for t in example_inputs]
                return lower(gm, example_inputs)

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
    regions: list[Region] = []
    read: set[int] = set()
    known = True
    for gm, entered in graphs:
        offset = len(calls)  # each graph numbers its calls from 0: so do their producers
        walked = walk_graph(gm.graph, strip_module_prefix)
        for call in walked.calls:
            call.index = len(calls)
            call.sources = [None if s is None else s + offset for s in call.sources]
            calls.append(call)
        regions.extend(walked.regions)
        names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
        if len(names) != len(entered):
            known = False  # inputs added by the lowering (tokens, seeds): which is which is not known
            continue
        read |= {pid for name, pid in zip(names, entered, strict=True) if pid is not None and name in walked.inputs_read}
    coverage = None
    if known and params:
        coverage = ParameterCoverage(read=sum(params[i].numel() for i in read), total=sum(p.numel() for p in params.values()))
    return OpGraph(
        calls=calls,
        method="dynamo",
        seconds=time.perf_counter() - start,
        graph_breaks=breaks,
        dynamo_graphs=len(graphs),
        notes=notes,
        output_tensors=output_tensors,
        stopped=stopped,
        regions=regions,
        parameters=coverage,
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


def capture(
    module: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    strip_module_prefix: str = "",
    assume_sizes: bool = False,
    anchors: tuple[Callable[..., Any], ...] = (),
) -> OpGraph:
    """Export first; on failure, record why and fall back to dynamo for the rest.

    An unexplained export failure is checked against an eager run first: if
    the forward raises there too, that is the user's bug (:class:`ForwardError`),
    not something to analyse.

    ``assume_sizes`` (the fake capture strategy): a branch on a data-dependent
    size is followed with an assumed size instead of ending the trace, and the
    graph lists each such branch (:mod:`neuronprobe._torch.assumed_sizes`).

    ``anchors``: functions other than ``forward`` whose lines export should keep (an entry point such as
    ``generate``; :mod:`neuronprobe._torch.stack_anchors`).
    """
    with _assuming(assume_sizes) as assumed, _fake_weights_convertible(module), _anchored(anchors), _bounded_ops():
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
        file, line, code = model_frame_from_stack(stop.stack)
        where = f"{relative_path(file)}:{line}" if file else "the model's forward"
        shown = f" ({code})" if code else ""
        raise RunawayForward(
            f"{where}: the forward recorded more than {stop.budget:,} ops{shown} and was stopped as a runaway loop "
            f"(no real model has a graph this size); fix the loop, or raise {OP_BUDGET_ENV}"
        ) from None


@contextlib.contextmanager
def _anchored(functions: tuple[Callable[..., Any], ...]) -> Iterator[None]:
    from neuronprobe._torch import stack_anchors

    if not functions:
        yield
        return
    try:
        block = stack_anchors.anchored(list(functions))
    except MissingInternal:  # the entry's own lines are missing from export's capture; doctor names the degradation
        yield
        return
    with block:
        yield


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
        file, line, code = model_frame_from_stack(a.stack)
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
