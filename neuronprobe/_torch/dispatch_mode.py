"""``torch.utils._python_dispatch.TorchDispatchMode``: see every aten call while Python code runs.

Checked on torch 2.13.0. The xla-cpu worker (``backends/xla_observe.py``) imports
it itself under torch 2.9 and is left as it is.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from neuronprobe._torch.check import Check, MissingInternal, run_check

INTERNAL = "torch.utils._python_dispatch.TorchDispatchMode"
DEGRADES = "composite ops' parts and the training step's backward and optimizer ops"


def dispatch_mode_base() -> type:
    """The base class of a recording dispatch mode."""
    try:
        from torch.utils._python_dispatch import TorchDispatchMode
    except ImportError as exc:
        raise MissingInternal(INTERNAL, DEGRADES, str(exc)) from exc
    return TorchDispatchMode


@contextlib.contextmanager
def modes_skipped() -> Iterator[None]:
    """Ops inside reach their kernels directly, past every active dispatch mode (``torch._C._DisableTorchDispatch``,
    the guard behind ``torch.utils._mode_utils.no_dispatch``).

    The same kernels run as when a mode's handler calls the op itself, without the Python round trip per op:
    for measurements taken in the middle of a recorded or emulated forward on plain tensors. A torch without
    the guard runs them through the modes (slower, the same numbers: the caller's mode passes them on).
    """
    import torch

    guard = getattr(torch._C, "_DisableTorchDispatch", None)
    with guard() if guard is not None else contextlib.nullcontext():
        yield


def self_check() -> Check:
    def probe() -> None:
        import torch

        seen: list[object] = []
        base = dispatch_mode_base()

        class Record(base):  # type: ignore[valid-type,misc]
            def __torch_dispatch__(self, func: object, types: object, args: tuple[object, ...] = (), kwargs: dict[str, object] | None = None) -> object:
                seen.append(func)
                return func(*args, **(kwargs or {}))  # type: ignore[operator]

        with Record():
            torch.ones(2) + 1
        if torch.ops.aten.add.Tensor not in seen:
            raise MissingInternal(INTERNAL, DEGRADES, "a dispatch mode did not see aten.add.Tensor")

    return run_check(INTERNAL, DEGRADES, probe)
