"""What dtype a tensor has on the Neuron device (``data/device_dtypes.json``), per stack and environment.

torch-xla on a Neuron device does not hand every dtype to neuronx-cc as the model
asks for it: float64 becomes float32, int16 and uint16 become 32-bit, and the
variables ``XLA_USE_BF16`` / ``XLA_DOWNCAST_BF16`` / ``XLA_USE_32BIT_LONG`` narrow
further (pytorch/xla v2.9.0 ``torch_xla/csrc/dtype.cpp``, ``MaybeDowncastToXlaDeviceType``;
the data file names the lines). The static rules and the HLO checks both judge the
dtype the device really computes in: a rule on a type the device never sees cannot
fire, and a type the device narrows is a ``precision`` note at the user's line.

Pure: the environment is a mapping the caller passes (the analysis passes its own).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from neuronprobe.errors import InternalError

# The stack every neuronprobe target is analysed for (the torch-xla lowering lists are its table).
ANALYSED_STACK = "torch-xla"
# torch dtype names and the HLO element types torch-xla 2.9 prints for them.
HLO_TYPES: dict[str, str] = {
    "float64": "f64",
    "float32": "f32",
    "bfloat16": "bf16",
    "float16": "f16",
    "int64": "s64",
    "int32": "s32",
    "int16": "s16",
    "int8": "s8",
    "uint64": "u64",
    "uint32": "u32",
    "uint16": "u16",
    "uint8": "u8",
}


@dataclass(frozen=True)
class Narrowing:
    """One source dtype and the dtype the device computes it in."""

    source: str
    device: str
    note: bool  # a precision finding at the line (the user chose the source type)
    why: str  # the provenance (a file:line at a tag)


@dataclass(frozen=True)
class Stack:
    id: str
    name: str
    targets: tuple[str, ...]
    device_mapping: tuple[Narrowing, ...] | None  # None: not known for this stack
    environment: tuple[tuple[str, tuple[Narrowing, ...]], ...]
    provenance: str
    known: str = ""
    unknown: str = ""


@dataclass(frozen=True)
class DeviceDtypes:
    """The mapping in force for one analysis: source dtype -> what the device computes in."""

    stack: str
    narrowings: tuple[Narrowing, ...]
    variables: tuple[str, ...] = ()  # the environment variables that changed it

    def device_dtype(self, dtype: str) -> str:
        """The dtype the device computes ``dtype`` in (``dtype`` itself when nothing maps it)."""
        for n in self.narrowings:
            if n.source == dtype:
                return n.device
        return dtype

    def notes(self, dtypes: set[str] | frozenset[str]) -> list[Narrowing]:
        """The narrowings of ``dtypes`` the user should hear about, in source-dtype order."""
        return sorted((n for n in self.narrowings if n.note and n.source in dtypes), key=lambda n: n.source)

    def hlo_mapping(self) -> dict[str, str]:
        """The same mapping on HLO element types (``f64`` -> ``f32``)."""
        return {HLO_TYPES[n.source]: HLO_TYPES[n.device] for n in self.narrowings if n.source in HLO_TYPES and n.device in HLO_TYPES}

    def describe(self) -> str:
        """One line for the report: the mapping and what set it."""
        pairs = ", ".join(f"{n.source} -> {n.device}" for n in self.narrowings) or "none"
        by = f" ({', '.join(self.variables)} set in the environment)" if self.variables else ""
        return f"device dtypes ({self.stack}): {pairs}{by}"


def _narrowings(items: Any, why: str) -> tuple[Narrowing, ...]:
    return tuple(Narrowing(str(i["from"]), str(i["to"]), bool(i["note"]), why) for i in items)


@lru_cache(maxsize=1)
def load_stacks() -> dict[str, Stack]:
    """Every stack of the bundled data file, by id; a malformed file is a bug in neuronprobe."""
    text = resources.files("neuronprobe.support").joinpath("data", "device_dtypes.json").read_text(encoding="utf-8")
    try:
        doc = json.loads(text)
        stacks = {}
        for s in doc["stacks"]:
            mapping = s.get("device_mapping")
            stacks[s["id"]] = Stack(
                id=s["id"],
                name=s["name"],
                targets=tuple(s["targets"]),
                device_mapping=None if mapping is None else _narrowings(mapping, s["provenance"]),
                environment=tuple((e["variable"], _narrowings(e["mapping"], e["provenance"])) for e in s.get("environment", [])),
                provenance=s.get("provenance", ""),
                known=s.get("known", ""),
                unknown=s.get("unknown", ""),
            )
    except (KeyError, TypeError, ValueError) as exc:
        raise InternalError(f"the bundled device_dtypes.json is invalid: {exc!r}") from None
    return stacks


def env_set(value: str | None) -> bool:
    """torch-xla's reading of a boolean variable: 'true', or an integer other than 0 (sys_util.cpp GetEnvBool)."""
    if value is None or value == "false":
        return False
    if value == "true":
        return True
    digits = value.strip()
    sign = digits[:1] in "+-" and digits[:1] != ""
    number = digits[1:] if sign else digits
    lead = ""
    for ch in number:  # atoi: the leading digits
        if not ch.isdigit():
            break
        lead += ch
    return bool(lead) and int(lead) != 0


def device_dtypes(target: str, environ: Mapping[str, str] | None = None, stack: str = ANALYSED_STACK) -> DeviceDtypes:
    """The mapping for ``target`` on ``stack``, with the variables ``environ`` sets (None: none set)."""
    s = load_stacks()[stack]
    if target not in s.targets or s.device_mapping is None:
        return DeviceDtypes(stack, ())
    table = {n.source: n for n in s.device_mapping}
    variables = []
    for variable, narrowings in s.environment:  # later variables win, as in dtype.cpp
        if environ is not None and env_set(environ.get(variable)):
            variables.append(variable)
            table.update({n.source: n for n in narrowings})
    return DeviceDtypes(stack, tuple(table.values()), tuple(variables))


__all__ = ["ANALYSED_STACK", "HLO_TYPES", "DeviceDtypes", "Narrowing", "Stack", "device_dtypes", "env_set", "load_stacks"]
