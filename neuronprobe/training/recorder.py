"""The recorder of one eager training step: which aten ops it dispatched, in which phase, and its host traffic.

Two modes run while the step runs, sharing one :class:`StepState`:

* a ``TorchFunctionMode`` sees tensor methods before they reach the (fake) data. A host read
  (``.item()``, ``print``, ``.cpu()``, ``.tolist()``, a Python branch on a metric) is recorded
  at the user's line and answered with a stand-in value so the step runs on; a host tensor moved
  to the device is an upload; ``backward()`` opens the backward phase; each call tags the
  autograd nodes it created with its site.
* a dispatch mode records every aten op (:func:`neuronprobe.capture.graph.describe_call`, the
  same record the composite replay makes) with its phase: in the backward, at the forward line
  whose gradient produced it (``torch._C._current_autograd_node()`` names the node being
  differentiated, anomaly mode's traceback trick without its cost); after the backward, the
  optimizer at the line that ran it, else where the optimizer was built.

The model's own forward is not recorded here: torch.export captures it with its graph and lines.
"""

from __future__ import annotations

import copy
import os
import re
import sys
import weakref
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, replace
from types import FrameType
from typing import TYPE_CHECKING, Any

from neuronprobe._torch import dispatcher, fake_tensor
from neuronprobe._torch.autograd_node import current_autograd_node
from neuronprobe._torch.dispatch_mode import dispatch_mode_base
from neuronprobe.capture.graph import OpCall, describe_call, source_line, tensor_metas
from neuronprobe.usercode import is_library, is_neuronprobe
from neuronprobe.vocabulary import Phase

if TYPE_CHECKING:
    import torch

_SITE_KEY = "neuronprobe_site"
_SKIP_NAMESPACES = ("prim", "profiler")
# torch frames between a tensor method and a TorchFunctionMode (Tensor.__repr__ -> handle_torch_function)
_FAKE_TENSOR_FILE = fake_tensor.FAKE_TENSOR_FILE
_DISPATCH_FILES = (os.path.join("torch", "overrides.py"), os.path.join("torch", "_tensor.py"), _FAKE_TENSOR_FILE)
# torch's GradScaler.step reads found_inf with .item() (grad_scaler.py, _maybe_opt_step) every step
_GRAD_SCALER_FILES = (os.path.join("torch", "amp", "grad_scaler.py"), os.path.join("torch", "cuda", "amp", "grad_scaler.py"))
_GRAD_SCALER_READS = frozenset({"_maybe_opt_step", "<genexpr>"})
# The functions of neuronprobe.training.capture that run the user's step: frames above them are not the model's code.
STEP_RUNNERS = frozenset({"capture_training", "optimizer_with_site"})
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

# A call's positional and keyword arguments as torch hands them to a mode: any Python value the op accepts.
Args = tuple[object, ...]
Kwargs = dict[str, object]
# An aten OpOverload (torch._ops, private, and torch is not type-checked here): its schema and namespace are read.
OpOverload = Any


@dataclass
class HostRead:
    """A read of a device value on the host, inside the training step (also an upload: ``kind == "upload"``)."""

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
class StepSite:
    """Where in the user's code something of the step happened, and the module that was running."""

    file: str | None
    line: int | None
    source_line: str | None
    module: str | None
    module_type: str | None


class StepState:
    """Shared by the two modes and the module hooks while one step runs."""

    def __init__(self, names: dict[int, tuple[str | None, str]], real: bool) -> None:
        self.names = names  # id(module) -> (path, type)
        self.model_inputs: tuple[tuple[object, ...], dict[str, object]] | None = None  # what train_step first called the model with
        self.last_tolist: FrameType | None = None  # the FakeTensor.tolist frame last recorded
        self.modules: list[tuple[str | None, str | None]] = []
        self.in_backward = False
        self.backward_done = False
        self.backward_site: StepSite | None = None
        self.optimizer_site: StepSite | None = None
        self.calls: list[OpCall] = []
        self.reads: list[HostRead] = []
        self.uploads: list[HostRead] = []
        self.guesses: list[StepSite] = []  # lines that read a value the fake tensors do not hold (a stand-in was used)
        self.real = real  # the step runs on real tensors: host reads return the real values
        # tensors that live on the host in the program (built from Python data with no device, and what is computed
        # from them alone), by id: reading them is no device sync, moving them to the device is an upload
        self._host: dict[int, weakref.ref[torch.Tensor]] = {}
        self._library: dict[str, bool] = {}

    def is_host(self, tensor: torch.Tensor) -> bool:
        ref = self._host.get(id(tensor))
        return ref is not None and ref() is tensor

    def mark_host(self, value: object) -> None:
        import torch

        from neuronprobe._torch.pytree import tree_leaves

        for t in tree_leaves(value):
            if isinstance(t, torch.Tensor):
                self._host[id(t)] = weakref.ref(t)

    def any_host(self) -> bool:
        """Some tensor of the step lives on the host (most steps have none: the check below is skipped)."""
        return bool(self._host)

    def all_host(self, values: object) -> bool:
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

    def read_origin(self) -> tuple[str, FrameType | None]:
        """Who asked for a value: ``"user"``, ``"grad_scaler"`` (torch's GradScaler reads found_inf,
        a device tensor, on the host) or ``"library"`` (e.g. the for-loop Adam's CPU step counter);
        and the outermost ``FakeTensor.tolist`` frame when the read is one element of a ``.tolist()``
        (a Python method of the fake tensor that reads element by element)."""
        frame: FrameType | None = sys._getframe(3)  # above this method, _on_host_read and the mode's hook
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

    def user_site(self) -> StepSite:
        """The innermost frame of the user's code on the live stack, and the module being run."""
        frame: FrameType | None = sys._getframe(1)
        while frame is not None and is_neuronprobe(frame.f_code.co_filename):
            frame = frame.f_back  # our own modes and hooks
        while frame is not None and self.is_library(frame.f_code.co_filename):
            if frame.f_code.co_name in STEP_RUNNERS and is_neuronprobe(frame.f_code.co_filename):
                frame = None  # reached neuronprobe's own step: the code above it is whoever called analyze()
                break
            frame = frame.f_back  # torch, and our own modes when a dispatch happens inside a torch function
        module = self.modules[-1] if self.modules else (None, None)
        if frame is None:
            return StepSite(None, None, None, module[0], module[1])
        file, line = frame.f_code.co_filename, frame.f_lineno
        return StepSite(file, line, source_line(file, line), module[0], module[1])


