"""The one search for inputs a forward takes: make inputs from a plan, run, learn from the failure, retry.

Every caller that runs an ``hf:`` forward on inputs it made goes through :func:`search`: each capture
strategy (capture_strategies.capture_hf), the check that blames ``--set`` values (check_input_blame),
and the parent model run to record a component's inputs (:mod:`.parent`). What differs between them
is what one attempt is (:class:`Step`) and what may be learned from its failure (a :data:`Learn`):
the repairs of :mod:`.inputs.repairs` always; the config's unset fields and a parent's recording only
for a capture (:func:`capture_learner`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

from neuronprobe.errors import root_error
from neuronprobe.loaders.hf.config import build_config, has_parent, may_need_unset_fields
from neuronprobe.loaders.hf.inputs.primitives import InputPlan, InputsInfo
from neuronprobe.loaders.hf.inputs.repairs import learn_from_error

T = TypeVar("T")


@dataclass(frozen=True)
class Step(Generic[T]):
    """One attempt: ``value`` when it worked; else ``error``, with ``info`` (the inputs the forward saw) when
    the forward raised. No ``info``: nothing to learn (the model did not build), the search ends there.
    Neither value nor error: the attempt ran and made nothing (a parent that never called the component)."""

    value: T | None = None
    error: BaseException | None = None
    info: InputsInfo | None = None


@dataclass(frozen=True)
class Found(Generic[T]):
    """How a search ended: the value of the attempt that worked (None when none did), the plan it was made
    with (or the last plan tried), and every attempt's error in order."""

    value: T | None
    plan: InputPlan
    errors: tuple[BaseException, ...] = ()

    @property
    def error(self) -> BaseException | None:
        """The last attempt's error: why the search ended without a value (None when it has one)."""
        return self.errors[-1] if self.errors and self.value is None else None


# What a failure teaches: a better plan, or None when nothing more can be learned.
Learn = Callable[[InputPlan, BaseException, InputsInfo], "InputPlan | None"]


def learn_inputs(plan: InputPlan, error: BaseException, info: InputsInfo) -> InputPlan | None:
    """The input repairs (:data:`.inputs.repairs.REPAIRS`) on the forward's root error; recorded inputs are not remade."""
    return None if plan.from_parent else learn_from_error(str(root_error(error)), plan, info)


def capture_learner(model_type: str, overrides: Iterable[str], parents: bool = True) -> Learn:
    """What a capture learns, in order: the input repairs; then the config's unset fields
    (:func:`.config.may_need_unset_fields`); then, for a component type that a parent nests
    (``parents``: not when every parent already failed), its inputs recorded from the parent's call."""
    overrides = list(overrides)

    def learn(plan: InputPlan, error: BaseException, info: InputsInfo) -> InputPlan | None:
        if (better := learn_inputs(plan, error, info)) is not None:
            return better
        if not plan.fill_unset and may_need_unset_fields(str(root_error(error)), lambda: build_config(model_type, overrides)):
            return dataclasses.replace(plan, fill_unset=True)
        if parents and not plan.from_parent and has_parent(model_type):
            return dataclasses.replace(plan, from_parent=True)  # a component: its parent's call says what it takes
        return None

    return learn


def search(attempt: Callable[[InputPlan], Step[T]], learn: Learn, retries: int, plan: InputPlan | None = None) -> Found[T]:
    """Run ``attempt`` on ``plan``, then on what ``learn`` makes of each failure, ``retries`` times at most
    after the first; stop at the first attempt that makes a value, or that fails with nothing to learn."""
    plan = plan or InputPlan()
    errors: list[BaseException] = []
    for tries_left in range(retries, -1, -1):
        step = attempt(plan)
        if step.error is None:
            return Found(step.value, plan, tuple(errors))
        errors.append(step.error)
        better = learn(plan, step.error, step.info) if step.info is not None and tries_left else None
        if better is None or better == plan:
            break
        plan = better
    return Found(None, plan, tuple(errors))
