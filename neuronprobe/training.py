"""The whole training step: forward, loss, backward, optimizer step and the loop around them.

The forward is captured by :mod:`neuronprobe.capture.graph` as for inference. This
module runs ONE training step eagerly on fake tensors (``FakeTensorMode``: CPU
tensors with shapes and dtypes but no storage, so a 7B model costs no memory)
and records every aten op the step dispatches, with its phase:

* ``backward``: ops the autograd engine runs. Each forward call tags the
  autograd nodes it creates (``grad_fn.metadata``) with the user's line and
  module path; in the backward ``torch._C._current_autograd_node()`` names the
  node being differentiated, so a backward op lands at the forward line whose
  gradient produced it (anomaly mode's traceback trick, without its cost).
* ``optimizer``: ops after the backward (gradient clipping, ``step()``,
  ``zero_grad()``), at the line that ran them, else where the optimizer was built.
* ``loop``: host reads in ``train_step`` (``.item()``, ``print``, ``.cpu()``,
  ``.tolist()``, a Python branch on a metric). A ``TorchFunctionMode`` sees
  them before they reach the (fake) data, records their line and returns a
  stand-in value so the step runs on.
* ``forward``: ops of the loss computed outside the model (in ``train_step``).

Why eager on fake tensors and not a joint graph: torch-xla runs the backward
eagerly op by op (it traces lazily, it does not use AOTAutograd), so the ops it
must lower are exactly what eager autograd dispatches, in-place optimizer ops
included; and host reads only exist in the eager program.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

from neuronprobe._torch import dispatcher, fake_tensor
from neuronprobe._torch.autograd_node import current_autograd_node
from neuronprobe._torch.dispatch_mode import dispatch_mode_base
from neuronprobe.backends import LiveBackend, Observation
from neuronprobe.backends.train_program import TrainProgramOptions, build_optimizer  # the same optimizer the observed step builds
from neuronprobe.capture.graph import (
    OpCall,
    TensorMeta,
    _bare_call,
    _is_constant,
    _tensor_metas,
    quiet_torch,
    relative_path,
    schema_arguments,
    source_line,
    user_frame_from_traceback,
)
from neuronprobe.errors import InputError, ModelLoadError
from neuronprobe.report.model import Finding, PhaseSummary, PolicyPrediction, RecompileCause, RecompileSection, TrainInfo
from neuronprobe.support import Classification, find_rule
from neuronprobe.usercode import is_library, is_neuronprobe
from neuronprobe.vocabulary import SUPPORTED_VERDICTS, CauseKind, Phase, SourceLocation, Verdict

STEP_CAPTURE = "train_step (eager, fake tensors)"
OPTIMIZERS: tuple[str, ...] = ("adamw", "adam", "sgd")
OPTIMIZER_IMPLS: tuple[str, ...] = ("for-loop", "foreach", "fused")
_SITE_KEY = "neuronprobe_site"
_SKIP_NAMESPACES = ("prim", "profiler")
# torch frames between a tensor method and a TorchFunctionMode (Tensor.__repr__ -> handle_torch_function)
_FAKE_TENSOR_FILE = fake_tensor.FAKE_TENSOR_FILE
_DISPATCH_FILES = (os.path.join("torch", "overrides.py"), os.path.join("torch", "_tensor.py"), _FAKE_TENSOR_FILE)
# torch's GradScaler.step reads found_inf with .item() (grad_scaler.py, _maybe_opt_step) every step
_GRAD_SCALER_FILES = (os.path.join("torch", "amp", "grad_scaler.py"), os.path.join("torch", "cuda", "amp", "grad_scaler.py"))
_GRAD_SCALER_READS = frozenset({"_maybe_opt_step", "<genexpr>"})
# The functions that run the user's step: frames above them are not the model's code.
_STEP_RUNNERS = frozenset({"capture_training", "_constructor_site"})
_BRANCH_LINE = re.compile(r"^\s*(if|elif|while|assert)\b|\bif\b.+\belse\b")
_ASSERT_LINE = re.compile(r"^\s*assert\b")
_HOST_READ_KERNEL = "_local_scalar_dense"
# Reads whose stand-in value is a guess (a .cpu() copy is still a tensor; a print only shows it).
_GUESSED_READS = frozenset({"item", "bool", "float", "int", "tolist", "numpy"})
# Factories that build a tensor on the host unless given a device.
_HOST_FACTORIES = frozenset({"tensor", "as_tensor", "from_numpy", "zeros", "ones", "empty", "full", "arange", "linspace", "eye", "rand", "randn", "randint"})

# Tensor methods that move a value to the host. torch-xla must execute the pending
# lazy graph before it can answer any of them (measured: scripts/measure_training_xla.py).
_HOST_READS: dict[str, str] = {
    "item": "item",
    "tolist": "tolist",
    "cpu": "cpu",
    "numpy": "numpy",
    "__bool__": "bool",
    "__float__": "float",
    "__int__": "int",
    "__index__": "int",
    "__repr__": "print",
    "__format__": "print",
    "__array__": "numpy",
}
_BACKWARD_CALLS = frozenset({"backward"})

HOST_READ_OP: dict[str, str] = {
    "item": "aten::_local_scalar_dense",
    "bool": "aten::_local_scalar_dense",
    "float": "aten::_local_scalar_dense",
    "int": "aten::_local_scalar_dense",
    "print": "<print(tensor)>",
    "cpu": "<tensor.cpu()>",
    "numpy": "<tensor.numpy()>",
    "tolist": "<tensor.tolist()>",
    "grad_scaler": "aten::_local_scalar_dense",
}


@dataclass
class TrainOptions:
    """How to build the training step when the model file does not define it."""

    optimizer: str = "adamw"
    optimizer_impl: str = "for-loop"  # what torch picks on an XLA device by default (no foreach/fused support check passes)
    dataset_size: int | None = None
    batch_size: int | None = None


@dataclass
class HostRead:
    """A read of a device value on the host, inside the training step."""

    kind: str
    file: str | None
    line: int | None
    source_line: str | None
    nbytes: int
    branch: bool
    shape: str
    count: int = 1
    in_forward: bool = False  # read inside the model's forward: the forward capture reports its line


@dataclass
class TrainCapture:
    """What one eager training step dispatched, by phase."""

    calls: list[OpCall]
    host_reads: list[HostRead]
    loss: str
    optimizer: str
    train_step: bool
    seconds: float
    notes: list[str] = field(default_factory=list)
    model_inputs: tuple[Any, Any] | None = None  # (args, kwargs) of the model's first call, tensors as TensorMeta
    # host-to-device uploads in the step, one entry per line (``count`` per step): copies, not syncs (issue 33)
    uploads: list[HostRead] = field(default_factory=list)
    # the lines whose value the fake step could not know and that made it fail: the step then ran on real tensors
    undecided: list[str] = field(default_factory=list)


def check_options(options: TrainOptions) -> TrainOptions:
    """Reject unknown optimizer names and impossible batch settings before any work (exit 2)."""
    if options.optimizer not in OPTIMIZERS:
        raise InputError(f"--optimizer {options.optimizer!r}: unknown optimizer; use {', '.join(OPTIMIZERS)}")
    if options.optimizer_impl not in OPTIMIZER_IMPLS:
        raise InputError(f"--optimizer-impl {options.optimizer_impl!r}: unknown implementation; use {', '.join(OPTIMIZER_IMPLS)}")
    if (options.dataset_size is None) != (options.batch_size is None):
        raise InputError("--dataset-size and --batch-size go together: give both, e.g. --dataset-size 1000 --batch-size 32")
    for name, value in (("--dataset-size", options.dataset_size), ("--batch-size", options.batch_size)):
        if value is not None and value < 1:
            raise InputError(f"{name} {value}: use a positive number")
    return options


# --- rules ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TrainingRule:
    id: str
    verdict: Verdict
    phases: frozenset[str]
    ops: frozenset[str]
    message: str
    fix: str
    fixes: dict[str, str]

    def fix_for(self, name: str) -> str:
        return self.fixes.get(name) or self.fix


@lru_cache(maxsize=1)
def _training_doc() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(resources.files("neuronprobe.support").joinpath("data", "training_rules.json").read_text("utf-8"))
    return doc


@lru_cache(maxsize=1)
def training_rules() -> tuple[tuple[TrainingRule, ...], tuple[str, ...]]:
    """The measured training rules (``support/data/training_rules.json``) and their provenance."""
    doc = _training_doc()
    rules = tuple(
        TrainingRule(
            id=r["id"],
            verdict=Verdict(r["verdict"]),
            phases=frozenset(r["phases"]),
            ops=frozenset(r["ops"]),
            message=r["message"],
            fix=r["fix"],
            fixes=dict(r.get("fixes", {})),
        )
        for r in doc["rules"]
    )
    return rules, tuple(doc["provenance"])


def classify_training(call: OpCall, base: Callable[[OpCall], Classification]) -> Classification:
    """A training rule when one matches the op in its phase, else the support table's verdict."""
    rules, _ = training_rules()
    for rule in rules:
        if call.phase in rule.phases and (call.key in rule.ops or call.name in rule.ops):
            return Classification(rule.verdict, rule.id, rule.message, rule.fix_for(call.name))
    result = base(call)
    if call.phase == Phase.BACKWARD and result.verdict not in (Verdict.LOWERED, Verdict.DECOMPOSED):
        result = dataclasses.replace(result, reason=f"in the gradient of this line: {result.reason}")
    elif call.phase == Phase.OPTIMIZER and result.verdict not in (Verdict.LOWERED, Verdict.DECOMPOSED):
        result = dataclasses.replace(result, reason=f"in the optimizer step: {result.reason}")
    return result


