"""The dispatcher's view of an op: ``torch._ops.OpOverload``, its kernels per dispatch key, its composite kernel.

Checked on torch 2.13.0 (not used by the xla-cpu worker).

Internals: ``torch._ops.OpOverload`` (what an FX node or a dispatch-mode call
targets), ``torch._C._dispatch_has_kernel_for_dispatch_key`` (does an op have a
CompositeImplicit/ExplicitAutograd kernel, i.e. does it decompose) and
``OpOverload._op_dk`` with ``torch._C.DispatchKey`` (run one kernel directly, to
see what a backend without its own kernel would be asked to lower).
"""

from __future__ import annotations

from neuronprobe._torch.check import Check, MissingInternal, run_check

INTERNAL = "torch._C._dispatch_has_kernel_for_dispatch_key"
OP_INTERNAL = "torch._ops.OpOverload"
DK_INTERNAL = "torch._ops.OpOverload._op_dk"
DEGRADES = "composite ops' parts (which aten ops a decomposing op becomes)"
OP_DEGRADES = "op capture (every aten call of the graph)"
COMPOSITE_IMPLICIT = "CompositeImplicitAutograd"
COMPOSITE_EXPLICIT = "CompositeExplicitAutograd"


def is_op_overload(target: object) -> bool:
    """True for an aten/custom op overload (FX targets and dispatched funcs); not Python builtins."""
    import torch

    overload = getattr(getattr(torch, "_ops", None), "OpOverload", None)
    if overload is None:
        raise MissingInternal(OP_INTERNAL, OP_DEGRADES, "torch._ops has no OpOverload")
    return isinstance(target, overload)


def has_kernel(qualname: str, key: str) -> bool:
    """Whether the op ``qualname`` (``aten::add.Tensor``) has a kernel registered for dispatch key ``key``."""
    import torch

    check = getattr(torch._C, "_dispatch_has_kernel_for_dispatch_key", None)
    if check is None:
        raise MissingInternal(INTERNAL, DEGRADES, "torch._C has no _dispatch_has_kernel_for_dispatch_key")
    try:
        return bool(check(qualname, key))
    except RuntimeError:  # an op the dispatcher does not know under that name
        return False


def call_composite_explicit(op: object, *args: object, **kwargs: object) -> object:
    """Run ``op``'s CompositeExplicitAutograd kernel directly."""
    import torch

    op_dk = getattr(op, "_op_dk", None)
    key = getattr(torch._C.DispatchKey, COMPOSITE_EXPLICIT, None)
    if op_dk is None or key is None:
        raise MissingInternal(DK_INTERNAL, DEGRADES, "OpOverload._op_dk or DispatchKey.CompositeExplicitAutograd is gone")
    return op_dk(key, *args, **kwargs)


def self_check() -> Check:
    def probe() -> None:

        if not has_kernel("aten::linear", COMPOSITE_IMPLICIT):
            raise MissingInternal(INTERNAL, DEGRADES, "aten::linear shows no CompositeImplicitAutograd kernel")

    return run_check(INTERNAL, DEGRADES, probe)


def self_check_overload() -> Check:
    def probe() -> None:
        import torch

        if not is_op_overload(torch.ops.aten.add.Tensor):
            raise MissingInternal(OP_INTERNAL, OP_DEGRADES, "aten.add.Tensor is not an OpOverload")

    return run_check(OP_INTERNAL, OP_DEGRADES, probe)


def self_check_op_dk() -> Check:
    def probe() -> None:
        import torch

        out = call_composite_explicit(torch.ops.aten.zeros_like.default, torch.ones(2))
        if not isinstance(out, torch.Tensor) or out.shape != (2,):
            raise MissingInternal(DK_INTERNAL, DEGRADES, "the explicit kernel of zeros_like returned something else")

    return run_check(DK_INTERNAL, DEGRADES, probe)
