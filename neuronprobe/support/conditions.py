"""When a support rule applies: conditions on an op call's dtypes, arguments and shapes.

A rule's ``when`` is a list of conditions that must all hold. Each condition is
one small JSON object, read and checked by :func:`parse_condition` so that a
typo in the rule file is one clear error naming the rule, never a silent
non-match at classification time:

* ``{"arg": NAME, "eq"|"ne": V}``, ``{"arg": NAME, "in"|"not_in": [V, ...]}``:
  a non-tensor argument by its schema name (the schema's default when the call
  leaves it out).
* ``{"arg": NAME, "any_ne": V}``: a list argument with an element other than V
  (``dilation != 1``).
* ``{"arg": NAME, "empty": true}``: a list argument left empty (or None), as
  ``amax()`` without ``dim`` calls ``aten::amax`` with ``dim=[]``.
* ``{"arg": NAME, "not_divides": TENSOR}``: some trailing size of input TENSOR
  is not a multiple of the matching element of the list argument (torch-xla
  lowers an adaptive pool only when each output size divides the input size).
* ``{"tensor": NAME, "dtype_in": [DTYPE, ...]}``: a tensor input by schema name,
  or ``"out"`` for the first output; a list of tensors matches if any does.
* ``{"tensor": NAME, "dim": D, "gt"|"lt": N}``: a shape bound on one size.
* ``{"any": [COND, ...]}``: at least one of the conditions holds;
  ``{"all": [COND, ...]}``: every one does (inside an ``any``).

A condition whose value the capture did not record (a symbolic size, an
argument that is neither given nor defaulted) is *undecided* and does not hold:
a rule fires only on evidence.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

ARG_TESTS: tuple[str, ...] = ("eq", "ne", "in", "not_in", "any_ne", "not_divides", "empty")
TENSOR_TESTS: tuple[str, ...] = ("dtype_in", "gt", "lt")
OUTPUT_NAME = "out"
_MISSING = object()


class ConditionError(ValueError):
    """A condition that cannot be read; the caller names the rule."""


@dataclass(frozen=True)
class Condition:
    """One parsed condition: ``subject`` is "arg", "tensor", "any" or "all"."""

    subject: str
    name: str = ""
    test: str = ""
    value: Any = None
    dim: int | None = None
    children: tuple[Condition, ...] = ()

    def describe(self) -> str:
        """The condition in words, for a finding's reason."""
        if self.subject in ("any", "all"):
            return "(" + f" {'or' if self.subject == 'any' else 'and'} ".join(c.describe() for c in self.children) + ")"
        words = {"eq": "==", "ne": "!=", "in": "in", "not_in": "not in", "gt": ">", "lt": "<"}
        if self.test == "any_ne":
            return f"{self.name} has an element != {self.value!r}"
        if self.test == "empty":
            return f"{self.name} is empty"
        if self.test == "not_divides":
            return f"{self.name} does not divide the trailing sizes of {self.value}"
        if self.test == "dtype_in":
            return f"{self.name} is {'/'.join(self.value)}"
        if self.subject == "tensor":
            return f"{self.name}.size({self.dim}) {words[self.test]} {self.value}"
        return f"{self.name} {words[self.test]} {self.value!r}"

    def names(self) -> set[tuple[str, str]]:
        """(subject, name) pairs this condition reads, to check them against op schemas."""
        if self.subject in ("any", "all"):
            return set().union(*(c.names() for c in self.children))
        found = {(self.subject, self.name)}
        if self.test == "not_divides":
            found.add(("tensor", str(self.value)))
        return found


