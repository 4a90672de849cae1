"""A forward's output as named tensors: what a frozen reference stores (parity.reference) and what the
live backend's child sends back (neuron_steps). Here, below both, so the backend need not import parity."""

from __future__ import annotations

from typing import Any


def named_outputs(output: Any) -> dict[str, Any]:
    """A model's output as ``{name: tensor}``: ``output`` for a lone tensor, ``output['logits']``,
    ``output[0]`` for the leaves of a dict, tuple or ModelOutput; non-tensor leaves are left out."""
    import torch

    from neuronprobe._torch.pytree import leaves_with_names

    def dense(t: Any) -> Any:  # a sparse output is compared and frozen by its values (safetensors and norms take strided tensors)
        return t if t.layout == torch.strided else t.to_dense()

    if isinstance(output, torch.Tensor):
        return {"output": dense(output)}
    return {f"output{path}": dense(leaf) for path, leaf in leaves_with_names(output) if isinstance(leaf, torch.Tensor)}


__all__ = ["named_outputs"]
