"""neuronx-cc's integer downcasts, conditional on the release and the compiler flags (both stacks).

From Neuron 2.32, ``--implicit-integer-downcast`` decides what neuronx-cc does with integer work its
engines compute in floating point (integer dot, scatter-with-compute, all-reduce, reduce-scatter: f32,
exact below 2**24) or in 32 bits (int64 ``pow``): allowed (``all``, or a list naming the class), it
compiles with a warning and the results are only exact in range (a ``precision`` note at the line);
refused (``none``, or a list not naming it), it is the error NCC_EVRF035/060/061/062/063.
``--native-int64=enabled`` (trn2+) keeps int64 ``pow`` in 64 bits. The flags are read from
``--compiler-args`` or, as neuronx-cc reads them, ``NEURON_CC_FLAGS``. Without the flag the bundled
rules answer (``data/integer_downcast.json`` says why: the release the default changed in is announced,
not confirmed). The data file names every source.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from neuronprobe.errors import InputError
from neuronprobe.support.rule import release_key
from neuronprobe.vocabulary import Verdict

FLAG_VARIABLE = "NEURON_CC_FLAGS"


@dataclass(frozen=True)
class DowncastClass:
    id: str
    ops: frozenset[str]
    dtypes: frozenset[str]
    ncc_code: str
    computes_in: str
    exact_below: str
    native_int64: bool = False


@dataclass(frozen=True)
class CompilerFlags:
    """The integer flags in force, and where they came from (``--compiler-args`` or NEURON_CC_FLAGS)."""

    downcast: str | None = None  # default | all | none | a comma list of classes
    native_int64: str | None = None  # default | enabled | disabled
    source: str = ""

    @property
    def given(self) -> bool:
        return self.downcast not in (None, "default") or self.native_int64 not in (None, "default")


@lru_cache(maxsize=1)
def load() -> tuple[dict[str, Any], tuple[DowncastClass, ...]]:
    doc = json.loads(resources.files("neuronprobe.support").joinpath("data", "integer_downcast.json").read_text(encoding="utf-8"))
    classes = tuple(
        DowncastClass(c["id"], frozenset(c["ops"]), frozenset(c["dtypes"]), c["ncc_code"], c["computes_in"], c["exact_below"], bool(c.get("native_int64")))
        for c in doc["classes"]
    )
    return doc, classes


def _value(args: list[str], flag: str) -> str | None:
    found = None
    for i, arg in enumerate(args):
        if arg.startswith(flag + "="):
            found = arg.split("=", 1)[1]
        elif arg == flag and i + 1 < len(args):
            found = args[i + 1]
    return found


def parse_flags(compiler_args: str | None, environ: Mapping[str, str]) -> CompilerFlags:
    """The integer flags of ``--compiler-args`` (which wins) or of ``NEURON_CC_FLAGS``; a bad value is an InputError."""
    doc, classes = load()
    text, source = (compiler_args, "--compiler-args") if compiler_args else (environ.get(FLAG_VARIABLE, ""), FLAG_VARIABLE)
    try:
        args = shlex.split(text or "")
    except ValueError as exc:
        raise InputError(f"{source}: cannot split {text!r} into arguments ({exc})") from None
    downcast, native = _value(args, doc["flag"]), _value(args, doc["native_int64_flag"])
    allowed = {"default", "all", "none"} | {c.id for c in classes}
    if downcast is not None and not set(downcast.split(",")) <= allowed:
        raise InputError(f"{source}: {doc['flag']}={downcast}: use default, all, none or a comma list of {', '.join(c.id for c in classes)}")
    if native is not None and native not in ("default", "enabled", "disabled"):
        raise InputError(f"{source}: {doc['native_int64_flag']}={native}: use default, enabled or disabled")
    return CompilerFlags(downcast, native, source if downcast or native else "")


def _matches(cls: DowncastClass, call: Any) -> bool:
    if call.key not in cls.ops and call.name not in cls.ops:
        return False
    tensors = call.outputs or call.inputs
    return bool(tensors) and tensors[0].dtype in cls.dtypes


def adjust(call: Any, result: Any, flags: CompilerFlags, sdk: str | None, make: Callable[..., Any], *, own_default: bool = False) -> Any:
    """``result`` (a Classification), replaced where the flags decide the call's integer downcast.

    ``make`` builds the new Classification (the caller's type). Releases before 2.32 have no such
    flags: the bundled rules stand. ``own_default``: the caller has no bundled integer rules (the
    native stack's kernels), so without the flag this module applies the error pages' default, refused.
    """
    doc, classes = load()
    if (not flags.given and not own_default) or (sdk and release_key(sdk) < release_key(doc["sdk_from"])):
        return result
    if result.verdict not in (Verdict.LOWERED, Verdict.DECOMPOSED, Verdict.PRECISION, Verdict.COMPILE_ERROR):
        return result  # a fallback or a data-dependent op never reaches neuronx-cc as this class
    cls = next((c for c in classes if _matches(c, call)), None)
    if cls is None:
        return result
    if cls.native_int64 and flags.native_int64 == "enabled":
        return make(Verdict.LOWERED, f"int-downcast-{cls.id}", f"{call.op}: int64 stays 64-bit with {doc['native_int64_flag']}=enabled ({flags.source}; trn2+)")
    if flags.downcast in (None, "default") and not own_default:
        return result
    if flags.downcast in (None, "default"):
        flags = CompilerFlags("none", flags.native_int64, "no flag: refused by default, as the error-code pages say")
    rule = f"int-downcast-{cls.id.replace('_', '-')}"
    allowed = flags.downcast == "all" or cls.id in str(flags.downcast).split(",")
    if allowed:
        return make(
            Verdict.PRECISION,
            rule,
            f"{call.op} on {call.outputs[0].dtype if call.outputs else 'integer'} operands compiles with {doc['flag']}={flags.downcast} "
            f"({flags.source}, neuronx-cc 2.32+): computed in {cls.computes_in}, exact only below {cls.exact_below}",
            f"keep the values below {cls.exact_below}, or compute in float yourself so the reference matches; "
            f"{doc['flag']}=none turns this into the error {cls.ncc_code}",
        )
    return make(
        Verdict.COMPILE_ERROR,
        rule,
        f"{call.op} on integer operands is refused with {doc['flag']}={flags.downcast} ({flags.source}, neuronx-cc 2.32+): "
        f"the engine computes it in {cls.computes_in}, exact only below {cls.exact_below}",
        f"cast to float before the op, or allow it with {doc['flag']}={cls.id} (or all)",
        cls.ncc_code,
    )