# --- the recorder --------------------------------------------------------------------------


@dataclass
class _Site:
    file: str | None
    line: int | None
    source_line: str | None
    module: str | None
    module_type: str | None


class _State:
    """Shared by the two modes and the module hooks while one step runs."""

    def __init__(self, names: dict[int, tuple[str, str]]) -> None:
        self.names = names  # id(module) -> (path, type)
        self.model_inputs: tuple[Any, Any] | None = None  # what train_step first called the model with
        self.last_tolist: Any = None  # the FakeTensor.tolist frame last recorded
        self.modules: list[tuple[str, str]] = []
        self.in_backward = False
        self.backward_done = False
        self.backward_site: _Site | None = None
        self.optimizer_site: _Site | None = None
        self.calls: list[OpCall] = []
        self.reads: list[HostRead] = []
        self.uploads: list[HostRead] = []
        self.guesses: list[_Site] = []  # lines that read a value the fake tensors do not hold (a stand-in was used)
        self.real = False  # the step runs on real tensors: host reads return the real values
        # tensors that live on the host in the program (built from Python data with no device, and what is computed
        # from them alone), by id: reading them is no device sync, moving them to the device is an upload
        self._host: dict[int, Any] = {}
        self._library: dict[str, bool] = {}

    def is_host(self, tensor: Any) -> bool:
        ref = self._host.get(id(tensor))
        return ref is not None and ref() is tensor

    def mark_host(self, value: Any) -> None:
        import weakref

        import torch

        from neuronprobe._torch.pytree import tree_leaves

        for t in tree_leaves(value):
            if isinstance(t, torch.Tensor):
                self._host[id(t)] = weakref.ref(t)

    def all_host(self, values: Any) -> bool:
        """Every tensor among ``values`` is a host tensor (and there is at least one)."""
        import torch

        from neuronprobe._torch.pytree import tree_leaves

        tensors = [t for t in tree_leaves(values) if isinstance(t, torch.Tensor)]
        return bool(tensors) and all(self.is_host(t) for t in tensors)

    def is_library(self, filename: str) -> bool:
        known = self._library.get(filename)
        if known is None:
            known = self._library[filename] = is_library(filename)
        return known

    def read_origin(self) -> tuple[str, Any]:
        """Who asked for a value: ``"user"``, ``"grad_scaler"`` (torch's GradScaler reads found_inf,
        a device tensor, on the host) or ``"library"`` (e.g. the for-loop Adam's CPU step counter);
        and the outermost ``FakeTensor.tolist`` frame when the read is one element of a ``.tolist()``
        (a Python method of the fake tensor that reads element by element)."""
        frame: Any = sys._getframe(2)
        tolist = None
        while frame is not None and (is_neuronprobe(frame.f_code.co_filename) or frame.f_code.co_filename.endswith(_DISPATCH_FILES)):
            if frame.f_code.co_filename.endswith(_FAKE_TENSOR_FILE) and frame.f_code.co_name == "tolist":
                tolist = frame
            frame = frame.f_back
        if frame is None:
            return "library", tolist
        if frame.f_code.co_filename.endswith(_GRAD_SCALER_FILES) and frame.f_code.co_name in _GRAD_SCALER_READS:
            return "grad_scaler", tolist
        return ("library" if self.is_library(frame.f_code.co_filename) else "user"), tolist

    def user_site(self) -> _Site:
        """The innermost frame of the user's code on the live stack, and the module being run."""
        frame: Any = sys._getframe(1)
        while frame is not None and is_neuronprobe(frame.f_code.co_filename):
            frame = frame.f_back  # our own modes and hooks
        while frame is not None and self.is_library(frame.f_code.co_filename):
            if frame.f_code.co_name in _STEP_RUNNERS and is_neuronprobe(frame.f_code.co_filename):
                frame = None  # reached neuronprobe's own step: the code above it is whoever called analyze()
                break
            frame = frame.f_back  # torch, and our own modes when a dispatch happens inside a torch function
        module = self.modules[-1] if self.modules else (None, None)
        if frame is None:
            return _Site(None, None, None, module[0], module[1])
        file, line = frame.f_code.co_filename, frame.f_lineno
        return _Site(file, line, source_line(file, line), module[0], module[1])


