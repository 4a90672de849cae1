"""FAKE torch_xla.core.xla_model: xla_device() and mark_step()."""

from torch_xla import _lazy


def xla_device(n: int | None = None, devkind: str | None = None):
    return _lazy.device()


def mark_step(wait: bool = False) -> None:
    _lazy.mark_step()
