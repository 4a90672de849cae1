"""Resolve TorchNeuron's registrations through torch's own dispatch table.

A name TorchNeuron registers for the ``PrivateUse1`` key is only a fact about
the device once it is matched to a real operator overload: ``aten_lib.impl("div",
..., "PrivateUse1")`` names the default overload of ``div``, which does not exist,
so it covers no call (field-2026-12.md, addendum). Every other aten overload that
reaches the key without a Neuron kernel runs through TorchNeuron's boxed CPU
fallback, unless torch gives it a kernel of its own first:

* CompositeImplicitAutograd: the op decomposes before any backend key (it is not
  in the table; the analysis judges its parts);
* CompositeExplicitAutograd(NonFunctional): a backend-independent kernel runs on
  the device and its inner ops dispatch again (``composite``);

and a registered Neuron kernel wins over both. Used by ``scripts/build_native_table.py``
(the bundled table) and ``neuronprobe setup native-table`` (a Neuron host's own).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from neuronprobe._torch import dispatch_table

IMPLICIT = "CompositeImplicitAutograd"
EXPLICIT = ("CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional")


@dataclass
class Resolved:
    """Every aten overload that can reach the device key, by what happens to it there."""

    neuron_kernel: list[str] = field(default_factory=list)
    registered_cpu_fallback: list[str] = field(default_factory=list)
    composite: list[str] = field(default_factory=list)
    no_kernel: list[str] = field(default_factory=list)
    unmatched: list[str] = field(default_factory=list)  # registered names that name no overload
    decomposes: int = 0  # CompositeImplicitAutograd overloads (never reach the key)


def op_key(name: str) -> str:
    """``aten::add.Tensor`` -> ``add.Tensor``; ``aten::relu`` -> ``relu`` (the capture's ``OpCall.key``)."""
    return name.removeprefix("aten::")


def resolve(registered: Iterable[str], cpu_fallbacks: Iterable[str] = ()) -> Resolved:
    """Classify every aten overload of the installed torch against TorchNeuron's registered names."""
    names = dispatch_table.aten_op_names()
    known = {op_key(n) for n in names}
    kernels = {op_key(r) for r in registered if r.startswith("aten::") or "::" not in r}
    fallbacks = {op_key(r) for r in cpu_fallbacks}
    out = Resolved(unmatched=sorted((kernels | fallbacks) - known))
    for name in names:
        key, qualified = op_key(name), name
        if key in kernels:
            out.neuron_kernel.append(key)
        elif key in fallbacks:
            out.registered_cpu_fallback.append(key)
        elif dispatch_table.has_kernel(qualified, IMPLICIT):
            out.decomposes += 1
        elif any(dispatch_table.has_kernel(qualified, k) for k in EXPLICIT):
            out.composite.append(key)
        else:
            out.no_kernel.append(key)
    return out
