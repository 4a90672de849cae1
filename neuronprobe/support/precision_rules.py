"""The rules for risky low-precision constructs (``data/precision_rules.json``), loaded and validated.

Each rule is one construct that goes wrong when a model computes in a low type
(float16, bfloat16, float8): an epsilon that underflows, a mask constant that
overflows, an accumulation without an upcast, a constant out of range, integers
past the exact range. The data file holds each rule's id, message frame, fix and
provenance; :mod:`neuronprobe.parity.risky` finds the constructs on the captured
op graph and fills the frames with numbers read from ``torch.finfo``. The rule
registry (:mod:`neuronprobe.rules`) reads the same file as one of its catalogues.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from neuronprobe.errors import InternalError


@dataclass(frozen=True)
class PrecisionRule:
    id: str
    construct: str  # what the rule looks for, in words (the registry's message)
    message: str  # a str.format frame the finder fills (``message_frame``)
    fix: str  # likewise (``fix_frame``)
    provenance: str


@dataclass(frozen=True)
class PrecisionRules:
    version: str
    rules: dict[str, PrecisionRule]
    provenance: tuple[str, ...]


@lru_cache(maxsize=1)
def load_precision_rules() -> PrecisionRules:
    """The bundled rules by id; a malformed file is a bug in neuronprobe."""
    text = resources.files("neuronprobe.support").joinpath("data", "precision_rules.json").read_text(encoding="utf-8")
    try:
        doc = json.loads(text)
        rules = {
            r["id"]: PrecisionRule(id=r["id"], construct=r["message"], message=r["message_frame"], fix=r["fix_frame"], provenance=r["provenance"])
            for r in doc["rules"]
        }
        return PrecisionRules(version=doc["version"], rules=rules, provenance=tuple(doc["provenance"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise InternalError(f"the bundled precision_rules.json is invalid: {exc!r}") from None


def precision_rule_ids() -> frozenset[str]:
    """Every rule id a risky-construct finding can carry."""
    return frozenset(load_precision_rules().rules)


__all__ = ["PrecisionRule", "PrecisionRules", "load_precision_rules", "precision_rule_ids"]
