"""Compile the tool's own functions without touching the caches of the user's compiled functions.

Checked on torch 2.13.0 (not used by the xla-cpu worker, which runs torch 2.9).

Why not ``torch._dynamo.reset()``: it clears every code object's cache, so a
notebook user's compiled models recompile after ``analyze``. What reset clears
was read in torch 2.13's ``torch/_dynamo/__init__.py:reset`` and
``torch/_dynamo/eval_frame.py``; the choice made here:

* Dynamo keeps compiled entries per *code object*. A model file is imported
  afresh for every analysis (new classes, new code objects), so the tool's
  entries live on code objects the user never compiled. After the tool's
  compiles, exactly the code objects that had no cache entries before and have
  some now are cleared with ``torch._C._dynamo.eval_frame.reset_code`` (their
  compile ids restart too, so the next analysis numbers its compiles from 0).
* A code object the user compiled too (a transformers class the user compiled
  in the same notebook, then ``analyze hf:...``) keeps the user's entries:
  ``torch.compile(..., isolate_recompiles=True)`` (new in torch 2.13) puts the
  tool's entries in a region of their own, which the user's lookups never see
  and whose recompiles do not count against the user's limit. Those entries are
  left in place (there is no API to drop one region); they cost memory only.
* Backends the tool registered in ``eval_frame.cached_backends`` are removed
  again, so the recording backends (and the graphs they hold) can be freed.

Guard failures and dynamo's counters are restored by their own modules
(:mod:`neuronprobe._torch.dynamo_guards`, :mod:`neuronprobe._torch.dynamo_counters`).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator
from types import CodeType
from typing import Protocol, TypeVar, cast

from neuronprobe._torch.check import Check, MissingInternal, run_check

DEGRADES = "leaving the user's compiled functions as they were (the tool's compiled graphs are not freed after analyze)"
ISOLATION_DEGRADES = "isolating the tool's compiles from a class the user compiled too (the tool's entries share its cache)"

F = TypeVar("F", bound=Callable[..., object])


class _CodeRef(Protocol):
    def __call__(self) -> CodeType | None: ...


def supports_isolated_regions() -> bool:
    """True when ``torch.compile`` takes ``isolate_recompiles`` (torch 2.13)."""
    import torch

    return "isolate_recompiles" in inspect.signature(torch.compile).parameters


def compile_isolated(fn: F, backend: Callable[..., object], *, dynamic: bool) -> F:
    """``torch.compile(fn)`` with fullgraph off, in a cache region of its own when torch has them."""
    import torch

    compile_fn: Callable[..., object] = torch.compile  # its typed overloads do not list isolate_recompiles yet
    region = {"isolate_recompiles": True} if supports_isolated_regions() else {}
    return cast(F, compile_fn(fn, backend=backend, fullgraph=False, dynamic=dynamic, **region))


def _tracked_codes() -> list[CodeType]:
    """Every live code object dynamo has looked at (its input and output trackers)."""
    from torch._dynamo import convert_frame

    refs: list[_CodeRef] = [*convert_frame.input_codes.seen, *convert_frame.output_codes.seen]
    return [code for code in (ref() for ref in refs) if code is not None]


def _entry_count(code: CodeType) -> int:
    from torch._C._dynamo import eval_frame

    count: int = eval_frame._get_total_cache_entry_count(code)
    return count


def _reset_code(code: CodeType) -> None:
    from torch._C._dynamo import eval_frame

    eval_frame.reset_code(code)


def _backend_ids() -> set[int]:
    from torch._dynamo import eval_frame

    return set(eval_frame.cached_backends)


def _forget_backends(ids: set[int]) -> None:
    from torch._dynamo import eval_frame

    for key in ids:
        eval_frame.cached_backends.pop(key, None)


@contextlib.contextmanager
def isolated_compiles() -> Iterator[None]:
    """Around the tool's ``torch.compile`` calls: afterwards, clear only what they added.

    Raises nothing for a missing internal: the cleanup is then skipped (the
    user's caches are still untouched) and ``neuronprobe doctor`` names it.
    """
    try:
        before = {id(code): _entry_count(code) for code in _tracked_codes()}
        backends = _backend_ids()
    except Exception:  # the doctor reports it; nothing of the user's is touched either way
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            for code in _tracked_codes():
                if before.get(id(code), 0) == 0 and _entry_count(code) > 0:
                    _reset_code(code)
            _forget_backends(_backend_ids() - backends)


def self_check() -> Check:
    """The trackers, entry counts, ``reset_code`` and ``cached_backends`` exist and agree on a tiny compile."""

    def probe() -> None:
        import torch

        def tool_fn(x: torch.Tensor) -> torch.Tensor:
            return x + 1

        def backend(gm: torch.fx.GraphModule, example_inputs: object) -> Callable[..., object]:
            return gm.forward

        with isolated_compiles():
            compile_isolated(tool_fn, backend, dynamic=False)(torch.ones(1))
            if _entry_count(tool_fn.__code__) < 1:
                raise MissingInternal("torch._C._dynamo.eval_frame._get_total_cache_entry_count", DEGRADES, "a compiled function shows no cache entry")
        if _entry_count(tool_fn.__code__) != 0:
            raise MissingInternal("torch._C._dynamo.eval_frame.reset_code", DEGRADES, "the tool's cache entries survived the cleanup")

    return run_check("torch._dynamo cache (trackers, reset_code, cached_backends)", DEGRADES, probe)


def self_check_regions() -> Check:
    def probe() -> None:
        if not supports_isolated_regions():
            raise MissingInternal("torch.compile(isolate_recompiles=...)", ISOLATION_DEGRADES, "torch.compile has no isolate_recompiles")

    return run_check("torch.compile(isolate_recompiles=True)", ISOLATION_DEGRADES, probe)


def forget_all_compiles() -> None:
    """``torch._dynamo.reset()``: every compiled code cache of this process dropped, so the next call compiles again.

    Only for a forked worker that must compile as a fresh process would (the live TorchNeuron run counts the
    graphs ``get_dynamo_metrics()`` reports): the parent's capture may have run the model's own
    ``torch.compile`` on CPU tensors already, and the worker inherits those caches. Never in the user's process.
    """
    import torch._dynamo

    torch._dynamo.reset()
