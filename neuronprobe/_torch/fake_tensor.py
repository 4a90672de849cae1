"""``torch._subclasses.fake_tensor``: run a training step on tensors that have shapes but no data.

Checked on torch 2.13.0 (not used by the xla-cpu worker). Used by ``--train`` and by the
``fake`` capture strategy (weights and inputs as fake CPU tensors, with a shape environment).

Besides ``FakeTensorMode``, the training capture recognises a ``.tolist()`` on a
fake tensor by its frame: the function ``tolist`` in ``fake_tensor.py``
(:data:`FAKE_TENSOR_FILE`), which reads element by element.
"""

from __future__ import annotations

import os

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
