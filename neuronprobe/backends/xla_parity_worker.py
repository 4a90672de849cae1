"""The xla-cpu worker's ``parity`` step (issue 25, point 6): the model in bf16 through torch-xla 2.9 on the CPU.

Runs in the worker's own interpreter (torch 2.9 + torch-xla), next to :mod:`xla_worker`, and
imports nothing from neuronprobe. The main process hands over the very weights and inputs its
fp32 reference used (``torch.save`` files, read back with ``weights_only=True``): the worker's
own random initialisation is replaced, so both sides compute the same model. The model and the
floating-point inputs are cast to bf16 (served in bf16, as NxD Inference serves), run on the XLA
CPU device, and every floating-point output tensor comes back as fp32 in a ``torch.save`` file,
in the order torch's pytree walks the output.
"""

from __future__ import annotations

from typing import Any


def _cast(value: Any, dtype: Any, device: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.to(device=device, dtype=dtype if value.is_floating_point() else value.dtype)
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, dtype, device) for v in value)
    if isinstance(value, dict):
        return {k: _cast(v, dtype, device) for k, v in value.items()}
    return value


def run_parity(loaded: Any, device: Any, options: dict[str, Any]) -> dict[str, Any]:
    """Load the weights and inputs, run the bf16 forward on ``device``, save the outputs; returns counts for the event."""
    import torch
    import torch_xla
    from torch.utils._pytree import tree_leaves

    state = torch.load(options["weights"], weights_only=True)
    module = loaded.module
    missing, unexpected = module.load_state_dict(state, strict=False)
    if unexpected or missing:
        raise RuntimeError(f"the weights do not fit the model built here (missing {list(missing)[:5]}, unexpected {list(unexpected)[:5]})")
    args, kwargs = torch.load(options["inputs"], weights_only=True)
    dtype = getattr(torch, options.get("dtype", "bfloat16"))
    module = module.to(dtype).to(device).eval()
    with torch.no_grad():
        out = module(*_cast(tuple(args), dtype, device), **_cast(dict(kwargs), dtype, device))
    torch_xla.sync()
    tensors = [t.detach().to("cpu").float() for t in tree_leaves(out) if isinstance(t, torch.Tensor) and t.is_floating_point()]
    torch.save(tensors, options["out"])
    return {"tensors": len(tensors), "torch": torch.__version__, "torch-xla": torch_xla.__version__}
