"""A ``neuron`` device name for the native-cpu stand-in: ``device="neuron"`` parses, and its tensors live on the CPU.

TorchNeuron registers its device as PrivateUse1 renamed ``neuron`` and its compiler as the dynamo backend
``"neuron"`` (``torch.compile(backend="neuron")``). A model written for it uses both; on a CPU-only torch
neither name exists (``torch.device("neuron")`` raises, ``torch.compile(backend="neuron")`` raises
``InvalidBackend``). The stand-in gives both names a meaning here:

* :func:`install_device` renames PrivateUse1 to ``neuron`` and registers Python stubs for the pieces torch's
  C++ side asks a backend for (a device guard, the PrivateUse1 hooks, a device module), through
  ``torch.utils.backend_registration._setup_privateuseone_for_python_backend`` (private; checked on torch
  2.13.0). It registers no kernel: every op that names the device is caught by the stand-in's dispatch mode,
  which replaces the device argument by the CPU (:func:`on_cpu`). A rename is once per process, so only the
  forked worker calls it.
* :func:`install_compile_backend` registers a dynamo backend ``"neuron"`` that runs the captured graph as
  it is (every op still reaches the dispatch mode) unless one is registered already (a real TorchNeuron).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from neuronprobe._torch.check import Check, MissingInternal, run_check

DEVICE = "neuron"
INTERNAL = "torch.utils.backend_registration._setup_privateuseone_for_python_backend"
DEGRADES = "'neuron' device strings in a model observed by the native-cpu backend"
COMPILE_INTERNAL = "torch._dynamo.register_backend"


def install_device() -> bool:
    """Name PrivateUse1 ``neuron`` in this process; False when PrivateUse1 already has another name (it stays)."""
    import torch

    current = torch._C._get_privateuse1_backend_name()
    if current == DEVICE:
        return True
    if current != "privateuseone":
        return False
    try:
        from torch.utils.backend_registration import _setup_privateuseone_for_python_backend
    except ImportError as exc:
        raise MissingInternal(INTERNAL, DEGRADES, str(exc)) from exc
    _setup_privateuseone_for_python_backend(rename=DEVICE)
    return True


def on_cpu(value: Any) -> Any:
    """A ``neuron`` device argument as the CPU (lists and tuples of them too); any other value as it is."""
    import torch

    if isinstance(value, torch.device) and value.type == DEVICE:
        return torch.device("cpu")
    if isinstance(value, str) and value.split(":", 1)[0] == DEVICE:
        return "cpu"
    if isinstance(value, (list, tuple)) and any(isinstance(v, (torch.device, str)) for v in value):
        return type(value)(on_cpu(v) for v in value)
    return value


def install_compile_backend() -> bool:
    """Register the dynamo backend ``"neuron"`` as "run the graph as captured"; False when one exists already."""
    try:
        from torch._dynamo import list_backends, register_backend
    except ImportError as exc:
        raise MissingInternal(COMPILE_INTERNAL, "torch.compile(backend='neuron') in a model analysed without TorchNeuron", str(exc)) from exc
    if DEVICE in list_backends(exclude_tags=()):
        return False

    def neuron(gm: Any, example_inputs: Any) -> Any:  # the graph runs as dynamo captured it; its ops reach the dispatch mode
        return gm.forward

    neuron.__neuronprobe_stand_in__ = True  # type: ignore[attr-defined]  # neuronprobe's, not TorchNeuron's
    register_backend(neuron, name=DEVICE)
    return True


def remove_compile_backend() -> None:
    """Take neuronprobe's pass-through ``"neuron"`` backend out of dynamo's registry (``torch._dynamo.backends.registry``,
    private; checked on torch 2.13.0); a backend someone else registered under the name stays."""
    from torch._dynamo.backends import registry

    if getattr(registry._COMPILER_FNS.get(DEVICE), "__neuronprobe_stand_in__", False):
        del registry._COMPILER_FNS[DEVICE]
        registry._BACKENDS.pop(DEVICE, None)


@contextlib.contextmanager
def compile_backend_scope() -> Iterator[None]:
    """The pass-through ``"neuron"`` backend for one analysis: the user's process is left as it was (a later
    ``torch.compile(backend="neuron")`` without TorchNeuron raises there again, as it should)."""
    added = install_compile_backend()
    try:
        yield
    finally:
        if added:
            remove_compile_backend()


def self_check() -> Check:
    def probe() -> None:
        import torch
        from torch.utils import backend_registration

        if not hasattr(backend_registration, "_setup_privateuseone_for_python_backend"):
            raise MissingInternal(INTERNAL, DEGRADES, "torch.utils.backend_registration has no _setup_privateuseone_for_python_backend")
        if not hasattr(torch._C, "_acc") or not hasattr(torch._C._acc, "register_python_privateuseone_device_guard"):
            raise MissingInternal(INTERNAL, DEGRADES, "torch._C._acc.register_python_privateuseone_device_guard is missing")

    return run_check(INTERNAL, DEGRADES, probe)