def _stand_in(kind: str, tensor: Any, args: tuple[Any, ...], assertion: bool = False) -> Any:
    """A plausible Python value for a host read of a fake tensor (fake tensors hold no data).

    Numbers read as 1, not 0: library code divides by what it reads (the for-loop
    Adam's bias correction reads its step counter); truth tests read False, except
    on an ``assert`` line, which states what holds for valid data: there it reads True.
    """
    import torch

    dtype = tensor.dtype
    zero: Any = False if dtype == torch.bool else (1.0 if dtype.is_floating_point or dtype.is_complex else 1)
    if kind == "bool" and assertion:
        return True
    if kind in ("item", "bool", "float", "int"):
        return {"bool": bool(zero), "float": float(zero), "int": int(zero)}.get(kind, zero)
    if kind == "tolist":
        value: Any = zero
        for size in reversed(tensor.shape):
            value = [copy.copy(value) for _ in range(int(size))]
        return value
    if kind == "numpy":
        import numpy

        return numpy.zeros(tuple(int(s) for s in tensor.shape), dtype=numpy.float32)
    spec = args[1] if len(args) > 1 and isinstance(args[1], str) else ""
    if tensor.dim() == 0 and spec:
        return format(zero, spec)
    return f"tensor(<{str(dtype).replace('torch.', '')}{list(tensor.shape)} on the device>)"


