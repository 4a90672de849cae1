"""The parts of one eager training step that the capture and the parity run share.

Whether a model can train at all, the loss of a model without a ``train_step``, how an
optimizer is named in the report, the error a user's step raises, and the forward as it
runs in training. :mod:`neuronprobe.parity.train` runs the same step on real tensors, so
both say the same thing about the same model.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from neuronprobe.capture.graph import relative_path, tensor_metas, user_frame_from_traceback
from neuronprobe.errors import InputError, ModelLoadError
from neuronprobe.loaders.model import LoadedModel
from neuronprobe.vocabulary import SourceLocation

if TYPE_CHECKING:
    import torch


def check_trainable(module: torch.nn.Module, name: str) -> None:
    """A traced/scripted module or one without trainable parameters cannot be trained (exit 2)."""
    import torch

    if isinstance(module, torch.jit.ScriptModule):
        raise InputError(
            f"{name}: --train needs a torch.nn.Module with parameters to train; this model is a "
            f"{type(module).__name__} (a traced or scripted module is eval-only): return the nn.Module itself from get_model()"
        )
    if not any(p.requires_grad for p in module.parameters()):
        raise InputError(f"{name}: --train needs a torch.nn.Module with parameters to train; {type(module).__name__} has no parameter with requires_grad=True")


def loss_of(output: object) -> tuple[torch.Tensor, str]:
    """The training loss of a model's output (any nesting of tensors): a scalar output as it is, else the
    sum of its float outputs; and how the report describes it."""
    import torch

    from neuronprobe._torch.pytree import leaves_with_names

    tensors = [(path or "output", t) for path, t in leaves_with_names(output) if isinstance(t, torch.Tensor)]
    usable = [(n, t) for n, t in tensors if t.requires_grad and (t.dtype.is_floating_point or t.dtype.is_complex)]
    if not usable:
        names = ", ".join(f"the model's output{n if n != 'output' else ''} ({tensor_metas(t)[0]})" for n, t in tensors) or "the model's output (not a tensor)"
        raise InputError(
            f"--train: {names} has no gradient path to the parameters (no float output with requires_grad): "
            "return a float tensor computed from the parameters, or define train_step(model, optimizer, batch)"
        )
    loss = usable[0][1].sum()
    for _, t in usable[1:]:
        loss = loss + t.float().sum()
    return loss, "the sum of the outputs" if tensors and tensors[0][1].dim() else "the model's scalar output"


def optimizer_label(optimizer: torch.optim.Optimizer) -> str:
    """``torch.AdamW (for-loop)``: the optimizer's class and the implementation its first group runs."""
    group = optimizer.param_groups[0] if optimizer.param_groups else {}
    impl = "fused" if group.get("fused") else "foreach" if group.get("foreach") else "for-loop"
    return f"{type(optimizer).__module__.split('.')[0]}.{type(optimizer).__name__} ({impl})"


def step_error(where: str, exc: BaseException, source: str) -> ModelLoadError:
    """The one sentence for an exception the user's code raised in the step: at the user's line when the
    traceback has one, else at the model's source; ``where`` names what raised (``train_step()``)."""
    file, line, _ = user_frame_from_traceback(exc)
    place = str(SourceLocation(relative_path(file), line)) if file else source
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return ModelLoadError(f"{place}: {where} raised {type(exc).__name__}: {first}")


@contextmanager
def train_mode(module: torch.nn.Module) -> Iterator[None]:
    """The forward as it runs in training (dropout on, batch statistics), restored afterwards."""
    flags = [(m, m.training) for m in module.modules()]
    module.train()
    try:
        yield
    finally:
        for m, flag in flags:
            m.training = flag


def with_labels(loaded: LoadedModel) -> LoadedModel:
    """transformers models compute their own loss when given ``labels`` (the input ids, shifted inside)."""
    if not loaded.source.startswith("hf:") or "input_ids" not in loaded.kwargs or "labels" in loaded.kwargs:
        return loaded
    return dataclasses.replace(loaded, kwargs={**loaded.kwargs, "labels": loaded.kwargs["input_ids"]})
