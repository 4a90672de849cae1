"""neuronprobe: a Neuron compile-and-fallback profiler.

The public API is imported lazily so that ``import neuronprobe`` (and the CLI's
``--help``) does not import torch, pandas or matplotlib.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = [
    "AnalyzeRequest",
    "GateFailed",
    "GateFailure",
    "Gates",
    "Report",
    "__version__",
    "analyze",
    "audit",
    "evaluate_gates",
    "load_report",
    "parity",
    "propose_buckets",
    "propose_decode_buckets",
    "propose_serving_plan",
    "run_request",
]

# The torchvision import hook (loaders/torchvision_ops.py) is not installed here: only while a model is
# built (loading.py, loaders/vision.py), so that importing neuronprobe (or its pytest plugin) changes nothing.

if TYPE_CHECKING:  # pragma: no cover
    from neuronprobe import audit, parity
    from neuronprobe.errors import GateFailed
    from neuronprobe.gates import GateFailure, Gates, evaluate_gates
    from neuronprobe.report.model import Report, load_report
    from neuronprobe.request import AnalyzeRequest, run_request
    from neuronprobe.request.api import analyze, propose_buckets, propose_decode_buckets
    from neuronprobe.shape_buckets.serving import propose_serving_plan
    from neuronprobe.version import __version__

_LAZY = {
    "__version__": ("neuronprobe.version", "__version__"),  # a bottom module, so that every layer can read it
    # The three commands that take a model or a repository, with their flags as keywords (neuronprobe.request.api).
    "analyze": ("neuronprobe.request.api", "analyze"),
    # `parity` and `audit` are packages too: each is callable (its __init__), so the name is the package either way.
    "parity": ("neuronprobe.parity", ""),
    "audit": ("neuronprobe.audit", ""),
    "GateFailed": ("neuronprobe.errors", "GateFailed"),
    "AnalyzeRequest": ("neuronprobe.request", "AnalyzeRequest"),
    "run_request": ("neuronprobe.request", "run_request"),
    "propose_buckets": ("neuronprobe.request.api", "propose_buckets"),  # the command's files and keywords, then shape_buckets'
    "propose_decode_buckets": ("neuronprobe.request.api", "propose_decode_buckets"),
    "propose_serving_plan": ("neuronprobe.shape_buckets.serving", "propose_serving_plan"),
    "load_report": ("neuronprobe.report.model", "load_report"),
    "Report": ("neuronprobe.report.model", "Report"),
    "evaluate_gates": ("neuronprobe.gates", "evaluate_gates"),
    "Gates": ("neuronprobe.gates", "Gates"),
    "GateFailure": ("neuronprobe.gates", "GateFailure"),
}


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext neuronprobe``: the ``%neuronprobe`` and ``%%neuronprobe`` magics (neuronprobe.notebook)."""
    from neuronprobe.notebook import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from neuronprobe.notebook import unload_ipython_extension as unload

    unload(ipython)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        imported = importlib.import_module(module)
        return getattr(imported, attr) if attr else imported
    raise AttributeError(f"module 'neuronprobe' has no attribute {name!r}")