def _short(doc: Any) -> str:
    """A condition as the error quotes it: JSON, cut at 120 characters (a hostile one may be huge or deep)."""
    import json

    try:
        text = json.dumps(doc)
    except (TypeError, ValueError, RecursionError):
        text = type(doc).__name__
    return text if len(text) <= 120 else text[:117] + "..."


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def parse_condition(doc: Any) -> Condition:
    """Read one condition object; :class:`ConditionError` says what is wrong with it."""
    if not isinstance(doc, dict):
        raise ConditionError(f"a condition must be an object, got {_short(doc)}")
    for group in ("any", "all"):
        if group in doc:
            if set(doc) != {group} or not isinstance(doc[group], list) or not doc[group]:
                raise ConditionError(f'"{group}" takes a non-empty list of conditions and nothing else: {_short(doc)}')
            return Condition(group, children=tuple(parse_condition(c) for c in doc[group]))
    if "arg" in doc:
        tests = [k for k in doc if k != "arg"]
        if len(tests) != 1 or tests[0] not in ARG_TESTS:
            raise ConditionError(f"an arg condition takes exactly one of {', '.join(ARG_TESTS)}: {_short(doc)}")
        if not isinstance(doc["arg"], str) or not doc["arg"]:
            raise ConditionError(f'"arg" takes the name of an argument: {_short(doc)}')
        test = tests[0]
        value = doc[test]
        if test in ("in", "not_in") and not (isinstance(value, list) and all(_scalar(v) for v in value)):
            raise ConditionError(f'"{test}" takes a list of numbers, strings, booleans or null: {_short(doc)}')
        if test in ("eq", "ne", "any_ne") and not _scalar(value):
            raise ConditionError(f'"{test}" takes a number, string, boolean or null: {_short(doc)}')
        if test == "empty" and value is not True:
            raise ConditionError(f'"empty" takes true: {_short(doc)}')
        if test == "not_divides" and not isinstance(value, str):
            raise ConditionError(f'"not_divides" takes the name of a tensor input: {_short(doc)}')
        return Condition("arg", doc["arg"], test, tuple(value) if isinstance(value, list) else value)
    if "tensor" in doc:
        if not isinstance(doc["tensor"], str) or not doc["tensor"]:
            raise ConditionError(f'"tensor" takes the name of a tensor input (or "out"): {_short(doc)}')
        if "dtype_in" in doc:
            dtypes = doc["dtype_in"]
            if set(doc) != {"tensor", "dtype_in"} or not isinstance(dtypes, list) or not dtypes or not all(isinstance(d, str) for d in dtypes):
                raise ConditionError(f'"dtype_in" takes a non-empty list of dtype names and nothing else: {_short(doc)}')
            return Condition("tensor", doc["tensor"], "dtype_in", frozenset(dtypes))
        bound = [k for k in ("gt", "lt") if k in doc]
        if len(bound) != 1 or set(doc) != {"tensor", "dim", bound[0]} or not isinstance(doc["dim"], int) or isinstance(doc["dim"], bool):
            raise ConditionError(f'a tensor condition is "dtype_in", or "dim" with one of "gt"/"lt": {_short(doc)}')
        if not isinstance(doc[bound[0]], int) or isinstance(doc[bound[0]], bool):
            raise ConditionError(f'"{bound[0]}" takes an integer size: {_short(doc)}')
        return Condition("tensor", str(doc["tensor"]), bound[0], doc[bound[0]], dim=doc["dim"])
    raise ConditionError(f'a condition names "arg", "tensor", "any" or "all": {_short(doc)}')


@lru_cache(maxsize=4096)
def schema_arguments(op_key: str) -> dict[str, tuple[bool, Any]] | None:
    """``{name: (is_tensor, default)}`` of an aten op's schema, or None when torch does not know it.

    ``op_key`` is the support-table spelling (``max_pool2d_with_indices`` or
    ``norm.ScalarOpt_dim``). ``default`` is ``_MISSING`` for required arguments.
    """
    import torch

    name, _, overload = op_key.partition(".")
    try:  # a user's rule may name anything: an op torch lacks is None, whatever torch raises for it
        packet = getattr(torch.ops.aten, name, None)
        op = getattr(packet, overload or "default") if packet is not None else None
        schema = op._schema if op is not None else None
    except (AttributeError, RuntimeError, TypeError, ValueError):
        return None
    if schema is None:
        return None
    out: dict[str, tuple[bool, Any]] = {}
    for arg in schema.arguments:
        text = str(arg.type)
        is_tensor = "Tensor" in text
        out[arg.name] = (is_tensor, arg.default_value if arg.has_default_value() else _MISSING)
    return out


def _arg_value(call: Any, name: str) -> Any:
    if name in call.constants:
        return call.constants[name]
    schema = schema_arguments(call.key)
    if schema and name in schema and schema[name][1] is not _MISSING:
        return schema[name][1]
    return _MISSING


def _tensors(call: Any, name: str) -> list[Any]:
    if name == OUTPUT_NAME:
        return list(call.outputs[:1])
    named = getattr(call, "arg_tensors", None) or {}
    return list(named.get(name, ()))


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def holds(cond: Condition, call: Any) -> bool:
    """Whether ``cond`` holds for one captured call; undecided values do not hold."""
    if cond.subject == "any":
        return any(holds(c, call) for c in cond.children)
    if cond.subject == "all":
        return all(holds(c, call) for c in cond.children)
    if cond.subject == "tensor":
        metas = _tensors(call, cond.name)
        if cond.test == "dtype_in":
            return any(m.dtype in cond.value for m in metas)
        for m in metas:
            if -len(m.shape) <= (cond.dim or 0) < len(m.shape):
                size = m.shape[cond.dim or 0]
                if isinstance(size, int) and (size > cond.value if cond.test == "gt" else size < cond.value):
                    return True
        return False
    value = _arg_value(call, cond.name)
    if value is _MISSING:
        return False
    if cond.test == "eq":
        return bool(value == cond.value)
    if cond.test == "ne":
        return bool(value != cond.value)
    if cond.test == "in":
        return value in cond.value
    if cond.test == "not_in":
        return value not in cond.value
    if cond.test == "any_ne":
        return value is not None and any(v != cond.value for v in _as_list(value))
    if cond.test == "empty":
        return value is None or (isinstance(value, (list, tuple)) and len(value) == 0)
    # not_divides: the trailing sizes of the tensor against the list argument, element by element
    metas = _tensors(call, str(cond.value))
    sizes = _as_list(value)
    if not metas or value is None or not sizes:
        return False
    shape = metas[0].shape[-len(sizes) :] if len(metas[0].shape) >= len(sizes) else []
    pairs = list(zip(shape, sizes, strict=False))
    if not pairs or any(not isinstance(s, int) or not isinstance(o, int) or o <= 0 for s, o in pairs):
        return False
    return any(s % o != 0 for s, o in pairs)
