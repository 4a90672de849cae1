"""``torch._C._current_autograd_node``: which backward node is running, so an op is placed in backward.

Checked on torch 2.13.0 (not used by the xla-cpu worker).
"""

from __future__ import annotations

from neuronprobe._torch.check import Check, MissingInternal, run_check

INTERNAL = "torch._C._current_autograd_node"
DEGRADES = "--train: backward ops placed at the forward line that created them"


def current_autograd_node() -> object | None:
    """The autograd node whose backward is running, or None outside a backward."""
    import torch

    fn = getattr(torch._C, "_current_autograd_node", None)
    if fn is None:
        raise MissingInternal(INTERNAL, DEGRADES, "torch._C has no _current_autograd_node")
    node: object | None = fn()
    return node


def self_check() -> Check:
    def probe() -> None:
        import torch

        seen: list[object | None] = []
        x = torch.ones(2, requires_grad=True)
        y = x * 2

        def hook(grad: torch.Tensor) -> torch.Tensor:
            seen.append(current_autograd_node())
            return grad

        y.register_hook(hook)
        y.sum().backward()
        if current_autograd_node() is not None or not seen or seen[0] is None:
            raise MissingInternal(INTERNAL, DEGRADES, "no node reported inside a backward hook")

    return run_check(INTERNAL, DEGRADES, probe)
