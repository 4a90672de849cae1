"""The dispatcher's whole table: every aten op it knows, and what a dispatch key has registered.

Checked on torch 2.13.0 (not used by the xla-cpu worker).

Internals: ``torch._C._dispatch_get_all_op_names`` (every operator the dispatcher
holds, ``aten::add.Tensor``; the default overload has no dot) and
``torch._C._dispatch_get_registrations_for_dispatch_key`` (what one key, such as
TorchNeuron's ``PrivateUse1``, registers: TorchNeuron's own ``tools/list-implemented-ops``
reads the same). The native support table is resolved through them: an op with a
CompositeImplicitAutograd kernel never reaches the backend's key, so it takes its
decomposition's verdict (:func:`neuronprobe._torch.dispatcher.has_kernel`).
"""

from __future__ import annotations

from neuronprobe._torch.check import Check, MissingInternal, run_check
from neuronprobe._torch.dispatcher import has_kernel

ALL_INTERNAL = "torch._C._dispatch_get_all_op_names"
REG_INTERNAL = "torch._C._dispatch_get_registrations_for_dispatch_key"
DEGRADES = "the native (TorchNeuron) support table: which aten ops reach the neuron device's key"

__all__ = ["PROBE_SCRIPT", "aten_op_names", "has_kernel", "registrations", "self_check"]


def aten_op_names() -> list[str]:
    """Every ``aten::`` operator overload the installed torch's dispatcher knows, sorted."""
    import torch

    names = getattr(torch._C, "_dispatch_get_all_op_names", None)
    if names is None:
        raise MissingInternal(ALL_INTERNAL, DEGRADES, "torch._C has no _dispatch_get_all_op_names")
    return sorted(n for n in names() if n.startswith("aten::"))


def registrations(key: str) -> list[str]:
    """The operators with a kernel registered for dispatch key ``key`` (``PrivateUse1`` on a Neuron host)."""
    import torch

    get = getattr(torch._C, "_dispatch_get_registrations_for_dispatch_key", None)
    if get is None:
        raise MissingInternal(REG_INTERNAL, DEGRADES, "torch._C has no _dispatch_get_registrations_for_dispatch_key")
    return sorted(str(n) for n in get(key))


def self_check() -> Check:
    def probe() -> None:
        names = aten_op_names()
        if "aten::add.Tensor" not in names:
            raise MissingInternal(ALL_INTERNAL, DEGRADES, "aten::add.Tensor is not among the dispatcher's op names")
        if "aten::add.Tensor" not in registrations("CPU"):
            raise MissingInternal(REG_INTERNAL, DEGRADES, "the CPU key shows no registration for aten::add.Tensor")

    return run_check(ALL_INTERNAL, DEGRADES, probe)


# Run by ``neuronprobe setup native-table`` in a separate interpreter on a Neuron host: importing
# torch_neuronx registers its kernels, then the dispatcher lists what the PrivateUse1 key holds
# (the same call as TorchNeuron's tools/list-implemented-ops). Prints one JSON object.
PROBE_SCRIPT = """
import json, torch
import torch_neuronx
print(json.dumps({
    "registrations": sorted(str(n) for n in torch._C._dispatch_get_registrations_for_dispatch_key("PrivateUse1")),
    "torch_neuronx": str(getattr(torch_neuronx, "__version__", "")),
    "torch": torch.__version__,
    "fake": bool(getattr(torch_neuronx, "__neuronprobe_fake__", False)),
}))
"""
