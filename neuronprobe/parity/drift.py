"""Where a precision drifts: every module's output against the fp32 reference, in execution order.

Forward hooks on every module. The reference run records each module call's output
(its floating-point tensors, as fp32 copies: an in-place op later in the forward must
not change them) and the user's line that called the module; a run under a precision
then compares each call's output as soon as the call returns, keeps the statistics
(:class:`ModuleDrift`) and lets go of the tensors. ``keep_outputs=True`` also keeps the
reference's outputs by module (``Reference.outputs``), for frozen per-module references.

A module is named by its path (``transformer.h.0.attn``; the model itself is ``""``); a
module called again in the same forward (a shared block) is ``path (call 2)``. Execution
order is the order in which calls return, so a block comes after its children, and the
*first* module past the tolerance is the innermost, earliest place the error shows.
"""

from __future__ import annotations

import functools
import inspect
import math
import os
import weakref
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from neuronprobe.loaders.resolve import HF_PREFIX, LoadedModel
from neuronprobe.report.model import ModuleDrift

__all__ = ["ModuleDrift", "Reference", "Tolerance", "compare", "drift_stats", "module_prefix", "record_reference", "ulp"]

# The mantissa bits and smallest normal exponent of each low type, for ULPs.
_FORMATS: dict[str, tuple[int, int]] = {
    "fp32": (23, -126),
    "tf32": (10, -126),
    "bf16": (7, -126),
    "fp16": (10, -14),
    "fp8_e4m3": (3, -6),
}


@dataclass(frozen=True)
class Tolerance:
    """A module's output passes when max |a - e| <= atol + rtol * max |e| (NxD Inference's embedding rule,
    ``utils/accuracy.py``; rtol 0.05 is its bf16 value and its loosest logit rtol, atol 1e-5 its logit atol)."""

    rtol: float = 0.05
    atol: float = 1e-5


DEFAULT_TOLERANCE = Tolerance()


@dataclass
class _Call:
    key: str
    module_type: str
    file: str | None
    line: int | None
    tensors: list[Any]
    scale: float = 0.0  # max |reference| over the finite elements


@dataclass
class Reference:
    """The fp32 run: per module call, in execution order, the output tensors and the calling line."""

    calls: list[_Call] = field(default_factory=list)
    final: list[Any] = field(default_factory=list)  # the model's output tensors
    final_scale: float = 0.0
    final_value: Any = None  # the model's output as returned

    @property
    def outputs(self) -> dict[str, Any]:
        """Each module call's first output tensor (``keep_outputs``): key -> fp32 tensor."""
        return {c.key: c.tensors[0] for c in self.calls if c.tensors}

    def by_key(self) -> dict[str, _Call]:
        return {c.key: c for c in self.calls}

    @functools.cached_property
    def expected_logits(self) -> Any:
        """The final output read as logits once (``metrics.ExpectedLogits``, or None), for every precision compared with it."""
        from neuronprobe.parity import metrics

        return metrics.expected_logits(self.final_value)


def float_tensors(value: Any) -> list[Any]:
    """The floating-point tensors of a module output (tuples, dicts, model outputs torch's pytree knows)."""
    import torch

    from neuronprobe._torch.pytree import tree_leaves

    # A sparse (or other non-strided) output is compared by its values, as a dense tensor: norms and
    # safetensors take strided tensors only (a sparse output was an internal error).
    return [t if t.layout == torch.strided else t.to_dense() for t in tree_leaves(value) if isinstance(t, torch.Tensor) and t.is_floating_point()]


def ulp(magnitude: float, low: str) -> float:
    """The spacing of ``low`` at ``magnitude`` (its unit in the last place there)."""
    bits, emin = _FORMATS[low]
    if magnitude <= 0 or not math.isfinite(magnitude):
        return math.ldexp(1.0, emin - bits)
    _, exponent = math.frexp(magnitude)  # magnitude = m * 2**exponent with m in [0.5, 1)
    return math.ldexp(1.0, max(exponent - 1, emin) - bits)


