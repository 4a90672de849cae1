"""``torch._subclasses.fake_tensor``: run a training step on tensors that have shapes but no data.

Checked on torch 2.13.0 (not used by the xla-cpu worker). Used by ``--train`` and by the
``fake`` capture strategy (weights and inputs as fake CPU tensors, with a shape environment).

Besides ``FakeTensorMode``, the training capture recognises a ``.tolist()`` on a
fake tensor by its frame: the function ``tolist`` in ``fake_tensor.py``
(:data:`FAKE_TENSOR_FILE`), which reads element by element.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from neuronprobe._torch.check import Check, MissingInternal, run_check

INTERNAL = "torch._subclasses.fake_tensor.FakeTensorMode"
DEGRADES = "--train (the training step runs on fake tensors)"
FAKE_TENSOR_FILE = os.path.join("torch", "_subclasses", "fake_tensor.py")
TOLIST_INTERNAL = "torch._subclasses.fake_tensor.FakeTensor.tolist"
TOLIST_DEGRADES = "--train: one host read per .tolist() (each element is reported instead)"


def fake_mode() -> object:
    """A FakeTensorMode that accepts real tensors as inputs (the model's own buffers)."""
    try:
        from torch._subclasses.fake_tensor import FakeTensorMode
    except ImportError as exc:
        raise MissingInternal(INTERNAL, DEGRADES, str(exc)) from exc
    return FakeTensorMode(allow_non_fake_inputs=True)


def fake_mode_with_shapes() -> object:
    """A FakeTensorMode with a shape environment, so data-dependent ops (``nonzero``) get unbacked sizes;
    real CPU tensors the forward makes mix in. Used by the ``fake`` capture strategy."""
    try:
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.fx.experimental.symbolic_shapes import ShapeEnv
    except ImportError as exc:
        raise MissingInternal(INTERNAL, DEGRADES, str(exc)) from exc
    return FakeTensorMode(shape_env=ShapeEnv(), allow_non_fake_inputs=True)


def fake_cpu(mode: object, tensor: object) -> object:
    """A meta (or real) tensor as a fake tensor on the CPU under ``mode``: same shape and dtype, no storage."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensor

    assert isinstance(tensor, torch.Tensor)
    return FakeTensor(mode, tensor.detach().to("meta"), torch.device("cpu"))


def is_fake(value: object) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(value, FakeTensor)


def self_check() -> Check:
    def probe() -> None:
        import torch

        with fake_mode():  # type: ignore[attr-defined]
            t = torch.empty(3, 4)
        if tuple(t.shape) != (3, 4) or type(t).__name__ != "FakeTensor":
            raise MissingInternal(INTERNAL, DEGRADES, "a tensor made under the mode is not a FakeTensor of its shape")

    return run_check(INTERNAL, DEGRADES, probe)


def self_check_tolist() -> Check:
    def probe() -> None:
        from torch._subclasses.fake_tensor import FakeTensor

        code = FakeTensor.tolist.__code__
        if not code.co_filename.endswith(FAKE_TENSOR_FILE) or code.co_name != "tolist":
            raise MissingInternal(TOLIST_INTERNAL, TOLIST_DEGRADES, f"FakeTensor.tolist is defined in {code.co_filename}")

    return run_check(TOLIST_INTERNAL, TOLIST_DEGRADES, probe)


# --- module conversions of fake weights ----------------------------------------------------

SWAP_INTERNAL = "torch.utils.swap_tensors (nn.Module._apply on FakeTensor parameters)"
SWAP_DEGRADES = "the fake capture strategy on models whose forward calls module.to(dtype) (switch_transformers' router)"


def _same_fake(t1: object, t2: object) -> bool:
    """Two fake tensors that no observer can tell apart: same class, shape, strides, dtype, device, grad flag."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensor

    if not (isinstance(t1, FakeTensor) and isinstance(t2, FakeTensor)):
        return False
    assert isinstance(t1, torch.Tensor) and isinstance(t2, torch.Tensor)
    try:
        return (
            t1.shape == t2.shape
            and t1.stride() == t2.stride()
            and t1.dtype == t2.dtype
            and t1.device == t2.device
            and t1.layout == t2.layout
            and t1.requires_grad == t2.requires_grad
        )
    except Exception:  # a symbolic size that cannot be compared: not provably the same
        return False


def no_op_conversions_of_fakes() -> contextlib.AbstractContextManager[None]:
    """Inside the block, ``module.to(dtype)`` that changes nothing on fake weights is a no-op, as on real weights.

    Why: ``nn.Module._apply`` always swaps a FakeTensor parameter with
    ``torch.utils.swap_tensors`` (``or isinstance(param, FakeTensor)`` in
    torch/nn/modules/module.py, torch 2.13.0), and ``swap_tensors`` refuses any
    tensor with a weakref. Fake tensors always have one: FakeTensorMode memoises
    every fake tensor an op makes in a ``WeakValueDictionary``
    (``FakeTensorConverter.from_meta_and_device``), ``Parameter(fake)`` makes one
    through ``detach()``, and export's describer keys the weights in a
    ``WeakIdKeyDictionary``. So any forward that converts a submodule
    (switch_transformers' router: ``self.classifier = self.classifier.to(self.dtype)``)
    raises "Cannot swap t1 because it has weakref associated with it" under fake
    weights, although on real weights the same call, with the dtype it already
    has, changes nothing. Upstream: pytorch/pytorch#178584 and #196558 (open/closed
    fixes of ``test_fake_tensor.py::test_module_to``), not in torch 2.13.0.

    The swap is skipped only when the two tensors are fake and indistinguishable
    (same shape, strides, dtype, device, grad flag): a conversion that really
    changes a fake weight (bf16 -> f32) still goes to torch and may still fail,
    which the strategy then reports. Checked on torch 2.13.0. The original
    function is put back on the way out, exceptions included.
    """
    import torch.utils

    original = getattr(torch.utils, "swap_tensors", None)
    if original is None:
        raise MissingInternal(SWAP_INTERNAL, SWAP_DEGRADES, "torch.utils has no swap_tensors")
    return _swaps_skipped_when_same(original)


@contextlib.contextmanager
def _swaps_skipped_when_same(original: Any) -> Iterator[None]:
    import torch.utils

    def swap_tensors(t1: Any, t2: Any) -> None:
        if _same_fake(t1, t2):
            return
        original(t1, t2)

    torch.utils.swap_tensors = swap_tensors
    try:
        yield
    finally:
        torch.utils.swap_tensors = original


def self_check_swap() -> Check:
    """A fake Linear converted to the dtype it has inside the block; the original swap is back after it."""

    def probe() -> None:
        import torch
        import torch.utils

        mode = fake_mode_with_shapes()
        layer = torch.nn.Linear(2, 2, device="meta")
        for name, param in list(layer._parameters.items()):
            assert param is not None
            layer._parameters[name] = torch.nn.Parameter(fake_cpu(mode, param))
        before = torch.utils.swap_tensors
        with no_op_conversions_of_fakes():
            layer.to(torch.float32)
        if torch.utils.swap_tensors is not before:
            raise MissingInternal(SWAP_INTERNAL, SWAP_DEGRADES, "swap_tensors was not put back")

    return run_check(SWAP_INTERNAL, SWAP_DEGRADES, probe)