def stand_in(kind: str, tensor: torch.Tensor, args: Args, assertion: bool = False) -> object:
    """A plausible Python value for a host read of a fake tensor (fake tensors hold no data).

    Numbers read as 1, not 0: library code divides by what it reads (the for-loop
    Adam's bias correction reads its step counter); truth tests read False, except
    on an ``assert`` line, which states what holds for valid data: there it reads True.
    """
    import torch

    dtype = tensor.dtype
    zero: bool | float | int = False if dtype == torch.bool else (1.0 if dtype.is_floating_point or dtype.is_complex else 1)
    if kind == "bool" and assertion:
        return True
    if kind in ("item", "bool", "float", "int"):
        return {"bool": bool(zero), "float": float(zero), "int": int(zero)}.get(kind, zero)
    if kind == "tolist":
        value: object = zero
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


def _tag(outputs: object, site: StepSite) -> None:
    """Label every autograd node this call created with its site (older nodes are labelled already)."""
    import torch

    from neuronprobe._torch.pytree import tree_leaves

    stack = [t.grad_fn for t in tree_leaves(outputs) if isinstance(t, torch.Tensor) and t.grad_fn is not None]
    while stack:
        node = stack.pop()
        if node is None or _SITE_KEY in node.metadata or type(node).__name__ == "AccumulateGrad":
            continue
        node.metadata[_SITE_KEY] = site
        stack.extend(n for n, _ in node.next_functions)


def _on_host_read(state: StepState, kind: str, tensor: torch.Tensor, func: Callable[..., object], args: Args, kwargs: Kwargs) -> object:
    """A tensor method that moves ``tensor``'s value to the host: record it (when the user asked for a device value)
    and answer it, with the real value where there is one, else a stand-in."""
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
    return stand_in(kind, tensor, args, assertion=bool(site and site.source_line and _ASSERT_LINE.match(site.source_line)))


def _host_read_kind(name: str, args: Args, kwargs: Kwargs) -> str | None:
    """The kind of host read a tensor method is (``item``, ``print``, ``cpu``, ...), or None."""
    kind = _HOST_READS.get(name)
    if kind is None and name == "to" and _to_host(args, kwargs):
        kind = "cpu"
    return kind


def recording_modes(state: StepState) -> tuple[AbstractContextManager[object], AbstractContextManager[object]]:
    """The torch-function mode (host reads, uploads, the backward, autograd tags) and the dispatch mode
    (every aten op) that record one step into ``state``, entered in that order. The classes are built
    here, not at import: ``neuronprobe.training`` imports without torch."""
    import torch
    from torch.overrides import TorchFunctionMode

    class Functions(TorchFunctionMode):
        def __torch_function__(self, func: Callable[..., object], types: object, args: Args = (), kwargs: Kwargs | None = None) -> object:
            kwargs = kwargs or {}
            name = getattr(func, "__name__", "")
            kind = _host_read_kind(name, args, kwargs)
            tensor = args[0] if args and isinstance(args[0], torch.Tensor) else None
            if kind is not None and tensor is not None:
                return _on_host_read(state, kind, tensor, func, args, kwargs)
            if is_upload(name, tensor, args, kwargs, state):
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
            if name in _HOST_FACTORIES and _device_of(kwargs) is None:
                state.mark_host(out)  # torch.tensor([...]) with no device: built on the host
            elif state.any_host() and state.all_host((args, kwargs)):
                state.mark_host(out)  # computed from host tensors alone: still on the host
            if torch.is_grad_enabled() and current_autograd_node() is None:
                _tag(out, state.user_site())
            return out

    class Record(dispatch_mode_base()):  # type: ignore[misc]
        def __torch_dispatch__(self, func: OpOverload, types: object, args: Args = (), kwargs: Kwargs | None = None) -> object:
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            # On real tensors a host read dispatches aten::_local_scalar_dense: the read is recorded as a read, not an op.
            if dispatcher.is_op_overload(func) and func.namespace not in _SKIP_NAMESPACES and not (state.real and func.__name__.startswith(_HOST_READ_KERNEL)):
                _record_op(state, func, args, kwargs, out)
            return out

    return Functions(), Record()