def _max_abs(t: Any) -> float:
    """max |t| (NaN if any element is NaN, inf if any is infinite): one pass, no temporary.

    ``aminmax`` rather than ``vector_norm(ord=inf)``: on torch 2.13's CPU kernels the norm took
    5 ms on a [1, 32, 3072] tensor against 0.03 ms (measured), and the reference and every
    precision take it on each module call's output.
    """
    import torch

    if not t.numel():
        return 0.0
    low, high = (float(v) for v in torch.aminmax(t))
    return math.nan if math.isnan(low) or math.isnan(high) else max(-low, high)


class Seen:
    """Results already measured on a tensor, within one forward: a model's logits are the output of the
    head, of the model and of neuronprobe's wrapper, and the final output (GPT-2: four times 1.6M values).

    A tensor is known by its memory, dtype, shape, strides and version counter (an in-place update is a
    new value; a view or ``detach`` shares it with its base). An entry counts only while the tensors it was
    measured on are alive (weak references: nothing is kept longer than the forward keeps it), so that
    memory cannot have been handed to another tensor: the same key is the same values, and the same
    kernel on them gives the same number.
    """

    def __init__(self) -> None:
        self._results: dict[tuple[Any, ...], tuple[list[Any], Any]] = {}

    @staticmethod
    def _identity(t: Any) -> tuple[Any, ...]:
        return (t.data_ptr(), t.dtype, tuple(t.shape), t.stride(), t._version)

    def get_or(self, tensors: list[Any], measure: Callable[[], Any]) -> Any:
        key = tuple(self._identity(t) for t in tensors)
        hit = self._results.get(key)
        if hit is not None and all(ref() is not None for ref in hit[0]):
            return hit[1]
        result = measure()
        self._results[key] = ([weakref.ref(t) for t in tensors], result)
        return result


def _finite_max_abs(t: Any) -> float:
    """max |t| over the finite elements."""
    import torch

    m = _max_abs(t)
    if not math.isfinite(m):
        m = _max_abs(torch.where(torch.isfinite(t), t, torch.zeros((), dtype=t.dtype)))
    return m


def reference_scale(tensors: list[Any], seen: Seen | None = None) -> float:
    """max |e| over the finite elements of a call's reference tensors (``seen``: tensors measured already)."""
    out = 0.0
    for t in tensors:
        m = _finite_max_abs(t) if seen is None else seen.get_or([t], functools.partial(_finite_max_abs, t))
        out = max(out, m)
    return out


def _pair_error(ref: Any, got: Any) -> tuple[float, int]:
    """(max |got - ref| over the elements finite in both, the elements finite in ``ref`` and not in ``got``)."""
    import torch

    diff = got.detach().float() - ref
    worst = _max_abs(diff)
    nonfinite = 0
    if not math.isfinite(worst):  # inf or nan somewhere: count the new ones, compare the rest
        finite_ref = torch.isfinite(ref)
        finite_got = torch.isfinite(got)
        nonfinite = int((finite_ref & ~finite_got).sum())
        both = finite_ref & finite_got
        worst = _max_abs(torch.where(both, diff, torch.zeros((), dtype=diff.dtype)))
    return worst, nonfinite


def drift_stats(
    reference: list[Any], actual: list[Any], low: str, tolerance: Tolerance, scale: float | None = None, seen: Seen | None = None
) -> tuple[float, float, float, int, bool]:
    """(max_abs, rel, ulps, nonfinite, exceeds) of ``actual`` against ``reference`` (lists of matching tensors).

    ``scale``: max |reference| when known (the reference run computes it once). The common case, every
    difference finite, costs one pass over each tensor; non-finite values take a masked second pass.
    ``seen``: pairs of tensors measured already in this forward (their error is not measured again).
    """
    max_abs = 0.0
    nonfinite = 0
    for ref, got in zip(reference, actual, strict=False):
        if got.shape != ref.shape:
            continue
        worst, bad = _pair_error(ref, got) if seen is None else seen.get_or([ref, got], functools.partial(_pair_error, ref, got))
        nonfinite += bad
        max_abs = max(max_abs, worst)
    max_ref = reference_scale(reference) if scale is None else scale
    rel = max_abs / max_ref if max_ref > 0 else (math.inf if max_abs > 0 else 0.0)
    ulps = max_abs / ulp(max_ref, low)  # at the output's own scale: near-zero elements would make any error huge
    exceeds = nonfinite > 0 or max_abs > tolerance.atol + tolerance.rtol * max_ref
    return max_abs, rel, ulps, nonfinite, exceeds


