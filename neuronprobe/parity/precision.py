"""A Neuron precision: what the compiler computes in, as ``neuronx-cc`` flags and the served dtype say.

The compiler's flags (SDK ``compiler/neuronx-cc/api-reference-guide``): ``--auto-cast
none|matmult|all`` with ``--auto-cast-type bf16|fp16|tf32|fp8_e4m3``, and
``--enable-mixed-precision-accumulation`` / ``--disable-mixed-precision-accumulation``.
Neuron 2.27 (2025-12-19) changed the defaults: before it, fp32 matmuls were cast to bf16
with fp32 accumulation (``--auto-cast matmult --auto-cast-type bf16``); from it on,
``--auto-cast none`` with mixed-precision accumulation on (fp32 intermediates for softmax,
norms and the like). Research notes: ``shared/research/serving.md`` ("Numerical parity").

This module also reads the user's flags into precisions (:func:`requested_precisions`):
each of ``--auto-cast``, ``--auto-cast-type``, ``--dtype`` and
``--mixed-precision-accumulation`` takes one value or a comma list, and the precisions
run are their product; ``--sdk RELEASE`` (repeatable) adds that release's compiler
default; ``--precision SPEC`` (repeatable) adds one exactly (``matmult:bf16``,
``all:fp8_e4m3,dtype=bf16,mpa=off``). With no flag at all, :data:`DEFAULT_PRECISIONS`.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from neuronprobe.errors import InputError
from neuronprobe.report.model import PrecisionInfo
from neuronprobe.support.rulefile import RELEASE  # a release as rule files write it (2.27.0: at most 4 digits a part)
from neuronprobe.vocabulary import AutoCast, LowType, ServedDtype, Word

# The first release whose compiler defaults to --auto-cast none with mixed-precision accumulation on.
DEFAULTS_CHANGED_IN = (2, 27)


@dataclass(frozen=True)
class Precision:
    """One way Neuron may compute a model: compiler auto-cast, the dtype it is served in, and accumulation."""

    auto_cast: AutoCast = AutoCast.NONE
    auto_cast_type: LowType = LowType.BF16
    dtype: ServedDtype = ServedDtype.FP32
    mixed_precision_accumulation: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "auto_cast", AutoCast(self.auto_cast))
        object.__setattr__(self, "auto_cast_type", LowType(self.auto_cast_type))
        object.__setattr__(self, "dtype", ServedDtype(self.dtype))

    @property
    def label(self) -> str:
        """Short words for the table: ``matmult/bf16 fp32 mpa-on``."""
        cast = "no-cast" if self.auto_cast is AutoCast.NONE else f"{self.auto_cast}/{self.auto_cast_type}"
        return f"{cast} {self.dtype} mpa-{'on' if self.mixed_precision_accumulation else 'off'}"

    @property
    def is_fp32(self) -> bool:
        """True when nothing is narrowed: the run is the fp32 reference itself."""
        return self.auto_cast is AutoCast.NONE and self.dtype is ServedDtype.FP32

    @property
    def low_type(self) -> str:
        """The narrowest type the precision computes matmuls in (ULPs are counted in it): a LowType or ServedDtype value."""
        if self.auto_cast is not AutoCast.NONE and self.auto_cast_type is not LowType.TF32:
            return str(self.auto_cast_type)
        if self.auto_cast is not AutoCast.NONE and self.dtype is ServedDtype.FP32:
            return str(LowType.TF32)
        return str(self.dtype)

    def flags(self) -> str:
        """The neuronx-cc flags (and the served dtype) that give this precision."""
        accumulation = "--enable-mixed-precision-accumulation" if self.mixed_precision_accumulation else "--disable-mixed-precision-accumulation"
        cast = f"--auto-cast {self.auto_cast}" + ("" if self.auto_cast is AutoCast.NONE else f" --auto-cast-type {self.auto_cast_type}")
        return f"{cast} {accumulation}; model served in {self.dtype}"


def _release(release: str) -> tuple[int, ...]:
    if not RELEASE.match(release.strip()):
        raise InputError(f"--sdk {release!r}: expected a Neuron SDK release such as 2.26 or 2.27.0")
    return tuple(int(p) for p in release.strip().split("."))


def sdk_default(release: str) -> Precision:
    """What neuronx-cc computes an fp32 model in by default in Neuron SDK ``release``.

    Before 2.27: ``--auto-cast matmult --auto-cast-type bf16``, fp32 accumulation (matmul
    inputs in bf16); mixed-precision accumulation was not yet the default. From 2.27 on:
    ``--auto-cast none`` with mixed-precision accumulation enabled (SDK 2.27 release
    notes and the neuronx-cc api-reference-guide, summarised in research/serving.md).
    """
    if _release(release)[:2] >= DEFAULTS_CHANGED_IN:
        return Precision(AutoCast.NONE, LowType.BF16, ServedDtype.FP32, True)
    return Precision(AutoCast.MATMULT, LowType.BF16, ServedDtype.FP32, False)


# No flag given: the compiler default before 2.27, the model served in bf16 (NxD Inference's usual
# dtype), and the compiler default from 2.27 on (fp32 stays fp32: a check that nothing else narrows).
DEFAULT_PRECISIONS: tuple[Precision, ...] = (
    sdk_default("2.26"),
    Precision(AutoCast.NONE, LowType.BF16, ServedDtype.BF16, True),
    sdk_default("2.27"),
)

_ON_OFF = {"on": True, "off": False, "true": True, "false": False, "1": True, "0": False}


def _choices(text: str | None, kind: type[Word], flag: str) -> list[str]:
    if text is None:
        return []
    values = list(dict.fromkeys(v.strip().lower() for v in text.split(",") if v.strip()))  # each value once, in order
    if not values:
        raise InputError(f"{flag} {text!r}: give a value")
    for v in values:
        if v not in kind.values():
            raise InputError(f"{flag} {v!r}: expected one of {', '.join(kind.values())}")
    return values


def _on_off(text: str | None, flag: str) -> list[bool]:
    if text is None:
        return []
    out = []
    for v in (v.strip().lower() for v in text.split(",") if v.strip()):
        if v not in _ON_OFF:
            raise InputError(f"{flag} {v!r}: expected on or off")
        out.append(_ON_OFF[v])
    if not out:
        raise InputError(f"{flag} {text!r}: give on or off")
    return list(dict.fromkeys(out))


def parse_precision(spec: str) -> Precision:
    """One precision from ``--precision``: ``CAST[:TYPE]`` and/or ``dtype=D``, ``mpa=on|off``, comma-separated.

    ``matmult:bf16``, ``all:fp8_e4m3,mpa=off``, ``none,dtype=bf16``, ``dtype=fp16``.
    """
    values: dict[str, str] = {}
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        key, sep, value = part.partition("=")
        if not sep:
            cast, _, low = part.partition(":")
            values["auto-cast"] = cast
            if low:
                values["auto-cast-type"] = low
            continue
        key = key.strip().lower()
        if key not in ("auto-cast", "auto-cast-type", "dtype", "mpa"):
            raise InputError(f"--precision {spec!r}: unknown key {key!r}; use CAST[:TYPE], dtype=, mpa=")
        values[key] = value.strip()
    if not values:
        raise InputError("--precision '': give e.g. matmult:bf16 or dtype=bf16")
    flag = f"--precision {spec!r}"
    cast = _choices(values.get("auto-cast", "none"), AutoCast, flag)[0]
    low = _choices(values.get("auto-cast-type", "bf16"), LowType, flag)[0]
    dtype = _choices(values.get("dtype", "fp32"), ServedDtype, flag)[0]
    mpa = _on_off(values.get("mpa", "on"), flag)[0]
    return Precision(AutoCast(cast), LowType(low), ServedDtype(dtype), mpa)


# The most precisions one parity command runs: every combination of the flags' values is 72.
MAX_PRECISIONS = 128


def requested_precisions(
    *,
    auto_cast: str | None = None,
    auto_cast_type: str | None = None,
    dtype: str | None = None,
    mixed_precision_accumulation: str | None = None,
    sdk: Iterable[str] = (),
    precision: Iterable[str] = (),
) -> list[Precision]:
    """The precisions the user asked for, in order, each once (see the module docstring for the rules)."""
    casts = _choices(auto_cast, AutoCast, "--auto-cast")
    lows = _choices(auto_cast_type, LowType, "--auto-cast-type")
    dtypes = _choices(dtype, ServedDtype, "--dtype")
    mpas = _on_off(mixed_precision_accumulation, "--mixed-precision-accumulation")
    sdk, precision = list(dict.fromkeys(sdk)), list(dict.fromkeys(precision))
    # Bounded before anything is built: each axis holds each value once, and the product with the
    # added precisions is at most MAX_PRECISIONS runs of the model.
    asked = max(len(casts), 1) * max(len(lows), 1) * max(len(dtypes), 1) * max(len(mpas), 1) * bool(casts or lows or dtypes or mpas) + len(sdk) + len(precision)
    if asked > MAX_PRECISIONS:
        raise InputError(f"the precision flags ask for {asked:,} precisions; parity runs at most {MAX_PRECISIONS} per command (each one runs the whole model)")
    out: list[Precision] = []
    if casts or lows or dtypes or mpas:
        if lows and casts == [str(AutoCast.NONE)]:
            raise InputError("--auto-cast-type has no effect with --auto-cast none; add --auto-cast matmult or all")
        for c, lt, d, m in itertools.product(casts or ["matmult" if lows else "none"], lows or ["bf16"], dtypes or ["fp32"], mpas or [True]):
            out.append(Precision(AutoCast(c), LowType(lt), ServedDtype(d), m))
    out.extend(sdk_default(r) for r in sdk)
    out.extend(parse_precision(p) for p in precision)
    if not out:
        out = list(DEFAULT_PRECISIONS)
    return dedupe(out)


def dedupe(precisions: Sequence[Precision]) -> list[Precision]:
    """Each precision once, first occurrence kept; auto-cast none makes the cast type irrelevant."""
    seen: set[Precision] = set()
    out = []
    for p in precisions:
        key = Precision(p.auto_cast, LowType.BF16, p.dtype, p.mixed_precision_accumulation) if p.auto_cast is AutoCast.NONE else p
        if key not in seen:
            seen.add(key)
            out.append(key)
    return out


def precision_info(p: Precision) -> PrecisionInfo:
    """The report's record of a precision (its flags in words)."""
    return PrecisionInfo(p.auto_cast, p.auto_cast_type, p.dtype, p.mixed_precision_accumulation, p.label, p.flags())
