"""The training step as a program for the torch-xla observation (``--train`` with a live backend).

Runs inside the interpreter that has torch-xla (the xla-cpu worker, torch 2.9): it
imports only torch and the standard library. :func:`train_program` builds what
:func:`neuronprobe.backends.xla_observe.observe` runs: one step of the user's
``train_step(model, optimizer, batch)`` when the model file defines it, else the
model's own loss (transformers models get ``labels``) or the sum of its float
outputs, backward, the optimizer's step and ``zero_grad``, all on the XLA device.
The optimizer is the file's ``get_optimizer(model)``, else the one named in the
options, built exactly as the static capture builds it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

DEFAULT_LR = 1e-3  # neuronprobe.training builds its optimizer here too
SGD_MOMENTUM = 0.9
_IMPLS = {"for-loop": {"foreach": False}, "foreach": {"foreach": True}, "fused": {"fused": True}}


@dataclass(frozen=True)
class TrainProgramOptions:
    """How the training program builds its optimizer when the model file has no ``get_optimizer``.

    Crosses to the worker as the request's ``program_options`` (a JSON object of these fields).
    """

    optimizer: str = "adamw"
    optimizer_impl: str = "for-loop"


def build_optimizer(params: list[Any], optimizer: str, impl: str) -> Any:
    import torch

    kwargs = _IMPLS[impl]
    if optimizer == "sgd":
        return torch.optim.SGD(params, lr=DEFAULT_LR, momentum=SGD_MOMENTUM, **kwargs)
    cls = {"adamw": torch.optim.AdamW, "adam": torch.optim.Adam}[optimizer]
    return cls(params, lr=DEFAULT_LR, **kwargs)


def _loss(output: Any) -> Any:
    import torch
    from torch.utils._pytree import tree_leaves

    tensors = [t for t in tree_leaves(output) if isinstance(t, torch.Tensor) and t.requires_grad and t.is_floating_point()]
    loss = tensors[0].sum()
    for t in tensors[1:]:
        loss = loss + t.float().sum()
    return loss


def train_program(loaded: Any, device: Any, options: TrainProgramOptions | None = None) -> Callable[[], Any]:
    """One training step of ``loaded`` on ``device``, its optimizer built as ``options`` say."""
    from neuronprobe.backends.xla_tensors import real_tensors, to_device
    from neuronprobe.loaders.resolve import train_batch

    options = options or TrainProgramOptions()
    module = loaded.module.to(device)
    module.train()
    args = to_device(real_tensors(loaded.args), device)
    kwargs = to_device(real_tensors(loaded.kwargs), device)
    if str(loaded.source).startswith("hf:") and "input_ids" in kwargs and "labels" not in kwargs:
        kwargs["labels"] = kwargs["input_ids"]
    get_optimizer = getattr(loaded, "get_optimizer", None)
    if get_optimizer is not None:
        optimizer = get_optimizer(module)
    else:
        params = [p for p in module.parameters() if p.requires_grad]
        optimizer = build_optimizer(params, options.optimizer, options.optimizer_impl)
    train_step = getattr(loaded, "train_step", None)

    params = list(module.parameters())

    def run() -> Any:
        # The updated parameters (and the loss) are what the step's last graph computes: returned,
        # they let observe() read that graph's HLO without compiling it (execute=False).
        if train_step is not None:
            batch = train_batch(loaded, args, kwargs)
            return [train_step(module, optimizer, batch), params]
        loss = _loss(module(*args, **kwargs))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return [loss, params]

    return run


__all__ = ["TrainProgramOptions", "build_optimizer", "train_program"]