def _modes(state: _State) -> tuple[Any, Any]:
    import torch
    from torch.overrides import TorchFunctionMode

    from neuronprobe._torch.pytree import tree_leaves

    def tag(outputs: Any, site: _Site) -> None:
        """Label every autograd node this call created with its site (older nodes are labelled already)."""
        stack = [t.grad_fn for t in tree_leaves(outputs) if isinstance(t, torch.Tensor) and t.grad_fn is not None]
        while stack:
            node = stack.pop()
            if node is None or _SITE_KEY in node.metadata or type(node).__name__ == "AccumulateGrad":
                continue
            node.metadata[_SITE_KEY] = site
            stack.extend(n for n, _ in node.next_functions)

    class Functions(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            name = getattr(func, "__name__", "")
            kind = _HOST_READS.get(name)
            if kind is None and name == "to" and _to_host(args, kwargs):
                kind = "cpu"
            tensor = args[0] if args and isinstance(args[0], torch.Tensor) else None
            if kind is not None and tensor is not None:
                host = state.is_host(tensor)  # a value built on the host: reading it syncs nothing
                origin, tolist = state.read_origin()
                if origin == "grad_scaler":
                    _record_read(state, "grad_scaler", tensor)
                    return 0.0 if not state.real else func(*args, **kwargs)  # fake: no inf found, the step runs
                if origin == "user" and not host:  # in the forward too: a sync per step (the capture has its finding)
                    if tolist is None:
                        _record_read(state, kind, tensor)
                    elif tolist is not state.last_tolist:  # one read per .tolist(), not one per element
                        state.last_tolist = tolist
                        _record_read(state, "tolist", tolist.f_locals["self"])
                if kind == "cpu" or state.real:  # a real copy of a fake tensor is still a (fake) CPU tensor
                    out = func(*args, **kwargs)
                    if kind == "cpu":
                        state.mark_host(out)
                    return out
                site = state.user_site() if origin == "user" else None
                if site is not None and kind in _GUESSED_READS:
                    state.guesses.append(site)
                return _stand_in(kind, tensor, args, assertion=bool(site and site.source_line and _ASSERT_LINE.match(site.source_line)))
            if origin_is_upload(func, name, tensor, args, kwargs, state):
                _record_upload(state, tensor if tensor is not None else args[0] if args else None)
                return func(*args, **kwargs)  # on the device now: not a host tensor
            if name in _BACKWARD_CALLS or func is torch.autograd.backward:
                state.backward_site = state.user_site()
                state.in_backward = True
                try:
                    return func(*args, **kwargs)
                finally:
                    state.in_backward, state.backward_done = False, True
            out = func(*args, **kwargs)
            if name in _HOST_FACTORIES and _device_of(args, kwargs) is None:
                state.mark_host(out)  # torch.tensor([...]) with no device: built on the host
            elif state._host and state.all_host((args, kwargs)):
                state.mark_host(out)  # computed from host tensors alone: still on the host
            if torch.is_grad_enabled() and current_autograd_node() is None:
                tag(out, state.user_site())
            return out

    class Record(dispatch_mode_base()):  # type: ignore[misc]
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            # On real tensors a host read dispatches aten::_local_scalar_dense: the read is recorded as a read, not an op.
            if dispatcher.is_op_overload(func) and func.namespace not in _SKIP_NAMESPACES and not (state.real and func.__name__.startswith(_HOST_READ_KERNEL)):
                _record_op(state, func, args, kwargs, out)
            return out

    return Functions(), Record()


def _is_cpu(device: Any) -> bool:
    """A device written as the string ``"cpu"`` (``"cpu:0"``). A ``torch.device`` read from a tensor
    (``x.device``) says nothing in a fake step, where every tensor is a CPU tensor."""
    return isinstance(device, str) and device.split(":", 1)[0] == "cpu"


def _device_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The ``device=`` a factory call names (None: the host)."""
    return kwargs.get("device")


def _to_host(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """``tensor.to("cpu")``: a device-to-host copy (``.to(x.device)`` keeps the tensor where it is)."""
    return any(_is_cpu(a) for a in [*args[1:], kwargs.get("device")])


def _moves_to_device(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """``.to(device)``, ``.to(x.device)``, ``.to(other)``, ``.cuda()``: a move to the accelerator (not ``.to("cpu")``,
    not a dtype-only ``.to(torch.float16)``)."""
    import torch

    if name == "cuda":
        return True
    if name != "to":
        return False
    targets = [*args[1:], kwargs.get("device")]
    if any(_is_cpu(a) for a in targets):
        return False
    return any(isinstance(a, (torch.device, torch.Tensor)) or (isinstance(a, str) and a) for a in targets)


def origin_is_upload(func: Any, name: str, tensor: Any, args: tuple[Any, ...], kwargs: dict[str, Any], state: _State) -> bool:
    """A host-to-device copy, as torch-xla counts one (``TransferToDeviceTime``, measured on torch-xla 2.9, see
    the README): a host tensor moved to the device, or ``torch.tensor``/``torch.as_tensor`` of Python data
    with a device (``torch.zeros``/``full``/``arange`` with a device are built on the device: no copy)."""
    if tensor is not None and state.is_host(tensor):
        return _moves_to_device(name, args, kwargs)
    if name in ("tensor", "as_tensor"):
        device = _device_of(args, kwargs)
        return device is not None and not _is_cpu(device)
    return False


def _record_upload(state: _State, tensor: Any) -> None:
    import torch

    site = state.user_site()
    if site.file is None:
        return
    meta = _tensor_metas(tensor)[0] if isinstance(tensor, torch.Tensor) else None
    state.uploads.append(HostRead("upload", site.file, site.line, site.source_line, (meta.nbytes or 0) if meta else 0, False, str(meta or "")))


def _record_read(state: _State, kind: str, tensor: Any) -> None:
    site = state.user_site()
    if site.file is None:
        return
    branch = kind == "bool" or bool(site.source_line and _BRANCH_LINE.search(site.source_line))
    meta = _tensor_metas(tensor)[0]
    state.reads.append(HostRead(kind, site.file, site.line, site.source_line, meta.nbytes or 0, branch, str(meta), in_forward=bool(state.modules)))


def _record_op(state: _State, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
    node: Any = current_autograd_node()
    if node is not None or state.in_backward:
        phase = Phase.BACKWARD
        site = node.metadata.get(_SITE_KEY) if node is not None else None
        site = site or state.backward_site
    elif state.backward_done:
        phase = Phase.OPTIMIZER
        site = state.user_site()
        if site.file is None and state.optimizer_site is not None:
            site = state.optimizer_site
    else:
        if state.modules:
            return  # the model's own forward: captured by torch.export with its graph and lines
        phase, site = Phase.FORWARD, state.user_site()
    call = _bare_call(func, len(state.calls))
    for arg, value in schema_arguments(func, args, kwargs):
        metas = _tensor_metas(value)
        if metas:
            call.inputs.extend(metas)
        elif _is_constant(value):
            call.constants[arg.name] = value
    call.outputs = _tensor_metas(out)
    call.phase = phase
    if site is not None:
        call.file, call.line, call.source_line = site.file, site.line, site.source_line
        call.module, call.module_type = site.module, site.module_type
    state.calls.append(call)


@contextmanager
def _module_stack(state: _State) -> Iterator[None]:
    """Global forward hooks keep the path of the module running (removed afterwards)."""
    from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

    def pre(module: Any, args: Any) -> None:
        state.modules.append(state.names.get(id(module), (None, None)))  # type: ignore[arg-type]

    def post(module: Any, args: Any, output: Any) -> None:
        if state.modules:
            state.modules.pop()

    handles = [register_module_forward_pre_hook(pre), register_module_forward_hook(post, always_call=True)]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


# --- fake copies -------------------------------------------------------------------------------


def _fake_copy(module: Any, fake_mode: Any) -> Any:
    """A deep copy of ``module`` whose parameters and buffers are fake CPU tensors (no storage)."""
    import torch

    memo: dict[int, Any] = {}
    with fake_mode:
        for t in [*module.parameters(), *module.buffers()]:
            empty = torch.empty(tuple(t.shape), dtype=t.dtype, device="cpu")
            memo[id(t)] = torch.nn.Parameter(empty, requires_grad=t.requires_grad) if isinstance(t, torch.nn.Parameter) else empty
    return copy.deepcopy(module, memo)


def _fake_inputs(value: Any, fake_mode: Any) -> Any:
    import torch

    from neuronprobe._torch.pytree import tree_map

    def convert(t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return t
        with fake_mode:
            return torch.empty(tuple(t.shape), dtype=t.dtype, device="cpu")

    return tree_map(convert, value)


def check_trainable(module: Any, name: str) -> None:
    """A traced/scripted module or one without trainable parameters cannot be trained (exit 2)."""
    import torch

    if isinstance(module, torch.jit.ScriptModule):
        raise InputError(
            f"{name}: --train needs a torch.nn.Module with parameters to train; this model is a "
            f"{type(module).__name__} (a traced or scripted module is eval-only): return the nn.Module itself from get_model()"
        )
    if not any(p.requires_grad for p in module.parameters()):
        raise InputError(f"{name}: --train needs a torch.nn.Module with parameters to train; {type(module).__name__} has no parameter with requires_grad=True")


def _loss_of(output: Any) -> tuple[Any, str]:
    """The training loss of a model's output: a scalar output as it is, else the sum of its float outputs."""
    import torch

    from neuronprobe._torch.pytree import leaves_with_names

    tensors: list[tuple[str, Any]] = [(path or "output", t) for path, t in leaves_with_names(output) if isinstance(t, torch.Tensor)]
    usable = [(n, t) for n, t in tensors if t.requires_grad and (t.dtype.is_floating_point or t.dtype.is_complex)]
    if not usable:
        names = ", ".join(f"the model's output{n if n != 'output' else ''} ({_tensor_metas(t)[0]})" for n, t in tensors) or "the model's output (not a tensor)"
        raise InputError(
            f"--train: {names} has no gradient path to the parameters (no float output with requires_grad): "
            "return a float tensor computed from the parameters, or define train_step(model, optimizer, batch)"
        )
    loss = usable[0][1].sum()
    for _, t in usable[1:]:
        loss = loss + t.float().sum()
    return loss, "the sum of the outputs" if tensors and tensors[0][1].dim() else "the model's scalar output"


def _optimizer_label(optimizer: Any) -> str:
    group = optimizer.param_groups[0] if optimizer.param_groups else {}
    impl = "fused" if group.get("fused") else "foreach" if group.get("foreach") else "for-loop"
    return f"{type(optimizer).__module__.split('.')[0]}.{type(optimizer).__name__} ({impl})"


def _user_error(where: str, exc: BaseException, path: Any) -> ModelLoadError:
    file, line, _ = user_frame_from_traceback(exc)
    place = str(SourceLocation(relative_path(file), line)) if file else str(path)
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return ModelLoadError(f"{place}: {where} raised {type(exc).__name__}: {first}")


def _constructor_site(state: _State, fn: Callable[[], Any]) -> tuple[Any, _Site | None]:
    """Call ``get_optimizer`` and note the user's line that constructed the optimizer."""
    found: list[_Site] = []

    import torch

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event != "call" or found or frame.f_code.co_name != "__init__":
            return
        caller = frame.f_back
        if isinstance(frame.f_locals.get("self"), torch.optim.Optimizer) and caller is not None and not state.is_library(caller.f_code.co_filename):
            file, line = caller.f_code.co_filename, caller.f_lineno
            found.append(_Site(file, line, source_line(file, line), None, None))

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        result = fn()
    finally:
        sys.setprofile(previous)
    return result, found[0] if found else None


def capture_training(loaded: Any, options: TrainOptions, strip_module_prefix: str = "") -> TrainCapture:
    """Run one training step of ``loaded`` on fake tensors and record it by phase.

    A fake tensor holds no values: a host read (``assert (boxes[:, 2:] > boxes[:, :2]).all()``,
    ``if loss.item() > x``) gets a stand-in. When the step then fails, the failure is the stand-in's,
    not the user's: the step runs once more on the example batch with real tensors (the model's own
    weights, a copy), where every read has its real value. Only a failure of that run is the user's
    error. A model on the meta device (no weights to run) keeps the fake run's error.
    """
    check_trainable(loaded.module, loaded.name)
    start = time.perf_counter()
    try:
        capture = _step_once(loaded, options, strip_module_prefix, real=False)
    except _StepFailed as failed:
        if not failed.state.guesses or loaded.on_meta:
            raise failed.error from failed.cause
        try:
            capture = _step_once(loaded, options, strip_module_prefix, real=True)
        except _StepFailed as again:  # with real values too: the user's own error
            raise again.error from again.cause
        capture.undecided = list(dict.fromkeys(str(SourceLocation(relative_path(g.file), g.line)) for g in failed.state.guesses))
        capture.notes.append(
            f"the fake-tensor step could not know the value read at {', '.join(capture.undecided)} and failed with it "
            f"({failed.error}); the step ran again on the example batch with real tensors, where each read has its value"
        )
    capture.seconds = time.perf_counter() - start
    return capture


class _StepFailed(Exception):
    """The user's step raised: the error to report, and what the run had seen by then."""

    def __init__(self, error: Exception, cause: BaseException, state: _State) -> None:
        super().__init__(str(error))
        self.error, self.cause, self.state = error, cause, state


def _step_once(loaded: Any, options: TrainOptions, strip_module_prefix: str, real: bool) -> TrainCapture:
    """One step on fake tensors (``real=False``) or on a real copy of the model and the example batch."""
    import torch

    fake_mode: Any = fake_tensor.fake_mode_with_shapes()  # data-dependent sizes (nonzero, x[mask]) get unbacked symbols
    model = copy.deepcopy(loaded.module) if real else _fake_copy(loaded.module, fake_mode)
    model.train()
    names = {}
    for path, sub in model.named_modules():
        if strip_module_prefix and path.startswith(strip_module_prefix):
            path = path[len(strip_module_prefix) :]
        names[id(sub)] = (path or None, f"{type(sub).__module__}.{type(sub).__qualname__}")
    state = _State(names)  # type: ignore[arg-type]
    state.real = real

    def first_call(module: Any, call_args: Any, call_kwargs: Any) -> None:
        if state.model_inputs is None:
            state.model_inputs = (_metas_of(call_args), _metas_of(call_kwargs))

    model.register_forward_pre_hook(first_call, with_kwargs=True)
    if real:
        args, kwargs = copy.deepcopy(loaded.args), copy.deepcopy(loaded.kwargs)
    else:
        args = _fake_inputs(loaded.args, fake_mode)
        kwargs = _fake_inputs(loaded.kwargs, fake_mode)
    get_optimizer = getattr(loaded, "get_optimizer", None)
    from neuronprobe.loaders.resolve import train_batch

    train_step = getattr(loaded, "train_step", None)
    notes: list[str] = []
    functions, record = _modes(state)
    with quiet_torch(), contextlib.nullcontext() if real else fake_mode:
        params = [p for p in model.parameters() if p.requires_grad]
        if get_optimizer is not None:
            try:
                optimizer, state.optimizer_site = _constructor_site(state, lambda: get_optimizer(model))
            except Exception as exc:
                raise _user_error("get_optimizer()", exc, loaded.source) from exc
            if not isinstance(optimizer, torch.optim.Optimizer):
                raise InputError(f"{loaded.source}: get_optimizer() returned {type(optimizer).__name__}, not a torch.optim.Optimizer")
        else:
            optimizer = build_optimizer(params, options.optimizer, options.optimizer_impl)
        loss_text = "train_step()"
        with _module_stack(state), functions, record:
            if train_step is not None:
                batch = train_batch(loaded, args, kwargs)  # what get_example_inputs() returned, in its own form
                try:
                    train_step(model, optimizer, batch)
                except InputError:
                    raise
                except Exception as exc:
                    raise _StepFailed(_user_error("train_step()", exc, loaded.source), exc, state) from exc
            else:
                try:
                    output = model(*args, **kwargs)
                except Exception as exc:
                    raise _StepFailed(_user_error("the model's forward", exc, loaded.source), exc, state) from exc
                loss, loss_text = _loss_of(output)
                if loaded.source.startswith("hf:") and "labels" in kwargs:
                    loss_text = "the transformers model's own loss (labels = input ids)"
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
        if not any(c.phase == Phase.BACKWARD for c in state.calls):
            notes.append("the training step ran no backward: train_step() never called loss.backward()")
    return TrainCapture(
        calls=state.calls,
        host_reads=_merge_reads(state.reads),
        loss=loss_text,
        optimizer=_optimizer_label(optimizer),
        train_step=train_step is not None,
        seconds=0.0,
        notes=notes,
        model_inputs=state.model_inputs,
        uploads=_merge_reads(state.uploads),
    )


def _metas_of(value: Any) -> Any:
    """A call's arguments with each tensor replaced by its TensorMeta (the fake tensors die with the step)."""
    import torch

    from neuronprobe._torch.pytree import tree_map

    return tree_map(lambda t: _tensor_metas(t)[0] if isinstance(t, torch.Tensor) else t, value)


def capture_step_forward(step: TrainCapture, loaded: Any, strip_module_prefix: str, capture: Callable[..., Any]) -> Any:
    """Export the model's forward with inputs shaped like those train_step() called it with.

    The inputs are zeros (or empty tensors on the meta device): a forward reads shapes,
    dtypes and control flow from them, not values. A step that never called the
    model leaves the forward to the step's own record.
    """
    import torch

    from neuronprobe._torch.pytree import tree_map
    from neuronprobe.capture.graph import OpGraph

    if step.model_inputs is None:
        return OpGraph(calls=[], method=STEP_CAPTURE)
    device = "meta" if loaded.on_meta else "cpu"

    def real(value: Any) -> Any:
        if isinstance(value, TensorMeta):
            return torch.zeros([int(s) for s in value.shape], dtype=getattr(torch, value.dtype), device=device)
        return value

    args, kwargs = tree_map(real, step.model_inputs, is_leaf=lambda v: isinstance(v, TensorMeta))
    with train_mode(loaded.module):
        return capture(loaded.module, tuple(args), dict(kwargs), strip_module_prefix)


def _merge_reads(reads: list[HostRead]) -> list[HostRead]:
    """One read per (kind, line): its count is how many times per step that line read."""
    merged: dict[tuple[str, str | None, int | None], HostRead] = {}
    for r in reads:
        key = (r.kind, r.file, r.line)
        if key in merged:
            merged[key].count += 1
        else:
            merged[key] = dataclasses.replace(r)
    return list(merged.values())


# --- findings, phases and the epoch ------------------------------------------------------------


def host_read_findings(reads: list[HostRead], graphs_without_reads: int, existing: list[Finding] | None = None) -> list[Finding]:
    """Each host read is a loop finding with what it costs per step and the fix.

    A read inside the model's forward whose line already has a finding (the forward capture's
    ``control_flow`` for an ``assert``/``if`` on a tensor) makes no second finding: that finding
    gains the read's per-step cost instead (one finding per line and problem)."""
    syncs = sum(r.count for r in reads)
    placed: dict[tuple[str | None, int | None], Finding] = {(f.file, f.line): f for f in existing or [] if f.line is not None}
    out = []
    for r in reads:
        if r.kind == "grad_scaler":
            out.append(
                Finding.at(
                    "grad-scaler-sync",
                    SourceLocation(relative_path(r.file), r.line),
                    HOST_READ_OP[r.kind],
                    "GradScaler.step reads found_inf on the host every step to decide whether to step "
                    f"(measured on torch-xla 2.9: one aten::_local_scalar_dense per step, with AdamW and with "
                    f"torch_xla.amp.syncfree.AdamW): a device sync, so each step runs as {graphs_without_reads + syncs} "
                    f"graph executions instead of {graphs_without_reads}",
                    source_line=r.source_line,
                    count=r.count,
                    bytes_per_call=r.nbytes,
                    shapes=r.shape,
                    phase=Phase.LOOP,
                )
            )
            continue
        what = {
            "item": ".item()",
            "print": "print/format of a tensor",
            "cpu": ".cpu()",
            "tolist": ".tolist()",
            "numpy": ".numpy()",
            "bool": "a Python truth test of a tensor",
            "float": "float(tensor)",
            "int": "int(tensor)",
        }[r.kind]
        cost = (
            f"reads {r.shape} on the host every step ({what}): torch-xla executes the pending graph first "
            f"(a device sync and a {r.nbytes}-byte device-to-host copy), so with the {syncs} host read(s) in this step "
            f"each step runs as {graphs_without_reads + syncs} graph executions instead of {graphs_without_reads}"
        )
        there = placed.get((relative_path(r.file), r.line)) if r.in_forward else None
        if there is not None:
            there.message += f"; in the training step this line is a host read: it {cost}"
            continue
        phase = Phase.FORWARD if r.in_forward else Phase.LOOP
        if r.branch:
            out.append(
                Finding.at(
                    "branch-on-metric",
                    SourceLocation(relative_path(r.file), r.line),
                    HOST_READ_OP[r.kind] if r.kind != "bool" else "<python branch on tensor value>",
                    f"a Python branch on a device value in the training step: {cost}",
                    source_line=r.source_line,
                    count=r.count,
                    bytes_per_call=r.nbytes,
                    shapes=r.shape,
                    phase=phase,
                )
            )
        else:
            out.append(
                Finding.at(
                    "host-read",
                    SourceLocation(relative_path(r.file), r.line),
                    HOST_READ_OP[r.kind],
                    cost,
                    source_line=r.source_line,
                    count=r.count,
                    bytes_per_call=r.nbytes,
                    shapes=r.shape,
                    phase=phase,
                )
            )
    return out


def phase_summaries(ops: list[Any], findings: list[Finding]) -> dict[Phase, PhaseSummary]:
    """Op calls, support % and findings per phase (only phases that have something)."""
    out: dict[Phase, PhaseSummary] = {}
    for phase in Phase:
        rows = [r for r in ops if r.phase == phase]
        found = [f for f in findings if f.phase == phase]
        if not rows and not found:
            continue
        counts = {v: sum(r.count for r in rows if r.verdict == v) for v in Verdict}
        total = sum(counts.values())
        supported = sum(counts[v] for v in SUPPORTED_VERDICTS)
        out[phase] = PhaseSummary(
            ops_total=total,
            support_percentage=round(100.0 * supported / total, 2) if total else 100.0,
            counts=counts,
            findings=len(found),
        )
    return out


def epoch_batches(options: TrainOptions, batch_sizes: list[int] | None) -> tuple[list[int], str] | None:
    """The batch sizes of one epoch, from --dataset-size/--batch-size or --batch-sizes."""
    if options.dataset_size is not None and options.batch_size is not None:
        full, rest = divmod(options.dataset_size, options.batch_size)
        sizes = [options.batch_size] * full + ([rest] if rest else [])
        return sizes, f"--dataset-size {options.dataset_size} --batch-size {options.batch_size}"
    if batch_sizes:
        return list(batch_sizes), "--batch-sizes " + ",".join(str(b) for b in batch_sizes)
    return None


def epoch_recompiles(sizes: list[int], source: str, seconds: float | None) -> RecompileSection:
    """Each distinct batch size is one more training-step graph; a short last batch is the usual one."""
    seen: dict[int, int] = {}
    for i, b in enumerate(sizes):
        seen.setdefault(b, i)
    full = Counter(sizes).most_common(1)[0][0]
    causes = [
        RecompileCause(
            reason=f"a batch of {b} rows instead of {full}: a new input shape, so torch-xla compiles the whole "
            "training step (forward, backward, optimizer) again",
            count=1,
            kind=CauseKind.PARTIAL_BATCH,
            input="batch",
            dim=0,
            fix=f"drop_last=True in the DataLoader, or pad the last batch to {full} rows and mask the padded rows out of the loss",
        )
        for b in seen
        if b != full
    ]
    graphs = len(seen)
    return RecompileSection(
        calls=len(sizes),
        distinct_signatures=graphs,
        predicted={
            "static": PolicyPrediction(
                graphs=graphs,
                compile_seconds=round(graphs * seconds, 3) if seconds else 0.0,
                first_seen=sorted(seen.values()),
                note="one training-step graph per batch size in the epoch",
            )
        },
        causes=causes,
        source=source,
    )


def train_info(capture: TrainCapture, options: TrainOptions, graphs_without_reads: int) -> TrainInfo:
    """The step's costs as torch-xla counts them (measured on torch-xla 2.9, CPU; see the README): each host read is
    one device-to-host transfer and one graph execution (the pending graph runs first: reading the same value twice
    runs it twice); an upload is a host-to-device copy that neither syncs nor executes a graph."""
    syncs = sum(r.count for r in capture.host_reads)
    return TrainInfo(
        loss=capture.loss,
        optimizer=capture.optimizer,
        train_step=capture.train_step,
        host_syncs_per_step=syncs,
        graphs_per_step=graphs_without_reads + syncs,
        seconds=round(capture.seconds, 3),
        uploads_per_step=sum(u.count for u in capture.uploads),
    )


def provenance() -> list[str]:
    return list(training_rules()[1])


__all__ = [
    "OPTIMIZERS",
    "OPTIMIZER_IMPLS",
    "HostRead",
    "TensorMeta",
    "TrainCapture",
    "TrainOptions",
    "capture_training",
    "check_options",
    "check_trainable",
    "classify_training",
    "epoch_batches",
    "epoch_recompiles",
    "host_read_findings",
    "phase_summaries",
    "train_info",
]


# --- preparing the forward for training ------------------------------------------------------


@contextmanager
def train_mode(module: Any) -> Iterator[None]:
    """The forward as it runs in training (dropout on, batch statistics), restored afterwards."""
    flags = [(m, m.training) for m in module.modules()]
    module.train()
    try:
        yield
    finally:
        for m, flag in flags:
            m.training = flag


def with_labels(loaded: Any) -> Any:
    """transformers models compute their own loss when given ``labels`` (the input ids, shifted inside)."""
    if not loaded.source.startswith("hf:") or "input_ids" not in loaded.kwargs or "labels" in loaded.kwargs:
        return loaded
    return dataclasses.replace(loaded, kwargs={**loaded.kwargs, "labels": loaded.kwargs["input_ids"]})


# --- observed: the same step on a live backend (xla-cpu) -------------------------------------

OBSERVED_ERROR_RULE = "observed-xla-error"  # the xla-cpu backend's rule for a program that raises on the device


def observe_training(live: LiveBackend, loaded: Any, options: TrainOptions, target: str, timeout: float, op_timeout: float) -> Observation:
    """The training step on the live backend (xla-cpu runs it; a backend that runs the forward only says so)."""
    choice = TrainProgramOptions(optimizer=options.optimizer, optimizer_impl=options.optimizer_impl)
    return live.observe_training(loaded, target, choice, timeout=timeout, op_timeout=op_timeout)


def place_observed(observation: Any, calls: list[Any], host_reads: list[HostRead]) -> None:
    """Give each observed finding its phase, and move backward ones to the forward line that produced them.

    torch-xla's recorder places a fallback at the innermost user frame, which for a
    backward op is the ``loss.backward()`` line; the prediction knows the forward line.
    """
    by_op: dict[str, list[OpCall]] = {}
    for c in calls:
        by_op.setdefault(c.call.op, []).append(c.call)
        by_op.setdefault(c.call.op.split(".", 1)[0], []).append(c.call)
    reads = {(relative_path(r.file), r.line): r for r in host_reads}
    fused = next((c.call for c in calls if c.verdict.rule == "fused-optimizer"), None)
    for f in observation.findings:
        if f.rule == OBSERVED_ERROR_RULE:
            if fused is not None and "fused" in f.message:
                f.op, f.phase = fused.op, Phase.OPTIMIZER
                f.fix = fused_fix()
                if f.line is None:
                    f.file, f.line, f.source_line = relative_path(fused.file), fused.line, fused.source_line
                observation.op_verdicts[fused.op] = f.verdict
            continue
        if (f.file, f.line) in reads:
            f.phase = Phase.FORWARD if reads[(f.file, f.line)].in_forward else Phase.LOOP
            continue
        candidates = [c for c in by_op.get(f.op, []) or by_op.get(f.op.split(".", 1)[0], []) if c.file]
        if f.phase is not Phase.FORWARD:  # the observer knew the phase (native-cpu: an autograd node ran): a call of that phase
            candidates = [c for c in candidates if c.phase == f.phase] or candidates
        if candidates:
            first = candidates[0]
            f.phase = first.phase
            if first.phase == Phase.BACKWARD:
                f.file, f.line, f.source_line = relative_path(first.file), first.line, first.source_line
                f.module = first.module
        elif "_backward" in f.op:
            f.phase = Phase.BACKWARD
        elif "_foreach_" in f.op or "_fused_" in f.op:
            f.phase = Phase.OPTIMIZER


def fused_fix() -> str:
    rules, _ = training_rules()
    table = f"training rules {_training_doc().get('version', '?')} (support/data/training_rules.json)"
    return find_rule(rules, "fused-optimizer", table).fix


def observed_train_info(info: TrainInfo, observation: Any) -> None:
    """What the step did on the XLA device, next to the prediction."""
    extra = getattr(observation, "extra", None) or {}
    if "graphs" not in extra:
        return
    transfers = extra.get("transfers") or {}  # torch-xla's own counters (xla_observe.transfer_counters)
    info.observed_graphs_per_step = int(transfers.get("executions", extra.get("graphs", 0)))
    info.observed_host_syncs_per_step = int(transfers.get("from_device", extra.get("host_syncs", 0)))
    if "to_device" in transfers:
        info.observed_uploads_per_step = int(transfers["to_device"])
    info.observed_compiles = int((extra.get("compiles") or {}).get("uncached", 0))
