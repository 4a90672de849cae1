"""Tensors moved to the XLA device, meta tensors made real: shared by the xla-cpu worker's programs.

Also what the worker learns about a model's tensors before and while it runs on the device
(issue 33.7): where each parameter and buffer is registered (:func:`registrations`), which of
them cannot move to the device and why (:func:`move_problems`), and the calls that meet a known
torch-xla defect (:class:`DefectWatch`). Plain data goes back to the parent; the words are the
rule registry's (``support/data/builtin_rules.json``).

Runs inside the interpreter that has torch-xla (torch 2.9): imports only torch, lazily, and usercode.
"""

from __future__ import annotations

import contextlib
import sys
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from neuronprobe.usercode import user_frame

# Why a tensor cannot move to the device, as the parent names it (closed set).
MOVE_LAYOUT = "layout"  # sparse COO/CSR/CSC/BSR/BSC, mkldnn: no XLA storage
MOVE_SUBCLASS = "subclass"  # a tensor subclass torch-xla cannot wrap
MOVE_DTYPE = "dtype"  # a dtype the XLA device has no type for (complex32)
MOVE_OTHER = "other"


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


Registered = dict[str, tuple[str | None, int | None]]


@contextmanager
def registrations() -> Iterator[weakref.WeakKeyDictionary[Any, Registered]]:
    """While the model is built: the user's line that registers each parameter and buffer.

    ``self.w = nn.Parameter(...)`` goes through ``Module.register_parameter`` and
    ``self.register_buffer(...)`` is one: both are wrapped for the duration, in the worker's
    own interpreter only (it ends after this one model).
    """
    import torch

    table: weakref.WeakKeyDictionary[Any, Registered] = weakref.WeakKeyDictionary()
    module_class = torch.nn.Module
    original_buffer, original_parameter = module_class.register_buffer, module_class.register_parameter

    def note(module: Any, name: str) -> None:
        with contextlib.suppress(TypeError):  # a module class that cannot be weakly referenced: no line for it
            table.setdefault(module, {}).setdefault(name, user_frame(sys._getframe(2)))

    def register_buffer(self: Any, name: str, tensor: Any, persistent: bool = True) -> None:
        note(self, name)
        original_buffer(self, name, tensor, persistent)

    def register_parameter(self: Any, name: str, param: Any) -> None:
        note(self, name)
        original_parameter(self, name, param)

    module_class.register_buffer = register_buffer
    module_class.register_parameter = register_parameter
    try:
        yield table
    finally:
        module_class.register_buffer = original_buffer
        module_class.register_parameter = original_parameter


def _move_reason(tensor: Any) -> str:
    import torch

    if tensor.layout != torch.strided:
        return MOVE_LAYOUT
    if type(tensor) not in (torch.Tensor, torch.nn.Parameter) and not isinstance(tensor, getattr(torch.nn, "Buffer", ())):
        return MOVE_SUBCLASS
    if tensor.dtype == torch.complex32 or tensor.is_quantized:  # measured: complex32 has no XLA type (quint8 moves)
        return MOVE_DTYPE
    return MOVE_OTHER


def static_move_problems(module: Any, where: weakref.WeakKeyDictionary[Any, Registered] | None = None) -> list[dict[str, Any]]:
    """What :func:`move_problems` measures, predicted without a device: the parameters and buffers whose layout
    (sparse, mkldnn) or dtype (complex32) torch-xla 2.9 was measured to refuse (the device-move-* rules)."""
    import torch

    problems: list[dict[str, Any]] = []
    for prefix, sub in module.named_modules():
        owned = [("parameter", n, t) for n, t in sub.named_parameters(recurse=False)]
        owned += [("buffer", n, t) for n, t in sub.named_buffers(recurse=False)]
        for kind, name, tensor in owned:
            if tensor.layout == torch.strided and tensor.dtype != torch.complex32:
                continue
            file, line = (where or {}).get(sub, {}).get(name, (None, None))
            problems.append(
                {
                    "name": f"{prefix}.{name}" if prefix else name,
                    "kind": kind,
                    "owner": type(sub).__name__,
                    "reason": MOVE_LAYOUT if tensor.layout != torch.strided else MOVE_DTYPE,
                    "layout": str(tensor.layout).replace("torch.", ""),
                    "dtype": str(tensor.dtype).replace("torch.", ""),
                    "tensor_type": type(tensor).__name__,
                    "file": file,
                    "line": line,
                }
            )
    return problems


