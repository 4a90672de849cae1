"""The whole training step, captured: forward, loss, backward, optimizer step and the loop around them.

The forward is captured by :mod:`neuronprobe.capture.graph` as for inference. This
module runs ONE training step eagerly on fake tensors (``FakeTensorMode``: CPU
tensors with shapes and dtypes but no storage, so a 7B model costs no memory)
under the recorder (:mod:`neuronprobe.training.recorder`), which files every aten
op the step dispatches under its phase:

* ``backward``: ops the autograd engine runs, at the forward line whose gradient produced them.
* ``optimizer``: ops after the backward (gradient clipping, ``step()``,
  ``zero_grad()``), at the line that ran them, else where the optimizer was built.
* ``loop``: host reads in ``train_step`` (``.item()``, ``print``, ``.cpu()``,
  ``.tolist()``, a Python branch on a metric), answered with a stand-in value so the step runs on.
* ``forward``: ops of the loss computed outside the model (in ``train_step``).

Why eager on fake tensors and not a joint graph: torch-xla runs the backward
eagerly op by op (it traces lazily, it does not use AOTAutograd), so the ops it
must lower are exactly what eager autograd dispatches, in-place optimizer ops
included; and host reads only exist in the eager program.
"""

from __future__ import annotations

import contextlib
import copy
import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from types import FrameType
from typing import TYPE_CHECKING, TypeVar, cast

from neuronprobe._torch import fake_tensor
from neuronprobe.backends.train_program import build_optimizer  # the same optimizer the observed step builds
from neuronprobe.capture.graph import OpCall, OpGraph, TensorMeta, quiet_torch, relative_path, source_line, tensor_metas
from neuronprobe.errors import InputError
from neuronprobe.loaders.model import LoadedModel
from neuronprobe.training.options import TrainOptions
from neuronprobe.training.recorder import HostRead, StepSite, StepState, merge_reads, module_stack, recording_modes
from neuronprobe.training.step import check_trainable, loss_of, optimizer_label, step_error, train_mode
from neuronprobe.vocabulary import Phase, SourceLocation

if TYPE_CHECKING:
    import torch

STEP_CAPTURE = "train_step (eager, fake tensors)"

# A FakeTensorMode (neuronprobe._torch.fake_tensor): used here only as the context its tensors are made in.
FakeMode = AbstractContextManager[object]
T = TypeVar("T")

# How the forward of the model is captured (neuronprobe.capture.graph.capture): module, args, kwargs, module prefix.
ForwardCapture = Callable[["torch.nn.Module", tuple[object, ...], dict[str, object], str], OpGraph]


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
    # (args, kwargs) of the model's first call, tensors as TensorMeta: any values the model was called with
    model_inputs: tuple[tuple[object, ...], dict[str, object]] | None = None
    # host-to-device uploads in the step, one entry per line (``count`` per step): copies, not syncs (issue 33)
    uploads: list[HostRead] = field(default_factory=list)
    # the lines whose value the fake step could not know and that made it fail: the step then ran on real tensors
    undecided: list[str] = field(default_factory=list)


def capture_training(loaded: LoadedModel, options: TrainOptions, strip_module_prefix: str = "") -> TrainCapture:
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

    def __init__(self, error: Exception, cause: BaseException, state: StepState) -> None:
        super().__init__(str(error))
        self.error, self.cause, self.state = error, cause, state


def _module_names(model: torch.nn.Module, strip_module_prefix: str) -> dict[int, tuple[str | None, str]]:
    """id(module) -> (its path in the model, without the loader's prefix; its qualified type)."""
    names: dict[int, tuple[str | None, str]] = {}
    for path, sub in model.named_modules():
        if strip_module_prefix and path.startswith(strip_module_prefix):
            path = path[len(strip_module_prefix) :]
        names[id(sub)] = (path or None, f"{type(sub).__module__}.{type(sub).__qualname__}")
    return names


def _step_once(loaded: LoadedModel, options: TrainOptions, strip_module_prefix: str, real: bool) -> TrainCapture:
    """One step on fake tensors (``real=False``) or on a real copy of the model and the example batch."""
    fake_mode = cast(FakeMode, fake_tensor.fake_mode_with_shapes())  # data-dependent sizes (nonzero, x[mask]) get unbacked symbols
    model = copy.deepcopy(loaded.module) if real else _fake_copy(loaded.module, fake_mode)
    model.train()
    state = StepState(_module_names(model, strip_module_prefix), real)

    def first_call(module: torch.nn.Module, call_args: tuple[object, ...], call_kwargs: dict[str, object]) -> None:
        if state.model_inputs is None:
            state.model_inputs = (_metas_of(call_args), _metas_of(call_kwargs))

    model.register_forward_pre_hook(first_call, with_kwargs=True)
    if real:
        args, kwargs = copy.deepcopy(loaded.args), copy.deepcopy(loaded.kwargs)
    else:
        args, kwargs = _fake_inputs(loaded.args, fake_mode), _fake_inputs(loaded.kwargs, fake_mode)
    notes: list[str] = []
    with quiet_torch(), contextlib.nullcontext() if real else fake_mode:
        optimizer = _optimizer(loaded, model, options, state)
        loss_text = _run_step(loaded, model, optimizer, args, kwargs, state)
        if not any(c.phase == Phase.BACKWARD for c in state.calls):
            notes.append("the training step ran no backward: train_step() never called loss.backward()")
    return TrainCapture(
        calls=state.calls,
        host_reads=merge_reads(state.reads),
        loss=loss_text,
        optimizer=optimizer_label(optimizer),
        train_step=loaded.train_step is not None,
        seconds=0.0,
        notes=notes,
        model_inputs=state.model_inputs,
        uploads=merge_reads(state.uploads),
    )


