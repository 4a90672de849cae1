"""Higher-order regions of a captured graph: the submodules torch.export and dynamo wrap code in.

Checked on torch 2.13.0 (not used by the xla-cpu worker, which runs torch 2.9).

Why this exists: ``torch.export`` does not inline everything it traces. A forward
decorated ``@torch.no_grad()`` (or one that enters ``torch.autocast``,
``torch.cond``, ``while_loop``, ``map``...) becomes one call of a higher-order
operator (``torch.ops.higher_order.wrap_with_set_grad_enabled``, ``cond``,
``wrap_with_autocast``, ``while_loop``, ``map_impl``, ``invoke_subgraph``,
``tag_activation_checkpoint`` under dynamo) whose body is a ``GraphModule``
reached through a ``get_attr`` node. A capture that walks only the top graph's
``call_function`` nodes sees none of the body: a no_grad model reads as 0 ops.

The walk is generic, not a list of names: any call whose arguments include a
``GraphModule`` is a region, entered with the call's other node arguments bound
positionally to the body's placeholders (what every higher-order operator of
torch 2.13 does: ``wrap_with_set_grad_enabled(enabled, body, *operands)``,
``wrap_with_autocast(device, dtype, enabled, cache, body, *operands)``,
``cond(pred, true_body, false_body, operands)``, ``while_loop(cond_body,
body, carried, additional)``, ``map_impl(body, xs, extra)``; read in
``torch/_higher_order_ops/{wrap,cond,while_loop,map}.py`` at v2.13.0): the
operands are the call's last node arguments (``cond``'s predicate comes first
and is no operand of its branches). Where there are fewer operands than
placeholders, the body is still walked, without dataflow across its boundary.

Internals: ``torch._ops.HigherOrderOperator`` (to name a region, and to find
the op a wrapper such as ``auto_functionalized`` or ``with_effects`` calls).
"""

from __future__ import annotations

from typing import Any

from neuronprobe._torch.check import Check, MissingInternal, run_check

INTERNAL = "torch._ops.HigherOrderOperator"
DEGRADES = "naming higher-order regions of a capture (no_grad, autocast, cond, while_loop bodies are still entered)"


def is_higher_order(target: object) -> bool:
    """True for a higher-order operator (``torch.ops.higher_order.*``)."""
    import torch

    hop = getattr(getattr(torch, "_ops", None), "HigherOrderOperator", None)
    if hop is None:
        raise MissingInternal(INTERNAL, DEGRADES, "torch._ops has no HigherOrderOperator")
    return isinstance(target, hop)


def region_kind(target: object) -> str:
    """The name a region is reported under: the higher-order operator's name, else the callable's."""
    try:
        if is_higher_order(target):
            name = getattr(target, "name", None)
            if callable(name):
                return str(name())
    except MissingInternal:
        pass
    return str(getattr(target, "__name__", None) or target)


def submodule(owner: Any, target: str) -> Any:
    """The attribute ``target`` (``submod_1``, ``layers.0.body``) of a GraphModule, or None."""
    value = owner
    for part in str(target).split("."):
        value = getattr(value, part, None)
        if value is None:
            return None
    return value


def bodies_and_operands(node: Any) -> tuple[list[Any], list[Any]]:
    """For one call node: the GraphModules among its arguments (the bodies, in order) and its other node
    arguments flattened in order (the operands, bound to each body's placeholders)."""
    import torch.fx

    owner = node.graph.owning_module
    bodies: list[Any] = []
    operands: list[Any] = []

    def visit(value: Any) -> None:
        if isinstance(value, (list, tuple)):
            for v in value:
                visit(v)
        elif isinstance(value, dict):
            for v in value.values():
                visit(v)
        elif isinstance(value, torch.fx.Node):
            body = submodule(owner, value.target) if value.op == "get_attr" and owner is not None else None
            if isinstance(body, torch.fx.GraphModule):
                bodies.append(body)
            else:
                operands.append(value)
        elif isinstance(value, torch.fx.GraphModule):
            bodies.append(value)

    visit(node.args)
    visit(node.kwargs)
    return bodies, operands


def bind(placeholders: list[Any], operands: list[Any]) -> dict[Any, Any]:
    """Each body placeholder -> the operand it receives: the call's last ``len(placeholders)`` operands, in order
    (nothing bound when the call has fewer operands than the body has placeholders)."""
    if len(operands) < len(placeholders) or not placeholders:
        return {}
    return dict(zip(placeholders, operands[len(operands) - len(placeholders) :], strict=True))


def self_check() -> Check:
    def probe() -> None:
        import torch

        class NoGrad(torch.nn.Module):
            @torch.no_grad()
            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return x.sin()

        ep = torch.export.export(NoGrad(), (torch.ones(2),), strict=False)
        regions = [n for n in ep.graph.nodes if n.op == "call_function" and is_higher_order(n.target)]
        if not regions:  # an inlined body is fine for the walk: nothing to check then
            return
        bodies, operands = bodies_and_operands(regions[0])
        placeholders = [n for n in bodies[0].graph.nodes if n.op == "placeholder"] if bodies else []
        if len(bodies) != 1 or len(bind(placeholders, operands)) != len(placeholders):
            raise MissingInternal(
                INTERNAL, DEGRADES, f"{region_kind(regions[0].target)}: {len(bodies)} bodies, {len(operands)} operands for {len(placeholders)} placeholders"
            )

    return run_check(INTERNAL, DEGRADES, probe)
