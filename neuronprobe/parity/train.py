"""Training parity (issue 25, point 5): one training step in fp32 and under an emulated Neuron precision.

The step is the model file's ``train_step(model, optimizer, batch)`` with its
``get_optimizer(model)`` when it defines them, else what ``analyze --train`` runs
(:mod:`neuronprobe.training`): the model's own loss for ``hf:`` models (labels = the
input ids), else the sum of its float outputs; ``backward``; the optimizer named by
``--optimizer`` (built by :func:`neuronprobe.backends.train_program.build_optimizer`);
``step``; ``zero_grad``.

It runs twice from the same weights, inputs and seed: in fp32 (the reference), then with
the model served in the precision's dtype and every aten op of the whole step (forward,
the backward autograd runs, the optimizer's update) under the precision's emulation
(:class:`neuronprobe.parity.emulate.Emulator`), as neuronx-cc compiles the whole training
graph with the same ``--auto-cast``. Per parameter group (the parameters a module owns
directly) it compares the gradient (read when the optimizer's step begins: a hook, so a
``train_step`` that zeroes the gradients afterwards still shows them), the gradient norm
and the update (the parameters after the step minus before), and names the first group
whose gradient differs beyond tolerance. Groups are listed in the order autograd finished
their gradients in the fp32 run (post-accumulate-grad hooks): the first group that
differs in that order is where the error enters the backward pass, as the first module
that drifts is where it enters the forward.
"""

from __future__ import annotations

import contextlib
import copy
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from neuronprobe.errors import InputError, ModelLoadError
from neuronprobe.parity.precision import Precision
from neuronprobe.parity.reference import DEFAULT_TOLERANCES
from neuronprobe.report.schema.reference import ParamGroupCheck, TrainParity
from neuronprobe.training import TrainOptions

MODEL_GROUP = "(model)"  # the group of parameters the model itself owns (not a submodule)
DEFAULT_SEED = 0


def default_train_tolerance(precision: Precision) -> float:
    """The relative L2 error of a group's gradient above which it differs, by the precision's low type.

    bf16, fp16 and fp32 take the rtol of the project's per-dtype starting tolerances
    (:data:`neuronprobe.parity.reference.DEFAULT_TOLERANCES`); tf32 keeps fp16's 10 mantissa
    bits, so fp16's; fp8_e4m3 is bf16's scaled by the ratio of the two types' machine epsilons
    (``torch.finfo``: 2**-3 / 2**-7 = 16).
    """
    import torch

    low = precision.low_type
    by_name = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "tf32": "float16"}
    if low in by_name:
        return DEFAULT_TOLERANCES[by_name[low]][0]
    if low == "fp8_e4m3":
        ratio = torch.finfo(torch.float8_e4m3fn).eps / torch.finfo(torch.bfloat16).eps
        return DEFAULT_TOLERANCES["bfloat16"][0] * ratio
    raise InputError(f"no training tolerance for the low type {low!r}: give --tolerance")  # pragma: no cover - LowType is closed


@dataclass
class _Step:
    """What one training step left: the loss, each parameter's gradient and update, and the gradient order."""

    loss: float | None
    grads: dict[str, Any]
    updates: dict[str, Any]
    order: list[str]
    step: str
    notes: list[str] = field(default_factory=list)


@contextlib.contextmanager
def _emulating(precision: Precision | None, model: Any) -> Iterator[None]:
    """Every aten op inside (autograd's backward ops and the optimizer's included) under ``precision``.

    :func:`neuronprobe.parity.emulate.emulated` runs a forward without gradients; a training
    step needs them, so the same :class:`Emulator` is driven from a mode of our own here.
    """
    if precision is None or precision.is_fp32:
        yield
        return
    from neuronprobe._torch.dispatch_mode import dispatch_mode_base
    from neuronprobe.parity.emulate import Emulator

    emulator = Emulator(precision, list(model.parameters()))
    base = dispatch_mode_base()

    class Mode(base):  # type: ignore[valid-type,misc]
        def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None) -> Any:
            return emulator.dispatch(func, args, kwargs or {})

    with Mode():
        yield


