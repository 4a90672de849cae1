"""The LoadedModel: what the analyses need from a model, however it was given (a file, ``hf:``, ``tv:``, ``timm:``).

Bottom of the loaders: it imports nothing from neuronprobe, so every loader can return one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class LoadedModel:
    """What the analyses need from a model, however it was given."""

    name: str
    source: str
    module: Any  # torch.nn.Module
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    make_inputs: Callable[[int, int], Any] | None = None
    sample_inputs: Callable[[], Iterable[Any]] | None = None
    path: Path | None = None
    on_meta: bool = False
    # --train: the model file's optional train_step(model, optimizer, batch) and get_optimizer(model)
    train_step: Callable[..., Any] | None = None
    get_optimizer: Callable[[Any], Any] | None = None
    overrides: list[str] = field(default_factory=list)  # hf: --set KEY=VALUE, for a worker that rebuilds the model
    notes: list[str] = field(default_factory=list)  # how the model was built where it differs from what was asked
    assume_sizes: bool = False  # fake capture: branches on data-dependent sizes are followed with an assumed size
    input_plan: dict[str, Any] | None = None  # hf: the input repairs the capture needed, for a worker that rebuilds the inputs
    # The container get_example_inputs() returned ("tuple", "list", "dict", "tensor"): --train hands train_step
    # the batch in that very form (a one-element tuple stays a tuple). None: a model not from a file.
    inputs_form: str | None = None
    # The method analysed when it is not forward (ENTRY in the model file, --entry; loaders/entry.py): the
    # module is then the wrapper that calls it, and a worker that rebuilds the model wraps it the same way.
    entry: str | None = None
    # hf: shrunk: what the full-depth build has that the shrunken one lacks (module classes, layer kinds); empty when
    # every kind was kept, so the shrunken copy's op kinds hold for the real model
    kinds_lost: tuple[str, ...] = ()
    # --path DIRs: package roots the model file imports from (its own folder comes first, as `python model.py`
    # puts it), for a worker that imports the model file again in another interpreter.
    import_paths: tuple[str, ...] = ()
    # Where each parameter and buffer was registered while the model was built (module -> {name: (file, line)};
    # backends.xla_tensors.registrations), for a finding at the line of a tensor the device cannot hold.
    registered: Any = None