def _optimizer(loaded: LoadedModel, model: torch.nn.Module, options: TrainOptions, state: StepState) -> torch.optim.Optimizer:
    """The model file's ``get_optimizer(model)`` (its line noted for the optimizer's ops), else the one ``options`` name."""
    import torch

    if loaded.get_optimizer is None:
        return build_optimizer([p for p in model.parameters() if p.requires_grad], options.optimizer, options.optimizer_impl)
    get_optimizer = loaded.get_optimizer
    try:
        optimizer, state.optimizer_site = optimizer_with_site(state, lambda: get_optimizer(model))
    except Exception as exc:
        raise step_error("get_optimizer()", exc, loaded.source) from exc
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise InputError(f"{loaded.source}: get_optimizer() returned {type(optimizer).__name__}, not a torch.optim.Optimizer")
    return optimizer


def _run_step(
    loaded: LoadedModel, model: torch.nn.Module, optimizer: torch.optim.Optimizer, args: tuple[object, ...], kwargs: dict[str, object], state: StepState
) -> str:
    """The step under the recorder: the file's ``train_step(model, optimizer, batch)``, else forward, the loss of
    the output, backward, ``step()`` and ``zero_grad()``. Returns how the report names the loss."""
    from neuronprobe.loaders.resolve import train_batch

    functions, record = recording_modes(state)
    with module_stack(state), functions, record:
        if loaded.train_step is not None:
            batch = train_batch(loaded, args, kwargs)  # what get_example_inputs() returned, in its own form
            try:
                loaded.train_step(model, optimizer, batch)
            except InputError:
                raise
            except Exception as exc:
                raise _StepFailed(step_error("train_step()", exc, loaded.source), exc, state) from exc
            return "train_step()"
        try:
            output = model(*args, **kwargs)
        except Exception as exc:
            raise _StepFailed(step_error("the model's forward", exc, loaded.source), exc, state) from exc
        loss, loss_text = loss_of(output)
        if loaded.source.startswith("hf:") and "labels" in kwargs:
            loss_text = "the transformers model's own loss (labels = input ids)"
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss_text


def optimizer_with_site(state: StepState, fn: Callable[[], object]) -> tuple[object, StepSite | None]:
    """Call ``get_optimizer`` and note the user's line that constructed the optimizer.

    Its name is one of the recorder's ``STEP_RUNNERS``: frames above it are not the model's code."""
    found: list[StepSite] = []

    import torch

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event != "call" or found or frame.f_code.co_name != "__init__":
            return
        caller = frame.f_back
        if isinstance(frame.f_locals.get("self"), torch.optim.Optimizer) and caller is not None and not state.is_library(caller.f_code.co_filename):
            file, line = caller.f_code.co_filename, caller.f_lineno
            found.append(StepSite(file, line, source_line(file, line), None, None))

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        result = fn()
    finally:
        sys.setprofile(previous)
    return result, found[0] if found else None


# --- fake copies -------------------------------------------------------------------------------


def _fake_copy(module: torch.nn.Module, fake_mode: FakeMode) -> torch.nn.Module:
    """A deep copy of ``module`` whose parameters and buffers are fake CPU tensors (no storage)."""
    import torch

    memo: dict[int, torch.Tensor] = {}
    with fake_mode:
        for t in [*module.parameters(), *module.buffers()]:
            empty = torch.empty(tuple(t.shape), dtype=t.dtype, device="cpu")
            memo[id(t)] = torch.nn.Parameter(empty, requires_grad=t.requires_grad) if isinstance(t, torch.nn.Parameter) else empty
    return copy.deepcopy(module, memo)


def _fake_inputs(value: T, fake_mode: FakeMode) -> T:
    """``value`` with each tensor replaced by an empty fake CPU tensor of its shape and dtype."""
    import torch

    from neuronprobe._torch.pytree import tree_map

    def convert(t: object) -> object:
        if not isinstance(t, torch.Tensor):
            return t
        with fake_mode:
            return torch.empty(tuple(t.shape), dtype=t.dtype, device="cpu")

    return tree_map(convert, value)


def _metas_of(value: T) -> T:
    """A call's arguments with each tensor replaced by its TensorMeta (the fake tensors die with the step)."""
    import torch

    from neuronprobe._torch.pytree import tree_map

    return tree_map(lambda t: tensor_metas(t)[0] if isinstance(t, torch.Tensor) else t, value)


def capture_step_forward(step: TrainCapture, loaded: LoadedModel, strip_module_prefix: str, capture: ForwardCapture) -> OpGraph:
    """Export the model's forward with inputs shaped like those train_step() called it with.

    The inputs are zeros (or empty tensors on the meta device): a forward reads shapes,
    dtypes and control flow from them, not values. A step that never called the
    model leaves the forward to the step's own record.
    """
    import torch

    from neuronprobe._torch.pytree import tree_map

    if step.model_inputs is None:
        return OpGraph(calls=[], method=STEP_CAPTURE)
    device = "meta" if loaded.on_meta else "cpu"

    def real(value: object) -> object:
        if isinstance(value, TensorMeta):
            return torch.zeros([int(s) for s in value.shape], dtype=getattr(torch, value.dtype), device=device)
        return value

    args, kwargs = tree_map(real, step.model_inputs, is_leaf=lambda v: isinstance(v, TensorMeta))
    with train_mode(loaded.module):
        return capture(loaded.module, tuple(args), dict(kwargs), strip_module_prefix)