def _as_float(value: Any) -> float | None:
    import torch

    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return float(value.detach().float())
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def _one_step(loaded: Any, precision: Precision | None, options: TrainOptions, seed: int) -> _Step:
    import torch

    from neuronprobe.backends.train_program import build_optimizer
    from neuronprobe.loaders.resolve import train_batch
    from neuronprobe.parity.emulate import served
    from neuronprobe.training.step import loss_of, optimizer_label, step_error, with_labels

    loaded = with_labels(loaded)
    model, args, kwargs = copy.deepcopy(loaded.module), copy.deepcopy(loaded.args), copy.deepcopy(loaded.kwargs)
    if precision is not None:
        model, args, kwargs = served(model, args, kwargs, precision)
    model.train()
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    before = {n: p.detach().clone() for n, p in named}
    order: list[str] = []
    handles = []
    for name, param in named:

        def finished(p: Any, name: str = name) -> None:
            if name not in order:
                order.append(name)

        handles.append(param.register_post_accumulate_grad_hook(finished))
    grads: dict[str, Any] = {}

    def before_step(optimizer: Any, a: Any, k: Any) -> None:
        if not grads:  # the first step of the call: what the backward left
            grads.update({n: p.grad.detach().clone() for n, p in named if p.grad is not None})

    get_optimizer = getattr(loaded, "get_optimizer", None)
    train_step = getattr(loaded, "train_step", None)
    if get_optimizer is not None:
        try:
            optimizer = get_optimizer(model)
        except Exception as exc:
            raise step_error("get_optimizer()", exc, loaded.source) from exc
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise InputError(f"{loaded.source}: get_optimizer() returned {type(optimizer).__name__}, not a torch.optim.Optimizer")
    else:
        optimizer = build_optimizer([p for _, p in named], options.optimizer, options.optimizer_impl)
    optimizer.register_step_pre_hook(before_step)
    torch.manual_seed(seed)  # dropout draws the same masks in both runs
    notes: list[str] = []
    try:
        with torch.enable_grad(), _emulating(precision, model):
            if train_step is not None:
                try:
                    loss = _as_float(train_step(model, optimizer, train_batch(loaded, args, kwargs)))
                except (InputError, ModelLoadError):
                    raise
                except Exception as exc:
                    raise step_error("train_step()", exc, loaded.source) from exc
                step = "train_step()"
            else:
                loss_tensor, text = loss_of(model(*args, **kwargs))
                loss = _as_float(loss_tensor)
                loss_tensor.backward()
                optimizer.step()
                optimizer.zero_grad()
                if "labels" in kwargs and str(loaded.source).startswith("hf:"):
                    text = "the transformers model's own loss (labels = input ids)"
                step = f"{text}, backward, {optimizer_label(optimizer)} step"
    except NotImplementedError as exc:  # what the emulation cannot model in a training step (attention dropout)
        hint = ": set the model's dropout to 0 (hf: --set attn_pdrop=0 or the config's attention_dropout)" if "dropout" in str(exc) else ""
        raise InputError(f"--train under {precision.label if precision else 'fp32'}: {exc}{hint}") from None
    finally:
        for handle in handles:
            handle.remove()
    if not grads:  # train_step() never called optimizer.step(): read what the backward left
        grads = {n: p.grad.detach().clone() for n, p in named if p.grad is not None}
        if grads:
            notes.append("train_step() never called optimizer.step(): gradients read after the step")
    if loss is None and train_step is not None:
        notes.append("train_step() returned no scalar loss: the loss is not compared")
    updates = {n: (p.detach() - before[n]).clone() for n, p in named}
    return _Step(loss, grads, updates, order, step, notes)


def _groups(loaded: Any) -> dict[str, str]:
    """Parameter name -> the path of the module that owns it directly; a tied parameter counts once, by its first name."""
    return {name: name.rsplit(".", 1)[0] if "." in name else MODEL_GROUP for name, _ in loaded.module.named_parameters()}


def _norm(t: Any) -> float:
    return float(t.double().norm()) if t is not None and t.numel() else 0.0


def _rel(diff: float, ref: float) -> float:
    if ref == 0.0:
        return 0.0 if diff == 0.0 else math.inf
    return diff / ref


