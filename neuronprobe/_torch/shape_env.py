"""Dynamo's ShapeEnv: the shape guards a symbolic-size compile leaves, with their source lines.

Checked on torch 2.13.0 (not used by the xla-cpu worker).

Internals read: ``torch._guards.TracingContext.try_get()``, its
``fake_mode.shape_env``, the env's ``guards`` (``expr`` and
``sloc.maybe_user_loc``) and ``var_to_sources``; and
``torch.fx.experimental._config.use_duck_shape``, turned off so that two equal
sizes stay two symbols. A missing one raises :class:`MissingInternal` instead of
yielding no guards, so the report says the recompile causes are degraded.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from neuronprobe._torch.check import Check, MissingInternal, run_check

INTERNAL = "torch._guards.TracingContext fake_mode.shape_env (guards, var_to_sources)"
DUCK_INTERNAL = "torch.fx.experimental._config.use_duck_shape"
DEGRADES = "recompile causes from shape guards (the line that specialises or branches on a size)"


@dataclass(frozen=True)
class ShapeGuard:
    """One guard on sizes: a sympy expression, where the user's code added it, and each symbol's sources."""

    expr: object  # sympy expression
    user_loc: str | None  # "code  # path.py:12 in forward"
    sources: dict[object, list[str]]  # symbol -> source names, e.g. "L['x'].size()[1]"


def _source_name(source: object) -> str:
    name = getattr(source, "name", None)
    if callable(name):
        name = name()
    return str(name) if name is not None else str(source)


def _attr(obj: object, name: str, where: str) -> object:
    if not hasattr(obj, name):
        raise MissingInternal(INTERNAL, DEGRADES, f"{where} has no {name}")
    return getattr(obj, name)


def current_guards() -> list[ShapeGuard]:
    """The shape guards of the compile in progress (call from inside a dynamo backend)."""
    try:
        from torch._guards import TracingContext
    except ImportError as exc:
        raise MissingInternal(INTERNAL, DEGRADES, str(exc)) from exc
    ctx = TracingContext.try_get()
    if ctx is None:
        raise MissingInternal(INTERNAL, DEGRADES, "no TracingContext inside the backend")
    env = _attr(_attr(ctx, "fake_mode", "TracingContext"), "shape_env", "fake_mode")
    if env is None:
        raise MissingInternal(INTERNAL, DEGRADES, "the fake mode has no ShapeEnv")
    var_to_sources = _attr(env, "var_to_sources", "ShapeEnv")
    guards = _attr(env, "guards", "ShapeEnv")
    if not isinstance(var_to_sources, dict) or not isinstance(guards, list):
        raise MissingInternal(INTERNAL, DEGRADES, "ShapeEnv.var_to_sources/guards changed type")
    sources = {sym: [_source_name(s) for s in srcs] for sym, srcs in var_to_sources.items()}
    out: list[ShapeGuard] = []
    for g in guards:
        sloc = _attr(g, "sloc", "ShapeGuard")
        loc = _attr(sloc, "maybe_user_loc", "SLoc")
        out.append(ShapeGuard(_attr(g, "expr", "ShapeGuard"), loc if isinstance(loc, str) else None, sources))
    return out


@contextlib.contextmanager
def distinct_symbols() -> Iterator[None]:
    """Duck shaping off: equal sizes of different inputs get different symbols (restored on exit)."""
    import torch.fx.experimental._config as fx_config

    if not hasattr(fx_config, "use_duck_shape"):
        raise MissingInternal(DUCK_INTERNAL, DEGRADES, "fx config has no use_duck_shape")
    with fx_config.patch(use_duck_shape=False):
        yield


def self_check() -> Check:
    def probe() -> None:
        import torch

        found: list[ShapeGuard] = []

        def backend(gm: torch.fx.GraphModule, example_inputs: object) -> Callable[..., object]:
            found.extend(current_guards())
            return gm.forward

        def branch(x: torch.Tensor) -> torch.Tensor:
            return x + 1 if x.shape[0] > 2 else x - 1

        from neuronprobe._torch.dynamo_isolation import compile_isolated, isolated_compiles

        with isolated_compiles(), distinct_symbols():
            compile_isolated(branch, backend, dynamic=True)(torch.ones(4))
        if not any(g.user_loc for g in found):
            raise MissingInternal(INTERNAL, DEGRADES, "a branch on a size left no guard with a source line")

    return run_check(INTERNAL, DEGRADES, probe)


def self_check_duck() -> Check:
    def probe() -> None:
        with distinct_symbols():
            pass

    return run_check(DUCK_INTERNAL, DEGRADES, probe)