def _is_cpu(device: object) -> bool:
    """A device written as the string ``"cpu"`` (``"cpu:0"``). A ``torch.device`` read from a tensor
    (``x.device``) says nothing in a fake step, where every tensor is a CPU tensor."""
    return isinstance(device, str) and device.split(":", 1)[0] == "cpu"


def _device_of(kwargs: Kwargs) -> object:
    """The ``device=`` a factory call names (None: the host)."""
    return kwargs.get("device")


def _to_host(args: Args, kwargs: Kwargs) -> bool:
    """``tensor.to("cpu")``: a device-to-host copy (``.to(x.device)`` keeps the tensor where it is)."""
    return any(_is_cpu(a) for a in [*args[1:], kwargs.get("device")])


def _moves_to_device(name: str, args: Args, kwargs: Kwargs) -> bool:
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


def is_upload(name: str, tensor: torch.Tensor | None, args: Args, kwargs: Kwargs, state: StepState) -> bool:
    """A host-to-device copy, as torch-xla counts one (``TransferToDeviceTime``, measured on torch-xla 2.9, see
    the README): a host tensor moved to the device, or ``torch.tensor``/``torch.as_tensor`` of Python data
    with a device (``torch.zeros``/``full``/``arange`` with a device are built on the device: no copy)."""
    if tensor is not None and state.is_host(tensor):
        return _moves_to_device(name, args, kwargs)
    if name in ("tensor", "as_tensor"):
        device = _device_of(kwargs)
        return device is not None and not _is_cpu(device)
    return False


def _record_upload(state: StepState, tensor: object) -> None:
    import torch

    site = state.user_site()
    if site.file is None:
        return
    meta = tensor_metas(tensor)[0] if isinstance(tensor, torch.Tensor) else None
    state.uploads.append(HostRead("upload", site.file, site.line, site.source_line, (meta.nbytes or 0) if meta else 0, False, str(meta or "")))


def _record_read(state: StepState, kind: str, tensor: torch.Tensor) -> None:
    site = state.user_site()
    if site.file is None:
        return
    branch = kind == "bool" or bool(site.source_line and _BRANCH_LINE.search(site.source_line))
    meta = tensor_metas(tensor)[0]
    state.reads.append(HostRead(kind, site.file, site.line, site.source_line, meta.nbytes or 0, branch, str(meta), in_forward=bool(state.modules)))


def _site_of(node: Any) -> StepSite | None:
    """The site a forward call tagged an autograd node with (``node``: a ``torch.autograd.graph.Node``, whose
    ``metadata`` torch does not type)."""
    found = node.metadata.get(_SITE_KEY)
    return found if isinstance(found, StepSite) else None


def _record_op(state: StepState, func: OpOverload, args: Args, kwargs: Kwargs, out: object) -> None:
    """One dispatched aten op, with its phase and the user's line it belongs to (``func``: an OpOverload)."""
    node = current_autograd_node()
    site: StepSite | None
    if node is not None or state.in_backward:
        phase = Phase.BACKWARD
        site = (_site_of(node) if node is not None else None) or state.backward_site
    elif state.backward_done:
        phase = Phase.OPTIMIZER
        site = state.user_site()
        if site.file is None and state.optimizer_site is not None:
            site = state.optimizer_site
    else:
        if state.modules:
            return  # the model's own forward: captured by torch.export with its graph and lines
        phase, site = Phase.FORWARD, state.user_site()
    call = describe_call(func, args, kwargs, out, len(state.calls))
    call.phase = phase
    if site is not None:
        call.file, call.line, call.source_line = site.file, site.line, site.source_line
        call.module, call.module_type = site.module, site.module_type
    state.calls.append(call)


@contextmanager
def module_stack(state: StepState) -> Iterator[None]:
    """Global forward hooks keep the path of the module running (removed afterwards)."""
    from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

    def pre(module: torch.nn.Module, args: object) -> None:
        state.modules.append(state.names.get(id(module), (None, None)))

    def post(module: torch.nn.Module, args: object, output: object) -> None:
        if state.modules:
            state.modules.pop()

    handles = [register_module_forward_pre_hook(pre), register_module_forward_hook(post, always_call=True)]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def merge_reads(reads: list[HostRead]) -> list[HostRead]:
    """One read per (kind, line): its count is how many times per step that line read."""
    merged: dict[tuple[str, str | None, int | None], HostRead] = {}
    for r in reads:
        key = (r.kind, r.file, r.line)
        if key in merged:
            merged[key].count += 1
        else:
            merged[key] = replace(r)
    return list(merged.values())
