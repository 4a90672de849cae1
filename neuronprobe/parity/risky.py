"""Risky low-precision constructs at the user's line, found on the captured op graph (issue 25, point 3).

A model that is right in float32 can go wrong in float16, bfloat16 or float8 for
reasons that sit on one line of the user's code: an epsilon that is 0 in the low
type, a ``-1e9`` mask that is ``-inf``, a softmax summed in bfloat16, a float32
constant the low type cannot hold, positions past the low type's exact integers.
:func:`find_risky` finds them on an :class:`~neuronprobe.capture.graph.OpGraph` (each
call's constants by schema name, its dtypes, its producers, the user's file:line)
and returns ``precision`` findings (a note, never a blocker) with the rule ids of
``support/data/precision_rules.json``. Every threshold is read from ``torch.finfo``
of the low type: the largest value, the smallest normal and subnormal, and the
exact integer range ``2 / eps``; a constant's value in the low type is torch's own
conversion of it.

:func:`confirm` then says, for each finding, what the parity run's emulation
measured at the module that holds the line (:class:`~neuronprobe.vocabulary.Confirmation`).

Which calls compute in the low type follows the precision being checked
(:class:`LowPrecision`): a model served in the low type is captured cast to it, so
its graph's dtypes say where the user upcast; ``--auto-cast all`` computes every
float32 op in the low type too. The accumulations (softmax, norms, reductions)
count only when mixed-precision accumulation is off or the model is served in the
low type. ``tf32`` is no storage type (torch has no ``finfo`` for it) and only
touches matmul inputs, which none of these constructs are: it finds nothing.

A line the model itself computes in a low type (its own ``.half()``, ``.to(torch.float16)``, a bfloat16
submodule) is judged in that type whatever the precisions asked for (:func:`scan_own_dtypes`, issue 33.10):
the graph of the model as it is shows each call's own dtype, and the reference run, which is the model as it
is, measures whether the module holding the line turns non-finite. A plain ``neuronprobe parity model.py``
finds an fp16 epsilon that underflows in the user's own fp16 code.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, Protocol, TypeGuard

from neuronprobe.capture.graph import ForwardError, OpCall, OpGraph, capture, relative_path
from neuronprobe.parity.result import ParityResult
from neuronprobe.report.model import Finding, PrecisionInfo, Report
from neuronprobe.support.precision_rules import load_precision_rules
from neuronprobe.vocabulary import Confirmation, ParityRun, Phase, ServedDtype, SourceLocation

# The rule ids (support/data/precision_rules.json).
EPS_RULE = "precision-eps-underflow"
MASK_RULE = "precision-mask-overflow"
ACCUMULATION_RULE = "precision-low-accumulation"
CONSTANT_RULE = "precision-constant-range"
INTEGERS_RULE = "precision-inexact-integers"

# parity's low-type names (vocabulary.LowType, ServedDtype) -> torch dtype names.
LOW_DTYPES: dict[str, str] = {"bf16": "bfloat16", "fp16": "float16", "fp8_e4m3": "float8_e4m3fn"}
_LABELS = {v: k for k, v in LOW_DTYPES.items()}

# --- the ops each rule reads (aten names; the overload does not matter) ----------------------------

# Fused norms and the schema name of their epsilon.
_NORMS = frozenset(
    {
        "layer_norm",
        "native_layer_norm",
        "group_norm",
        "native_group_norm",
        "rms_norm",
        "_fused_rms_norm",
        "batch_norm",
        "native_batch_norm",
        "_native_batch_norm_legit",
        "_native_batch_norm_legit_no_training",
        "instance_norm",
    }
)
# Ops whose result divides by, or takes the root or log of, what an epsilon protects.
_EPS_CONSUMERS = frozenset({"rsqrt", "sqrt", "reciprocal", "div", "log", "log2", "log10", "log1p", "pow"})
# Ops that write a constant into a tensor (the constant's schema names).
_FILLS: dict[str, tuple[str, ...]] = {
    "masked_fill": ("value",),
    "masked_fill_": ("value",),
    "where": ("self", "other"),
    "fill": ("value",),
    "fill_": ("value",),
    "full": ("fill_value",),
    "full_like": ("fill_value",),
    "new_full": ("fill_value",),
    "index_fill": ("value",),
    "index_fill_": ("value",),
    "scalar_tensor": ("s",),
}
# Arithmetic with a Python number (``other`` is the number when it is no tensor).
_ARITHMETIC: dict[str, str] = {"add": "+", "add_": "+", "sub": "-", "sub_": "-", "rsub": "-", "mul": "*", "mul_": "*", "div": "/", "div_": "/"}
# Where a mask value ends up: an overflowed mask constant matters when it reaches one of these.
_MASK_USERS = ("softmax", "logsumexp", "scaled_dot_product", "amax", "amin", "max", "min", "topk", "sort", "argmax", "argmin")
_MASK_REACH = 8  # ops followed from the constant towards its softmax (mask arithmetic is a few elementwise ops)
# Accumulations that are risky in the low type at any length ...
_ALWAYS_ACCUMULATE = frozenset(
    {"softmax", "_softmax", "_safe_softmax", "log_softmax", "_log_softmax", "logsumexp", "exp", "var", "std", "var_mean", "std_mean"}
)
# ... and the ones that are risky when they add more terms than the low type can count (2 / eps).
_LONG_ACCUMULATE = frozenset({"sum", "mean", "nansum", "cumsum", "linalg_vector_norm", "norm"})
# Ops that keep the values of their first tensor input (views, copies, casts): integer ranges pass through.
_KEEPS_VALUES = frozenset(
    {
        "view",
        "_unsafe_view",
        "reshape",
        "unsqueeze",
        "squeeze",
        "expand",
        "expand_as",
        "permute",
        "transpose",
        "t",
        "slice",
        "select",
        "narrow",
        "clone",
        "contiguous",
        "alias",
        "detach",
        "_to_copy",
        "to",
        "type_as",
        "flatten",
        "unflatten",
        "repeat",
        "index_select",
        "flip",
        "roll",
        "lift_fresh_copy",
    }
)


@dataclass(frozen=True)
class LowPrecision:
    """The low type a parity run checks, and where the model computes in it."""

    dtype: str  # torch dtype name: float16 | bfloat16 | float8_e4m3fn
    served: bool = False  # the model's weights and inputs are cast to it (its graph was captured cast)
    auto_cast_all: bool = False  # neuronx-cc --auto-cast all: every float32 op computes in it too
    fp32_accumulation: bool = True  # neuronx-cc mixed-precision accumulation (on by default since Neuron 2.27)
    own: bool = False  # the model itself computes these lines in the low type (its own casts), whatever is emulated

    @property
    def label(self) -> str:
        return _LABELS.get(self.dtype, self.dtype)

    def computes_low(self, dtype: str | None) -> bool:
        """Whether a value of ``dtype`` is computed in the low type under this precision."""
        return dtype == self.dtype or (self.auto_cast_all and dtype == "float32")

    @property
    def accumulates_low(self) -> bool:
        """Whether softmax, norms and reductions in the low type stay there (brief: MPA off, served low, or the
        model's own low-type code, which computes so on every device)."""
        return self.served or self.own or not self.fp32_accumulation

    def why_low(self) -> str:
        if self.own:
            return f"the model itself computes this line in {self.label}"
        if self.served:
            return f"the model is served in {self.label}"
        return "mixed-precision accumulation is off"


@dataclass(frozen=True)
class Limits:
    """What a low type can hold, from ``torch.finfo``."""

    dtype: str
    max: float
    normal: float  # smallest normal
    subnormal: float  # smallest subnormal: smallest normal * eps
    eps: float
    exact: int  # every integer up to this is exact: 2 / eps

    def rounded(self, value: float) -> float:
        """``value`` as the low type holds it (torch's round-to-nearest-even conversion, saturating where torch does)."""
        return _rounded(self.dtype, float(value))


@lru_cache(maxsize=8)
def limits(dtype: str) -> Limits:
    import torch

    info = torch.finfo(getattr(torch, dtype))
    return Limits(dtype, float(info.max), float(info.smallest_normal), float(info.smallest_normal * info.eps), float(info.eps), round(2 / info.eps))


@lru_cache(maxsize=1024)
def _rounded(dtype: str, value: float) -> float:
    import torch

    return float(torch.tensor(value, dtype=torch.float64).to(getattr(torch, dtype)).item())


# --- the scan ------------------------------------------------------------------------------------


@dataclass
class _Hit:
    rule: str
    call: OpCall
    values: dict[str, Any]  # what fills the rule's message and fix frames


def find_risky(graph: OpGraph, precision: LowPrecision, *, per_call: bool = False) -> list[Finding]:
    """The risky constructs of ``graph`` for ``precision``: one ``precision`` finding per rule and line
    (``per_call``: one per op call, to be confirmed module by module, then :func:`group_findings`)."""
    if precision.dtype not in _LABELS:
        return []
    calls = graph.calls
    users: dict[int, list[int]] = defaultdict(list)
    for c in calls:
        for s in c.sources:
            if s is not None:
                users[s].append(c.index)
    scan = _Scan(calls, users, precision, limits(precision.dtype))
    hits: list[_Hit] = []
    for call in calls:
        if call.phase != Phase.FORWARD:
            continue
        hits.extend(scan.call(call))
    hits.extend(scan.integers())
    found = [_finding(h, precision, scan.lim) for h in hits]
    return found if per_call else group_findings(found)


class _Scan:
    def __init__(self, calls: list[OpCall], users: dict[int, list[int]], precision: LowPrecision, lim: Limits) -> None:
        self.calls = calls
        self.by_index = {c.index: c for c in calls}
        self.users = users
        self.p = precision
        self.lim = lim

    def low(self, call: OpCall) -> bool:
        """Whether ``call`` computes in the low type: its first float input (else its output) is low."""
        floats = [t.dtype for t in call.inputs if t.dtype.startswith(("float", "bfloat"))]
        first = floats[0] if floats else next((t.dtype for t in call.outputs if t.dtype.startswith(("float", "bfloat"))), None)
        return self.p.computes_low(first)

    def call(self, call: OpCall) -> list[_Hit]:
        name = call.name
        if name in _NORMS:
            return self._norm(call)
        if name in ("clamp_min", "clamp") and self.low(call):
            return self._clamp(call)
        if (name in _FILLS or name in _ARITHMETIC) and self.low(call):
            hits = self._fill(call) if name in _FILLS else self._arithmetic(call)
            return hits or self._from_source(call)
        if (name in _ALWAYS_ACCUMULATE or name in _LONG_ACCUMULATE) and self.p.accumulates_low:
            return self._accumulation(call)
        return []

    # where the graph cannot show the constant: a tensor made from a literal, read from the user's line
    def _from_source(self, call: OpCall) -> list[_Hit]:
        """A fill or arithmetic whose constant the graph holds as a tensor (``torch.tensor(-1e9)``): its literal, from the line."""
        arg = self._lifted_argument(call)
        if arg is None or not call.source_line:
            return []
        wanted = [v for v in _literals(call.source_line) if abs(v) > self.lim.max or (v != 0 and self.lim.rounded(v) == 0)]
        hits: list[_Hit] = []
        for value in dict.fromkeys(wanted):
            as_constant = replace(call, constants={**call.constants, arg: value})
            found = self._fill(as_constant) if call.name in _FILLS else self._arithmetic(as_constant)
            for h in found:
                h.call = call
                h.values["what"] = f"{h.values['what']} (a tensor constant: its value read from the source line)"
            hits.extend(found)
        return hits

    def _lifted_argument(self, call: OpCall) -> str | None:
        """The schema name of a 0-dim tensor argument made from a constant in the forward (export's lift_fresh_copy)."""
        position = 0
        for name, metas in call.arg_tensors.items():
            for meta in metas:
                source = call.sources[position] if position < len(call.sources) else None
                position += 1
                if meta.shape == [] and self._is_lifted(source):
                    return name
        return None

    def _is_lifted(self, index: int | None) -> bool:
        for _ in range(4):  # lift_fresh_copy, then detach_ (or a copy) on the way to the op
            call = self.by_index.get(index) if index is not None else None
            if call is None:
                return False
            if call.name == "lift_fresh_copy":
                return True
            if call.name not in ("detach", "detach_", "alias", "clone", "_to_copy", "to"):
                return False
            index = call.sources[0] if call.sources else None
        return False

    # 1. epsilons
    def _norm(self, call: OpCall) -> list[_Hit]:
        eps = call.constants.get("eps")
        if not isinstance(eps, (int, float)) or isinstance(eps, bool) or eps <= 0 or not self.low(call) or not self.p.accumulates_low:
            return []
        if self.lim.rounded(eps) != 0:
            return []
        effect = f"a row of equal values (zero variance) divides by zero in {self.p.label}: rsqrt(0) is inf, and the row turns inf or nan"
        return [_Hit(EPS_RULE, call, {"what": f"{name_of(call)}'s eps", "value": float(eps), "effect": effect})]

    def _clamp(self, call: OpCall) -> list[_Hit]:
        low_bound = call.constants.get("min")
        if not isinstance(low_bound, float) or low_bound <= 0 or self.lim.rounded(low_bound) != 0:
            return []
        after = self._eps_consumer(call)
        effect = (
            f"the clamp lets 0 through, and {after} divides by zero: a zero row (a zero vector) becomes inf or nan"
            if after
            else "the clamp lets 0 through: what it guards becomes 0"
        )
        return [_Hit(EPS_RULE, call, {"what": f"{name_of(call)}'s min", "value": low_bound, "effect": effect})]

    def _eps_consumer(self, call: OpCall) -> str | None:
        """The first op downstream of ``call`` (a few hops) that divides by it, roots or logs it, as ``op at line``."""
        user = self._downstream(call, 3, lambda u: u.name in _EPS_CONSUMERS)
        return f"{name_of(user)}{_at_line(user, call)}" if user else None

    def _downstream(self, call: OpCall, hops: int, wanted: Callable[[OpCall], bool]) -> OpCall | None:
        """The first op within ``hops`` uses of ``call``'s output (breadth first) that is ``wanted``, if any."""
        seen: set[int] = set()
        frontier = [call.index]
        for _ in range(hops):
            nxt = []
            for i in frontier:
                for u in self.users.get(i, ()):
                    if u in seen:
                        continue
                    seen.add(u)
                    user = self.by_index.get(u)
                    if user is None:
                        continue
                    if wanted(user):
                        return user
                    nxt.append(u)
            frontier = nxt
        return None

    # 2. mask constants, 4. constants mixed into the low type
    def _fill(self, call: OpCall) -> list[_Hit]:
        hits = []
        for arg in _FILLS[call.name]:
            value = call.constants.get(arg)
            if not _number(value) or abs(value) <= self.lim.max:
                continue
            rounded = self.lim.rounded(value)
            effect = self._mask_effect(call, rounded)
            if (self.p.served or self.p.own) and call.name.startswith(("masked_fill", "full", "new_full", "fill", "index_fill")):
                effect += (
                    f"; torch's CPU kernels refuse it in {self.p.label} ('value cannot be converted to type ... without overflow'), "
                    "while torch-xla writes the infinity"
                )
            hits.append(
                _Hit(MASK_RULE, call, {"what": f"the {name_of(call)} value", "value": float(value), "max": self.lim.max, "rounded": rounded, "effect": effect})
            )
        return hits

    def _mask_effect(self, call: OpCall, rounded: float) -> str:
        if math.isinf(rounded):
            user = self._mask_user(call)
            where = f" ({name_of(user)}{_at_line(user, call)})" if user else ""
            return f"a row where every position is masked makes softmax{where} compute -inf - -inf = nan"
        return f"it saturates at {rounded:g}, so the mask no longer dominates every score"

    def _mask_user(self, call: OpCall) -> OpCall | None:
        """The softmax-like op the value reaches within a few ops, if any."""
        return self._downstream(call, _MASK_REACH, lambda u: any(m in u.name for m in _MASK_USERS))

    def _arithmetic(self, call: OpCall) -> list[_Hit]:
        value = call.constants.get("other")
        if not _number(value) or value == 0:
            return []
        sym = _ARITHMETIC[call.name]
        rounded = self.lim.rounded(value)
        what = f"{name_of(call)} (x {sym} {value:g})"
        base = {"value": float(value), "rounded": rounded, "max": self.lim.max, "eps": self.lim.eps, "sym": sym, "what": what}
        if abs(value) > self.lim.max:
            user = self._mask_user(call)
            if user is not None:  # an additive or multiplicative mask
                effect = self._mask_effect(call, rounded)
                return [_Hit(MASK_RULE, call, {**base, "what": f"the {name_of(call)} mask constant", "effect": effect})]
            if sym == "/":
                return []  # dividing by a large number shrinks x: nothing overflows
            out = "inf" if math.isinf(rounded) else f"saturated at {rounded:g}"
            if sym == "*":  # torch and torch-xla multiply in float32 and round the product
                effect = f"the product is {out} in {self.p.label} wherever |x| > {self.lim.max / abs(value):.3g}"
            else:
                effect = f"the result is {out} in {self.p.label} unless x cancels the constant"
            return [_Hit(CONSTANT_RULE, call, {**base, "effect": effect})]
        if rounded == 0:
            if sym in "+-":  # an epsilon: adding it does nothing in the low type
                after = self._eps_consumer(call)
                effect = (
                    f"x {sym} eps is x, so where x is 0, {after} divides by zero (a zero-variance row becomes inf or nan)"
                    if after
                    else f"x {sym} eps is x: the epsilon protects nothing"
                )
                return [_Hit(EPS_RULE, call, {"what": "the epsilon", "value": float(value), "effect": effect})]
            # torch and torch-xla compute in float32 and round the result: it is what leaves the range
            if sym == "*":
                effect = f"the product is 0 in {self.p.label} wherever |x| < {self.lim.subnormal / 2 / abs(value):.3g}"
            else:
                effect = f"the quotient is inf in {self.p.label} wherever |x| > {self.lim.max * abs(value):.3g}"
            return [_Hit(CONSTANT_RULE, call, {**base, "effect": effect})]
        if sym in "*/" and abs(rounded) == 1 and abs(value) != 1:
            return [_Hit(CONSTANT_RULE, call, {**base, "effect": f"the scaling does nothing in {self.p.label} (its relative precision is {self.lim.eps:.3g})"})]
        return []

    # 3. accumulations without an upcast
    def _accumulation(self, call: OpCall) -> list[_Hit]:
        if not call.inputs or not self.p.computes_low(call.inputs[0].dtype):
            return []
        if call.outputs and not self.p.computes_low(call.outputs[0].dtype):
            return []  # asked for a wider result (dtype=torch.float32): upcast
        name = call.name
        lab = self.p.label
        if name in _LONG_ACCUMULATE:
            terms = _reduced_terms(call)
            if terms is None or terms <= self.lim.exact:
                return []
            effect = (
                f"it adds {terms} terms, and a running sum in {lab} stops growing once it holds about {self.lim.exact} equal terms "
                f"(2 / eps, eps = {self.lim.eps:g})"
            )
        elif "softmax" in name or name == "logsumexp":
            effect = f"the exponentials are summed in {lab} (relative precision {self.lim.eps:.3g}): close scores lose their order and the row sum is inexact"
        elif name == "exp":
            effect = (
                f"exp is inf above {math.log(self.lim.max):.4g} in {lab}, and each value carries {lab}'s relative error {self.lim.eps:.3g} into what follows"
            )
        else:
            effect = f"the mean and the squared deviations are accumulated in {lab}: a large mean cancels a small variance"
        return [_Hit(ACCUMULATION_RULE, call, {"what": name_of(call), "why": self.p.why_low(), "effect": effect, "fix_call": _upcast_fix(call, self.p)})]

    # 5. integers past the exact range
    def integers(self) -> list[_Hit]:
        bounds: dict[int, int] = {}
        hits: list[_Hit] = []
        for call in self.calls:
            out = call.outputs[0].dtype if call.outputs else None
            bound = self._bound(call, bounds)
            if bound is None:
                continue
            bounds[call.index] = bound
            if out is None or not out.startswith(("float", "bfloat")) or not self.p.computes_low(out) or bound <= self.lim.exact:
                continue
            source = call.sources[0] if call.sources else None
            source_call = self.by_index.get(source) if source is not None else None
            if source_call is not None and source_call.outputs and self.p.computes_low(source_call.outputs[0].dtype):
                continue  # already low upstream: reported where it entered the low type
            hits.append(_Hit(INTEGERS_RULE, call, self._integer_values(call, bound)))
        return hits

    def _bound(self, call: OpCall, bounds: dict[int, int]) -> int | None:
        """The largest magnitude of the integer values ``call`` produces, when they are known."""
        if call.name == "arange":
            return _arange_bound(call.constants)
        source = call.sources[0] if call.sources else None
        if source is None or source not in bounds:
            return None
        if call.name in _KEEPS_VALUES:
            return bounds[source]
        other = call.constants.get("other")
        if call.name in ("add", "sub") and isinstance(other, int) and not isinstance(other, bool):
            return bounds[source] + abs(other)
        if call.name == "mul" and isinstance(other, int) and not isinstance(other, bool):
            return bounds[source] * abs(other)
        return None

    def _integer_values(self, call: OpCall, bound: int) -> dict[str, Any]:
        first = self.lim.exact + 1
        example = f"{first} is {self.lim.rounded(first):g} there"
        if self.lim.rounded(bound) != bound:
            example += f", and {bound} is {self.lim.rounded(bound):g}"
        example += "; positions past it collapse onto their neighbours (rotary angles and position embeddings of distinct positions become equal)"
        if call.name == "arange":
            what = "this arange"
        elif call.name in ("_to_copy", "to", "type_as"):
            what = "the arange cast here"
        else:
            what = f"this {name_of(call)} of an arange"
        return {"what": what, "bound": bound, "exact": self.lim.exact, "example": example}


def name_of(call: OpCall) -> str:
    return call.name.rstrip("_").lstrip("_") or call.name


def _at_line(user: OpCall, origin: OpCall) -> str:
    if user.line is None or (user.file, user.line) == (origin.file, origin.line):
        return " on this line"
    return f" at line {user.line}" if user.file == origin.file else f" at {relative_path(user.file)}:{user.line}"


def _number(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _literals(line: str) -> list[float]:
    """The numeric literals of one line of Python, with their unary minus (``-1e9``); none when it does not tokenize."""
    import io
    import tokenize

    out: list[float] = []
    previous: list[tokenize.TokenInfo] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(line.strip() + "\n").readline):
            if token.type == tokenize.NUMBER:
                try:
                    value = float(token.string.replace("_", ""))
                except ValueError:  # 1j, 0x10
                    value = None
                if value is not None:
                    unary = len(previous) >= 1 and previous[-1].string == "-"
                    if unary and len(previous) >= 2 and (previous[-2].type in (tokenize.NAME, tokenize.NUMBER) or previous[-2].string in ")]"):
                        unary = False  # a subtraction, not a sign
                    out.append(-value if unary else value)
            previous.append(token)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return out
    return out


def _arange_bound(constants: dict[str, Any]) -> int | None:
    values = [constants.get("start", 0), constants.get("end"), constants.get("step", 1)]
    numbers = [int(v) for v in values if _number(v) and float(v).is_integer()]
    if len(numbers) != 3 or numbers[2] == 0:
        return None
    start, end, step = numbers
    count = max(0, math.ceil((end - start) / step))
    if count == 0:
        return None
    return max(abs(start), abs(start + step * (count - 1)))


def _reduced_terms(call: OpCall) -> int | None:
    """How many elements one output element adds up (None when a size is symbolic)."""
    shape = call.inputs[0].shape
    if not all(isinstance(s, int) for s in shape):
        return None
    sizes = [int(s) for s in shape]
    dim = call.constants.get("dim")
    dims = list(range(len(sizes))) if dim is None or dim == [] else [dim] if isinstance(dim, int) else list(dim)
    try:
        return math.prod(sizes[d] for d in dims) if sizes else 1
    except (IndexError, TypeError):
        return None


def _upcast_fix(call: OpCall, precision: LowPrecision) -> str:
    name = name_of(call)
    if "softmax" in name:
        how = f"{name}(x, dim, dtype=torch.float32), then .to(x.dtype)"
    elif name in ("sum", "cumsum", "nansum", "mean"):
        how = f"x.{name}(dim, dtype=torch.float32), then .to(x.dtype)"
    else:
        how = "compute it on x.float() and cast the result back (.to(x.dtype))"
    if not precision.served:
        how += "; or keep mixed-precision accumulation on (neuronx-cc's default since Neuron 2.27)"
    return how


def _finding(hit: _Hit, precision: LowPrecision, lim: Limits) -> Finding:
    """One call's finding, its rule's frames filled with the low type's limits and the hit's numbers."""
    rule = load_precision_rules().rules[hit.rule]
    values = {
        "low": precision.label,
        "dtype": precision.dtype,
        "max": lim.max,
        "normal": lim.normal,
        "subnormal": lim.subnormal,
        "eps": lim.eps,
        "sym": "*",
        "value": 0.0,
        **hit.values,
    }
    call = hit.call
    return Finding.at(
        hit.rule,
        SourceLocation(relative_path(call.file), call.line),
        call.op,
        rule.message.format(**values),
        fix=rule.fix.format(**values),
        module=call.module,
        source_line=call.source_line,
        shapes=call.shapes(),
        phase=Phase(call.phase),
    )


def group_findings(found: Iterable[Finding]) -> list[Finding]:
    """One finding per rule and line (a line in a block repeated 12 times is one thing to fix), counting the calls.

    The finding kept is the call whose confirmation says most (its module is where it was measured);
    the other ops of the group are named.
    """
    groups: dict[tuple[str, str | None, int | None], list[Finding]] = defaultdict(list)
    for f in found:
        groups[(f.rule, f.file, f.line)].append(f)
    out = []
    for items in groups.values():
        best = items[0]
        for f in items[1:]:
            if _strength(f.confirmation) > _strength(best.confirmation):
                best = f
        others = sorted({_short(f.op) for f in items} - {_short(best.op)})
        message = best.message + (f" (also on this line: {', '.join(others)})" if others else "")
        out.append(replace(best, count=sum(f.count for f in items), message=message))
    return out


def _short(op: str) -> str:
    return op.split("::")[-1].split(".")[0].strip("_")


# --- confirmation by the emulation -----------------------------------------------------------------


class DriftRow(Protocol):
    """What :func:`confirm` reads of one module's row of the parity run's drift table."""

    module: str
    nonfinite: int
    exceeds: bool


def confirm(findings: Iterable[Finding], drift_rows: Sequence[DriftRow], low_type: str, run: str = "emulation") -> list[Finding]:
    """Each finding with what the emulated ``low_type`` run measured at the module holding its line.

    ``drift_rows`` are in execution order (a module's row after its children's; the model
    itself is ``""``; a module called again is ``"path (call 2)"``). A finding whose module's
    output is non-finite (or beyond the tolerance) where no earlier module's, other than its
    own submodules', already was *matters*; off but already off upstream is *upstream*; a
    row within tolerance is *no effect*; no row for the module is *not reached*. ``low_type``
    names the run in the message (``fp16``, or a precision's label), ``run`` what kind of run it
    was. Findings of other rules pass through unchanged.
    """
    rows = list(drift_rows)
    positions: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        positions[_base(r.module)].append(i)
    rule_ids = set(load_precision_rules().rules)
    out = []
    for f in findings:
        if f.rule not in rule_ids:
            out.append(f)
            continue
        key = f.module or ""
        judged = [_judge(rows, i, key) for i in positions.get(key, ())]
        state, upstream = max(judged, key=lambda j: _STRENGTH[j[0]]) if judged else (Confirmation.NOT_REACHED, None)
        words = state.words if upstream is None else f"{state.words} (first at {upstream or 'the model itself'})"
        out.append(replace(f, confirmation=state, message=f"{f.message} [{low_type} {run}: {words}]"))
    return out


# How much a confirmation says, for a module called more than once (the strongest call wins).
_STRENGTH = {Confirmation.NOT_REACHED: 0, Confirmation.NO_EFFECT: 1, Confirmation.UPSTREAM: 2, Confirmation.MATTERS: 3}


def _strength(state: Confirmation | None) -> int:
    return -1 if state is None else _STRENGTH[state]


def strongest(states: Iterable[Confirmation | None]) -> Confirmation | None:
    """The most telling of several runs' confirmations of one finding (None: none judged it)."""
    present = [s for s in states if s is not None]
    return max(present, key=lambda s: _STRENGTH[s]) if present else None


def _base(module: str | None) -> str:
    """A drift row's module path without its ``(call n)`` suffix."""
    return (module or "").split(" (call ")[0]


def _judge(rows: list[DriftRow], i: int, key: str) -> tuple[Confirmation, str | None]:
    row = rows[i]
    nonfinite = bool(row.nonfinite)
    if not nonfinite and not row.exceeds:
        return Confirmation.NO_EFFECT, None
    for earlier in rows[:i]:
        path = _base(earlier.module)
        inside = key == "" or path == key or path.startswith(key + ".")
        if not inside and (bool(earlier.nonfinite) if nonfinite else bool(earlier.exceeds)):
            return Confirmation.UPSTREAM, earlier.module
    return Confirmation.MATTERS, None


# --- the parity run's risky constructs ------------------------------------------------------------


def low_precision(info: PrecisionInfo) -> LowPrecision | None:
    """Where a parity precision computes in a storage low type, for the scan (None: nowhere it can find).

    A model served in bf16/fp16 computes in that type (and ``--auto-cast all`` of the same type changes
    nothing more); an fp32 model under ``--auto-cast all`` computes every fp32 op in the auto-cast type.
    ``matmult`` casts only matmul inputs, which none of the constructs are, and ``tf32`` is no storage type.
    """
    mpa = info.mixed_precision_accumulation
    cast_all = str(info.auto_cast) == "all" and str(info.auto_cast_type) in LOW_DTYPES
    if str(info.dtype) in LOW_DTYPES:
        dtype = LOW_DTYPES[str(info.dtype)]
        return LowPrecision(dtype, served=True, auto_cast_all=cast_all and LOW_DTYPES[str(info.auto_cast_type)] == dtype, fp32_accumulation=mpa)
    if cast_all:
        return LowPrecision(LOW_DTYPES[str(info.auto_cast_type)], auto_cast_all=True, fp32_accumulation=mpa)
    return None


@dataclass
class RiskyScan:
    """The risky constructs of a parity run, each confirmed by the run of its precision, and what was not scanned."""

    findings: list[Finding]
    notes: list[str]


def scan_parity(result: ParityResult) -> RiskyScan:
    """The risky constructs for every emulated precision of ``result``, confirmed by that precision's drift rows.

    The graph is captured once per served dtype, from the model as it ran and its first input (cast as
    served, so its dtypes show where the user upcast). The lines the model computes in a low type of its own
    are judged in that type too, whatever the precisions (:func:`scan_own_dtypes`). One finding per rule and
    line: found under several precisions, it keeps the most telling confirmation, whose run its message names.
    """
    from neuronprobe.parity import emulate
    from neuronprobe.parity.drift import module_prefix
    from neuronprobe.parity.precision import Precision

    graphs: dict[str, OpGraph | None] = {}  # by served dtype; "fp32": the model as it is
    notes: list[str] = []
    kept: dict[tuple[str, str | None, int | None], Finding] = {}
    args, kwargs = result.inputs[0]
    for run in result.section.runs:
        info = run.precision
        low = low_precision(info) if run.run is ParityRun.EMULATED else None
        if low is None:
            continue
        served = str(info.dtype)
        if served not in graphs:
            precision = Precision(info.auto_cast, info.auto_cast_type, info.dtype, info.mixed_precision_accumulation)
            module, a, k = emulate.served(result.loaded.module, args, kwargs, precision)
            try:
                graphs[served] = capture(module, a, k, strip_module_prefix=module_prefix(result.loaded))  # the drift rows' names
            except ForwardError as exc:
                graphs[served] = None
                notes.append(f"risky low-precision constructs not scanned in {served}: the forward raises there ({exc})")
        graph = graphs[served]
        if graph is None:
            continue
        found = find_risky(graph, low, per_call=True)
        name = f"{low.label} ({info.label})"
        if run.error and not run.modules:
            found = [replace(f, message=f"{f.message} [{name} emulation: no numbers, {run.error}]") for f in found]
        else:
            found = confirm(found, run.modules, name)
        _keep(kept, group_findings(found))
    own = scan_own_dtypes(result, graphs.get(str(ServedDtype.FP32)) if str(ServedDtype.FP32) in graphs else _capture_as_is(result, notes))
    _keep(kept, own)
    return RiskyScan(list(kept.values()), notes)


def _keep(kept: dict[tuple[str, str | None, int | None], Finding], found: Iterable[Finding]) -> None:
    """Add ``found`` to ``kept``, one per rule and line: the more telling confirmation wins."""
    for f in found:
        key = (f.rule, f.file, f.line)
        if key not in kept or strongest([kept[key].confirmation, f.confirmation]) != kept[key].confirmation:
            kept[key] = f


def _capture_as_is(result: ParityResult, notes: list[str]) -> OpGraph | None:
    """The graph of the model as it ran in the reference (its own dtypes), or None with a note."""
    from neuronprobe.parity.drift import module_prefix

    args, kwargs = result.inputs[0]
    try:
        return capture(result.loaded.module, args, kwargs, strip_module_prefix=module_prefix(result.loaded))
    except ForwardError as exc:
        notes.append(f"risky low-precision constructs in the model's own dtypes not scanned: the forward raises ({exc})")
        return None


def own_low_dtypes(graph: OpGraph) -> list[str]:
    """The low storage types (:data:`LOW_DTYPES`) some forward call of ``graph`` computes in, in first-use order."""
    low = set(LOW_DTYPES.values())
    seen = [t.dtype for c in graph.calls if c.phase == Phase.FORWARD for t in (*c.inputs, *c.outputs) if t.dtype in low]
    return list(dict.fromkeys(seen))


@dataclass
class _ReferenceRow:
    """A reference module call as a :class:`DriftRow`: its own output's non-finite elements."""

    module: str
    nonfinite: int
    exceeds: bool


def _reference_rows(result: ParityResult) -> list[_ReferenceRow]:
    """The model as it is, run again on the first input: each module call's non-finite output elements, in order."""
    import torch

    from neuronprobe.parity import drift

    args, kwargs = result.inputs[0]
    module = result.loaded.module
    with torch.no_grad():
        ref = drift.record_reference(module, lambda: module(*args, **kwargs), lines=False, strip=drift.module_prefix(result.loaded))
    rows = []
    for c in ref.calls:
        bad = sum(int((~torch.isfinite(t)).sum()) for t in c.tensors)
        rows.append(_ReferenceRow(c.key, bad, bad > 0))
    return rows


def scan_own_dtypes(result: ParityResult, graph: OpGraph | None) -> list[Finding]:
    """The risky constructs of the lines the model itself computes in a low type, judged in that type.

    ``graph`` is the model as it is (no precision applied): a call's dtypes are the model's own. Each low type
    found there is scanned as if served in it (its accumulations stay in it: that is what the user's code asks
    for), and confirmed by the model's own run on the CPU: the module holding the line is where its output
    first turns non-finite, or not.
    """
    if graph is None:
        return []
    dtypes = own_low_dtypes(graph)
    if not dtypes:
        return []
    rows = _reference_rows(result)
    found: list[Finding] = []
    for dtype in dtypes:
        low = LowPrecision(dtype, own=True)
        hits = find_risky(graph, low, per_call=True)
        found.extend(group_findings(confirm(hits, rows, low.label, run="(the model's own dtype) run on the CPU")))
    return found


def add_risky(report: Report, result: ParityResult) -> Report:
    """``report`` with the parity run's risky constructs among its findings (notes: the verdict does not change)."""
    from neuronprobe.report.model import Limitation, place_cells

    scan = scan_parity(result)
    report.findings.extend(scan.findings)
    report.findings.sort(key=lambda f: (-f.verdict.rank, f.file or "", f.line or 0))
    report.summary.findings_total = len(report.findings)
    forward = report.summary.phases.get(Phase.FORWARD)
    if forward is not None:
        forward.findings += len(scan.findings)
    report.not_analysed.extend(Limitation(what="parity: risky constructs", why=n) for n in scan.notes)
    place_cells(report)
    return report


__all__ = [
    "ACCUMULATION_RULE",
    "CONSTANT_RULE",
    "EPS_RULE",
    "INTEGERS_RULE",
    "LOW_DTYPES",
    "MASK_RULE",
    "Limits",
    "LowPrecision",
    "RiskyScan",
    "add_risky",
    "confirm",
    "find_risky",
    "group_findings",
    "limits",
    "low_precision",
    "own_low_dtypes",
    "scan_own_dtypes",
    "scan_parity",
    "strongest",
]