def _group_check(group: str, names: list[str], ref: _Step, low: _Step, tolerance: float) -> ParamGroupCheck:
    import torch

    def flat(values: dict[str, Any]) -> Any:
        # a parameter without a gradient counts as zeros of its own size (the update always exists)
        parts = [values[n].double().reshape(-1) if n in values else torch.zeros(ref.updates[n].numel(), dtype=torch.float64) for n in names]
        return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.float64)

    g_ref, g_low = flat(ref.grads), flat(low.grads)
    u_ref, u_low = flat(ref.updates), flat(low.updates)
    nonfinite = int((~torch.isfinite(g_low)).sum())
    finite = torch.where(torch.isfinite(g_low), g_low, torch.zeros_like(g_low))
    grad_err = _rel(_norm(finite - g_ref), _norm(g_ref))
    update_err = _rel(_norm(torch.nan_to_num(u_low) - u_ref), _norm(u_ref))
    return ParamGroupCheck(
        group=group,
        parameters=list(names),
        grad_norm_ref=_norm(g_ref),
        grad_norm=_norm(g_low),
        grad_rel_error=grad_err,
        update_norm_ref=_norm(u_ref),
        update_norm=_norm(u_low),
        update_rel_error=update_err,
        nonfinite=nonfinite,
        exceeds=nonfinite > 0 or grad_err > tolerance,
    )


def train_parity(
    loaded: Any,
    precision: Precision,
    options: TrainOptions | None = None,
    *,
    tolerance: float | None = None,
    seed: int = DEFAULT_SEED,
) -> TrainParity:
    """One training step of ``loaded`` in fp32 and under ``precision``, compared per parameter group.

    ``loaded`` needs real weights (a model file, or a model the parity run built on the CPU).
    ``tolerance``: the relative L2 error of a group's gradient above which it differs (default:
    :func:`default_train_tolerance`). Raises :class:`InputError` for a model that cannot train.
    """
    from neuronprobe.training import check_trainable

    check_trainable(loaded.module, loaded.name)
    if tolerance is not None and not (math.isfinite(tolerance) and tolerance >= 0):
        raise InputError(f"--tolerance {tolerance}: use a number >= 0")
    limit = default_train_tolerance(precision) if tolerance is None else tolerance
    options = options or TrainOptions()
    ref = _one_step(loaded, None, options, seed)
    low = _one_step(loaded, precision, options, seed)
    owner = _groups(loaded)
    ordered = list(dict.fromkeys([*ref.order, *owner]))  # parameters without a gradient come last, in definition order
    by_group: dict[str, list[str]] = {}
    for name in ordered:
        if name in owner:
            by_group.setdefault(owner[name], []).append(name)
    groups = [_group_check(group, names, ref, low, limit) for group, names in by_group.items()]
    first = next((g.group for g in groups if g.exceeds), None)
    loss_err = None
    if ref.loss is not None and low.loss is not None:
        loss_err = _rel(abs(low.loss - ref.loss), abs(ref.loss)) if math.isfinite(low.loss) else math.inf
    notes = list(dict.fromkeys([*ref.notes, *low.notes]))
    if not ref.grads:
        notes.append("the step left no gradient to compare (no backward ran)")
    return TrainParity(
        precision=precision.label,
        step=ref.step,
        loss_ref=ref.loss,
        loss=low.loss,
        loss_rel_error=loss_err,
        tolerance=limit,
        groups=groups,
        first_exceeding=first,
        notes=notes,
    )


def train_parities(
    result: Any, precisions: Any, options: TrainOptions | None = None, *, tolerance: float | None = None, seed: int = DEFAULT_SEED
) -> list[TrainParity]:
    """``parity --train``: :func:`train_parity` for each precision of a parity run, on its model (real weights)
    and its first input (a training step takes one batch)."""
    import dataclasses

    args, kwargs = result.inputs[0]
    loaded = dataclasses.replace(result.loaded, args=tuple(args), kwargs=dict(kwargs))
    return [train_parity(loaded, p, options, tolerance=tolerance, seed=seed) for p in precisions if not p.is_fp32]


__all__ = ["MODEL_GROUP", "default_train_tolerance", "train_parities", "train_parity"]