def move_problems(module: Any, device: Any, where: weakref.WeakKeyDictionary[Any, Registered] | None = None, *, keep: bool = False) -> list[dict[str, Any]]:
    """Each parameter and buffer that does not move to ``device``: tried one by one, as ``module.to`` would.

    Measured, not guessed: a tensor is listed only when its own ``.to(device)`` raises. Each
    entry names the tensor, its owner's class, why (layout, subclass, dtype), the line that
    registered it and the device's error (for the report's detail, never its message).

    ``keep`` (the observation, whose program calls ``module.to(device)`` next): the module is first
    moved whole, and stays there, so that each weight crosses to the device once. The copies this
    check made and dropped cost as much as the program's own move again: for a two-layer ``hf:llama``
    (2.5 GiB of weights, torch-xla 2.9 on CPU) 3.7 s here and 1.2-2.2 s in the program, against 2.2 s
    for the one move. Only when that move raises are the tensors tried one by one (those it moved stay
    moved: their ``.to(device)`` is then a no-op), to name each one the device refuses.
    """
    if keep:
        try:
            module.to(device)
            return []
        except Exception:  # a tensor the device refuses: named below
            pass
    problems: list[dict[str, Any]] = []
    for prefix, sub in module.named_modules():
        owned = [("parameter", n, t) for n, t in sub.named_parameters(recurse=False)]
        owned += [("buffer", n, t) for n, t in sub.named_buffers(recurse=False)]
        for kind, name, tensor in owned:
            try:
                tensor.detach().to(device)
            except Exception as exc:  # the device refused this tensor: data for the parent
                file, line = (where or {}).get(sub, {}).get(name, (None, None))
                problems.append(
                    {
                        "name": f"{prefix}.{name}" if prefix else name,
                        "kind": kind,
                        "owner": type(sub).__name__,
                        "reason": _move_reason(tensor),
                        "layout": str(tensor.layout).replace("torch.", ""),
                        "dtype": str(tensor.dtype).replace("torch.", ""),
                        "tensor_type": type(tensor).__name__,
                        "file": file,
                        "line": line,
                        "error": f"{type(exc).__name__}: {exc}"[:2000],
                    }
                )
    return problems


# --- known torch-xla defects, seen at the call (issue 33.7) -----------------------------------
# amax()/amin() with no dim (or dim=()) reduce over every dimension in torch; torch-xla 2.9 lowers
# them to a reduction over exactly the dims given, none, and returns the input unreduced (measured on
# torch-xla 2.9.0, PJRT_DEVICE=CPU; the rule's provenance names the source lines).
AMAX_NO_DIM = "xla-defect-amax-no-dim"


def _no_dim(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    dim = kwargs["dim"] if "dim" in kwargs else (args[1] if len(args) > 1 else ())
    return dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0)


class DefectWatch:
    """A torch-function mode that notes, at the user's line, each call that meets a known torch-xla defect."""

    def __init__(self) -> None:
        import torch

        self.sites: dict[tuple[str, str | None, int | None], dict[str, Any]] = {}
        self._checks = {
            torch.amax: (AMAX_NO_DIM, "aten::amax"),
            torch.Tensor.amax: (AMAX_NO_DIM, "aten::amax"),
            torch.amin: (AMAX_NO_DIM, "aten::amin"),
            torch.Tensor.amin: (AMAX_NO_DIM, "aten::amin"),
        }
        watch = self

        class _Mode(torch.overrides.TorchFunctionMode):
            def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None) -> Any:
                kwargs = kwargs or {}
                check = watch._checks.get(func)
                if check is not None and _no_dim(args, kwargs):
                    watch._note(*check)
                return func(*args, **kwargs)

        self._mode = _Mode()

    def _note(self, rule: str, op: str) -> None:
        file, line = user_frame(sys._getframe(2))
        site = self.sites.setdefault((rule, file, line), {"rule": rule, "op": op, "file": file, "line": line, "count": 0})
        site["count"] += 1

    def __enter__(self) -> DefectWatch:
        self._mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._mode.__exit__(*exc)

    def found(self) -> list[dict[str, Any]]:
        return list(self.sites.values())


__all__ = ["AMAX_NO_DIM", "DefectWatch", "move_problems", "real_tensors", "registrations", "static_move_problems", "to_device"]
