"""Every private torch internal neuronprobe depends on, one module each, with a self-check.

Torch's private APIs change between releases without notice. Each module here
wraps one of them in a thin typed function, says which torch versions it was
checked on, and has a ``self_check() -> Check`` that tries the internal on a
tiny example and names the feature that degrades without it. A wrapper whose
internal is missing raises :class:`MissingInternal`; callers turn that into a
limitation of the report rather than quietly returning fewer results.
``neuronprobe doctor`` runs :func:`self_checks` against the installed torch.
"""

from __future__ import annotations

from collections.abc import Callable

from neuronprobe._torch.check import Check, MissingInternal

__all__ = ["Check", "MissingInternal", "degraded", "self_checks"]


def _all() -> list[Callable[[], Check]]:
    from neuronprobe._torch import (
        aot,
        assumed_sizes,
        autograd_node,
        dispatch_mode,
        dispatch_table,
        dispatcher,
        dynamo_config,
        dynamo_counters,
        dynamo_guards,
        dynamo_isolation,
        fake_tensor,
        filenames,
        logs,
        neuron_device,
        pytree,
        regions,
        shape_env,
        stack_anchors,
        stack_traces,
        symbolic_shapes,
    )

    return [
        dispatcher.self_check_overload,
        dispatcher.self_check,
        dispatcher.self_check_op_dk,
        dispatch_table.self_check,
        dispatch_mode.self_check,
        neuron_device.self_check,
        pytree.self_check,
        symbolic_shapes.self_check,
        aot.self_check,
        logs.self_check,
        dynamo_counters.self_check,
        dynamo_guards.self_check,
        dynamo_config.self_check,
        dynamo_isolation.self_check,
        dynamo_isolation.self_check_regions,
        shape_env.self_check,
        shape_env.self_check_duck,
        filenames.self_check,
        fake_tensor.self_check,
        fake_tensor.self_check_tolist,
        fake_tensor.self_check_swap,
        autograd_node.self_check,
        assumed_sizes.self_check,
        regions.self_check,
        stack_anchors.self_check,
        stack_traces.self_check,
    ]


def self_checks() -> list[Check]:
    """Run every internal's self-check against the installed torch; the process is left as it was.

    The checks compile tiny functions: dynamo's counters and guard failures are
    put back afterwards, and the compiled entries are cleared by the checks themselves.
    """
    from neuronprobe._torch import dynamo_counters, dynamo_guards

    try:
        counters = dynamo_counters.snapshot()
        failures = dynamo_guards.counts()
    except MissingInternal:
        return [check() for check in _all()]
    try:
        return [check() for check in _all()]
    finally:
        dynamo_counters.restore(counters)
        dynamo_guards.restore(failures)


def degraded(checks: list[Check]) -> list[str]:
    """The features degraded in this torch, once each, in check order."""
    return list(dict.fromkeys(c.degrades for c in checks if not c.ok))
