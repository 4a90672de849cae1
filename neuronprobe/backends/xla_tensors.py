"""Tensors moved to the XLA device, meta tensors made real: shared by the xla-cpu worker's programs.

Runs inside the interpreter that has torch-xla (torch 2.9): imports only torch, lazily.
"""

from __future__ import annotations

from typing import Any


def to_device(value: Any, device: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(to_device(v, device) for v in value)
    if isinstance(value, dict):
        return {k: to_device(v, device) for k, v in value.items()}
    return value


def real_tensors(value: Any) -> Any:
    """Meta tensors (shapes only) become zero-filled CPU tensors: the device needs values."""
    import torch

    if isinstance(value, torch.Tensor) and value.device.type == "meta":
        return torch.zeros(value.shape, dtype=value.dtype)
    if isinstance(value, (list, tuple)):
        return type(value)(real_tensors(v) for v in value)
    if isinstance(value, dict):
        return {k: real_tensors(v) for k, v in value.items()}
    return value


__all__ = ["real_tensors", "to_device"]