# --- hooks -----------------------------------------------------------------------------------


class _Names:
    """Module call keys: the path, and ``(call n)`` for a module called again in one forward."""

    def __init__(self, module: Any, strip: str = "") -> None:
        self.path = {id(m): name.removeprefix(strip) for name, m in module.named_modules(remove_duplicate=False)}
        self.counts: dict[int, int] = {}

    def key(self, m: Any) -> str:
        n = self.counts.get(id(m), 0) + 1
        self.counts[id(m)] = n
        name = self.path.get(id(m), "?")
        return name if n == 1 else f"{name} (call {n})"


def _caller() -> tuple[str | None, int | None]:
    """The user's line that called the module being entered (the project's frame rule, ``capture/graph.py``):
    walking out from the innermost frame past this module's own, the first frame of neither a library nor
    neuronprobe; reaching neuronprobe first means no model code asked.

    The frames are walked as they are (no ``traceback.StackSummary`` of the whole stack per module call,
    which cost the reference about half a forward of GPT-2) and each file is classified once.
    """
    frame = inspect.currentframe()
    while frame is not None and frame.f_code.co_filename == __file__:  # this helper and the hooks: not the caller
        frame = frame.f_back
    while frame is not None:
        kind = _file_kind(frame.f_code.co_filename)
        if kind == "neuronprobe":
            return None, None
        if kind == "model":
            return _relative(frame.f_code.co_filename, os.getcwd()), frame.f_lineno
        frame = frame.f_back
    return None, None


@functools.lru_cache(maxsize=4096)
def _file_kind(filename: str) -> str:
    """``neuronprobe``, ``library`` or ``model``: what the frame rule makes of a file."""
    from neuronprobe.usercode import is_library, is_neuronprobe

    if is_neuronprobe(filename):
        return "neuronprobe"
    return "library" if is_library(filename) else "model"


@functools.lru_cache(maxsize=4096)
def _relative(filename: str, cwd: str) -> str | None:
    """The file as the report names it (relative to ``cwd``, the working folder, when inside it)."""
    from neuronprobe.capture.graph import relative_path

    return relative_path(filename)


@contextmanager
def _hooks(module: Any, on_enter: Callable[[Any], None] | None, on_exit: Callable[[Any, Any], None]) -> Iterator[None]:
    handles = []
    for m in module.modules():
        if on_enter is not None:
            handles.append(m.register_forward_pre_hook(lambda mod, args: on_enter(mod)))
        handles.append(m.register_forward_hook(lambda mod, args, out: on_exit(mod, out)))
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def record_reference(module: Any, forward: Callable[[], Any], *, lines: bool = True, strip: str = "", copy: bool = False) -> Reference:
    """Run ``forward`` (the fp32 model on its inputs) with hooks that record every module call's output.

    The outputs are kept as they are (no copy) unless the forward later changes one in place (its version
    counter moves): then the forward runs again keeping copies (``copy``). ``strip``: a prefix of every
    module path (an ``hf:`` model's wrapper, ``model.``) left out of the names.
    """
    names = _Names(module, strip)
    ref = Reference()
    pending: dict[int, list[tuple[str | None, int | None]]] = {}
    versions: list[tuple[Any, int]] = []
    seen = Seen()  # a tensor returned by several modules (the logits) is measured once

    def enter(m: Any) -> None:
        pending.setdefault(id(m), []).append(_caller() if lines else (None, None))

    def exit_(m: Any, out: Any) -> None:
        file, line = pending[id(m)].pop() if pending.get(id(m)) else (None, None)
        tensors = [t.detach().float() for t in float_tensors(out)]
        if copy:
            tensors = [t.clone() for t in tensors]
        else:
            versions.extend((t, t._version) for t in tensors)
        ref.calls.append(_Call(names.key(m), type(m).__name__, file, line, tensors, reference_scale(tensors, seen)))

    with _hooks(module, enter, exit_):
        value = forward()
    if any(t._version != v for t, v in versions):  # an in-place op changed a recorded output: record copies
        return record_reference(module, forward, lines=lines, strip=strip, copy=True)
    ref.final_value = value
    ref.final = [t.detach().float() for t in float_tensors(value)]
    ref.final_scale = reference_scale(ref.final, seen)
    return ref


