"""Family recipes as registered records: inputs a whole model family's forward takes that no config field names.

Most ``hf:`` inputs come from the config and the forward's signature (:func:`.make.make_inputs`), and the
repairs (:data:`.repairs.REPAIRS`) fix what the forward's own errors point at. Some families need inputs
that agree with each other in ways neither sees: SAM's prompts next to its image embeddings, patch grids
next to flattened patches, audio features next to their masks and lengths. A recipe knows one such family.

A recipe is a :class:`Recipe` record, made by the :func:`recipe` decorator in the module of its family of
inputs (:mod:`.segmentation`, :mod:`.grids`, :mod:`.audio`, :mod:`.image_text`, :mod:`.other`):

* what it matches: ``needs``, forward parameter names every model of the family has (checked before
  the builder runs); the builder itself checks the config (its class, or fields only that family sets);
* the facts it encodes: the builder's docstring, with ``sources``, the transformers files it names;
* its builder, taking one frozen :class:`RecipeContext`;
* ``priority``: recipes run in ascending priority, each seeing what the earlier ones made; on a clash
  the later (higher) recipe's input is the one kept.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from neuronprobe.loaders import fired
from neuronprobe.loaders.hf.inputs.primitives import InputPlan

# A transformers file or folder a docstring names: transformers/models/x/y.py, x/y.py, modeling_x.py, transformers/models/x/.
_SOURCE = re.compile(
    r"transformers/[\w/]+(?:\.py)?|\b\w+/\w+\.py|\b(?:modeling|processing|image_processing|configuration|generation|feature_extraction)_\w+\.py"
)


def _sources(doc: str) -> tuple[str, ...]:
    flat = " ".join(doc.split()).replace("/ ", "/")  # a path the docstring wraps after a slash
    return tuple(dict.fromkeys(_SOURCE.findall(flat)))


@dataclass(frozen=True)
class RecipeContext:
    """What a recipe sees: the model (``inner``), its config, its entry point's signature ``params``, the batch
    and sequence length asked for, the device the inputs go to, the inputs made so far, and the input plan the
    repairs refined."""

    inner: Any
    config: Any
    params: Mapping[str, inspect.Parameter]
    batch: int
    seq: int
    device: str
    inputs: Mapping[str, Any]
    plan: InputPlan


Builder = Callable[[RecipeContext], "dict[str, Any] | None"]


@dataclass(frozen=True)
class Recipe:
    """One family recipe (see the module docstring). Calling it runs the builder when the forward has every
    parameter the recipe ``needs``: the inputs to set, or None when the model is not of its family."""

    name: str
    family: str  # the module of its family of inputs
    build: Builder
    priority: int
    needs: frozenset[str] = frozenset()
    sources: tuple[str, ...] = ()  # the transformers files its docstring names

    @property
    def facts(self) -> str:
        return inspect.cleandoc(self.build.__doc__ or "")

    def matches(self, params: Mapping[str, Any]) -> bool:
        return all(name in params for name in self.needs)

    def __call__(self, ctx: RecipeContext) -> dict[str, Any] | None:
        return self.build(ctx) if self.matches(ctx.params) else None


_REGISTERED: dict[str, Recipe] = {}


def recipe(priority: int, needs: Iterable[str] = ()) -> Callable[[Builder], Recipe]:
    """Register the decorated builder as a :class:`Recipe` of its module's family."""

    def register(build: Builder) -> Recipe:
        if build.__name__ in _REGISTERED:
            raise ValueError(f"a family recipe named {build.__name__} is registered twice")
        if any(r.priority == priority for r in _REGISTERED.values()):
            raise ValueError(f"family recipe {build.__name__}: priority {priority} is taken; the order must be explicit")
        made = Recipe(
            name=build.__name__,
            family=build.__module__.rpartition(".")[2],
            build=build,
            priority=priority,
            needs=frozenset(needs),
            sources=_sources(build.__doc__ or ""),
        )
        _REGISTERED[made.name] = made
        return made

    return register


def registered() -> tuple[Recipe, ...]:
    """Every registered recipe, in the order they run."""
    return tuple(sorted(_REGISTERED.values(), key=lambda r: r.priority))


def family_inputs(ctx: RecipeContext) -> dict[str, Any]:
    """The inputs every recipe that knows this model's family sets, in priority order (later ones win on a clash)."""
    made: dict[str, Any] = {}
    for one in registered():
        found = one(dataclasses.replace(ctx, inputs={**ctx.inputs, **made}))
        if found:
            fired.recipe(one.name)  # the one recording point of the recipes that made a capture's inputs (the zoo tier)
            made.update(found)
    return made
