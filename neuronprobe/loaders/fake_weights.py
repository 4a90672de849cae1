"""Fake weights and inputs: a model's tensors as fake CPU tensors under one fake mode (the fake capture
strategy, and a parent model run to record a component's inputs)."""

from __future__ import annotations

import dataclasses
from typing import Any


def fake_value(mode: Any, value: Any) -> Any:
    """Every tensor in ``value`` (nested lists, tuples, dicts) as a fake CPU tensor under ``mode``."""
    import torch

    from neuronprobe._torch.fake_tensor import fake_cpu

    if isinstance(value, torch.Tensor):
        return fake_cpu(mode, value)
    if isinstance(value, (list, tuple)):
        return type(value)(fake_value(mode, v) for v in value)
    if isinstance(value, dict):
        return {k: fake_value(mode, v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):  # bundled inputs (esmfold2's EsmFold2AtomInputs)
        return dataclasses.replace(value, **{f.name: fake_value(mode, getattr(value, f.name)) for f in dataclasses.fields(value) if f.init})
    return value


def fake_module(module: Any, mode: Any) -> Any:
    """The module's weights and buffers as fake CPU tensors under ``mode``, in place."""
    import torch

    from neuronprobe._torch.fake_tensor import fake_cpu

    for sub in module.modules():
        for name, param in list(sub._parameters.items()):
            if param is not None:
                sub._parameters[name] = torch.nn.Parameter(fake_cpu(mode, param), requires_grad=param.requires_grad)
        for name, buffer in list(sub._buffers.items()):
            if buffer is not None:
                sub._buffers[name] = fake_cpu(mode, buffer)
    return module