@dataclass
class Comparison:
    """A run under a precision against the reference: per module call, and the final output."""

    modules: list[ModuleDrift]
    output: ModuleDrift
    final_value: Any


def compare(
    module: Any,
    forward: Callable[[], Any],
    reference: Reference,
    low: str,
    tolerance: Tolerance = DEFAULT_TOLERANCE,
    strip: str = "",
    measuring: Callable[[], AbstractContextManager[Any]] = nullcontext,
) -> Comparison:
    """Run ``forward`` (the model under a precision) and compare each module call with ``reference`` as it returns.

    ``measuring``: entered around each comparison inside the forward (the emulator's ``paused``), so
    that the statistics are computed in fp32 as torch computes them, not emulated like the model's ops.
    """
    names = _Names(module, strip)
    by_key = reference.by_key()
    rows: list[ModuleDrift] = []
    seen = Seen()  # the logits returned by the head, the model and the wrapper are compared once

    def exit_(m: Any, out: Any) -> None:
        key = names.key(m)
        ref = by_key.get(key)
        if ref is None:
            return  # a call the reference did not make (a branch on values): nothing to compare with
        with measuring():
            stats = drift_stats(ref.tensors, float_tensors(out), low, tolerance, ref.scale, seen)
        rows.append(ModuleDrift(key, ref.module_type, ref.file, ref.line, *stats))

    with _hooks(module, None, exit_):
        value = forward()
    with measuring():
        final = drift_stats(reference.final, float_tensors(value), low, tolerance, reference.final_scale, seen)
    output = ModuleDrift("", type(module).__name__, None, None, *final)
    return Comparison(rows, output, value)


def first_exceeding(rows: list[ModuleDrift]) -> ModuleDrift | None:
    """The first module call, in execution order, past the tolerance."""
    return next((r for r in rows if r.exceeds), None)


def dominant_op(module: Any, target: str, forward: Callable[[], Any], emulator: Any, strip: str = "") -> str | None:
    """Run ``forward`` again and name the aten op that adds the most error inside the call ``target``.

    Inside that call each emulated op is also computed in fp32 on the same inputs; the op whose
    result differs most from its fp32 value (relative to that value's largest magnitude) is named.
    This measures the error an op introduces, not how later ops amplify it.
    """
    names = _Names(module, strip)
    inside: list[Any] = []  # the target module while its call runs
    worst: dict[str, float] = {}

    def observe(op: str, exact: Any, got: Any) -> None:
        if not inside or not exact.numel():
            return
        scale = float(exact.float().abs().nan_to_num(0.0).max())
        err = float((got.float() - exact.float()).abs().nan_to_num(0.0).max())
        worst[op] = max(worst.get(op, 0.0), err / scale if scale > 0 else err)

    def enter(m: Any) -> None:
        if names.key(m) == target:
            inside.append(m)
            emulator.observer = observe  # the fp32 recompute of each op costs: only inside the target call

    def exit_(m: Any, out: Any) -> None:
        if inside and inside[-1] is m:
            inside.pop()
            emulator.observer = None

    try:
        with _hooks(module, enter, exit_):
            forward()
    finally:
        emulator.observer = None
    op = max(worst, key=lambda k: worst[k]) if worst else None
    return f"aten::{op}" if op is not None and worst[op] > 0 else None  # no op adds error: it came in with the input


def module_prefix(loaded: LoadedModel) -> str:
    """The part of every module path that is neuronprobe's wrapper, not the user's model (``hf:``: ``model.``)."""
    return "model." if loaded.source.startswith(HF_PREFIX) else ""
