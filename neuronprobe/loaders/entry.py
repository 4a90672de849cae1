"""Entry points beyond ``forward``: analyse ``model.generate(...)`` (or ``encode``, ``sample``) as the model.

A model file names the method with a module-level ``ENTRY = "generate"`` (``analyze --entry METHOD`` and
``neuronprobe.analyze(model, inputs, entry=...)`` override it); ``get_example_inputs()`` then gives that
method's arguments. The tracers, the xla-cpu worker and the training step all call a module, so the model is
wrapped in a module whose ``forward`` calls the method: its parameters are the model's, its module paths
are the model's under ``model.`` (stripped again by the capture, see :data:`MODULE_PREFIX`).

Imported by the xla-cpu worker (torch 2.9) through :mod:`neuronprobe.loaders.resolve`: plain ``torch.nn`` only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

ENTRY_NAME = "ENTRY"  # the model file's module-level name for the method to analyse
MODULE_PREFIX = "model."  # the wrapped model's module paths inside the wrapper


class EntryError(ValueError):
    """The named method does not exist on the model or is not callable: one sentence, said by the caller."""


def entry_module(model: Any, method: str) -> Any:
    """``model`` wrapped so that calling it runs ``model.<method>(*args, **kwargs)``; ``forward`` as it is."""
    import torch

    if method == "forward":
        return model
    if not method.isidentifier() or method.startswith("__"):
        raise EntryError(f"entry {method!r} is not a method name")
    target = getattr(model, method, None)
    if not callable(target):
        inherited = set(dir(torch.nn.Module))
        methods = sorted(n for n in dir(type(model)) if not n.startswith("_") and n not in inherited and callable(getattr(type(model), n, None)))
        known = f"; its own methods: {', '.join(methods[:8])}" if methods else ""
        raise EntryError(f"{type(model).__name__} has no method {method!r}{known}")

    class EntryPoint(torch.nn.Module):
        """Runs the model's ``{method}`` as its forward (neuronprobe's entry-point wrapper)."""

        def __init__(self) -> None:
            super().__init__()
            self.model = model
            self.entry = method

        def forward(self, *args: Any, **kwargs: Any) -> Any:
            return getattr(self.model, self.entry)(*args, **kwargs)

    wrapper = EntryPoint()
    wrapper.train(model.training)
    return wrapper


def entry_function(module: Any) -> Callable[..., Any] | None:
    """The method an entry-point wrapper runs (its function, for the tracer's stack anchors), else None."""
    entry = getattr(module, "entry", None)
    model = getattr(module, "model", None)
    if not isinstance(entry, str) or model is None:
        return None
    function = getattr(type(model), entry, None)
    import inspect

    return inspect.unwrap(function) if callable(function) else None
