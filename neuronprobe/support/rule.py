"""One rule of the support table, and the targets and SDK releases it is keyed on.

Its own module so that :mod:`neuronprobe.support.rulefile` (which parses rules) and the
package (which loads and applies them) both import it, and neither imports the other back.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from neuronprobe.support.conditions import Condition
from neuronprobe.vocabulary import Verdict

TARGETS: tuple[str, ...] = ("trn1", "trn2", "inf2")


@dataclass(frozen=True)
class Rule:
    id: str
    verdict: Verdict
    message: str
    fix: str
    ops: frozenset[str] = frozenset()
    not_ops: frozenset[str] = frozenset()  # ops the rule never applies to (the exceptions of a dtype rule)
    tags: frozenset[str] = frozenset()
    dtypes: frozenset[str] = frozenset()
    input_dtypes: frozenset[str] = frozenset()
    layouts: frozenset[str] = frozenset()
    targets: frozenset[str] = frozenset(TARGETS)
    ncc_code: str | None = None
    when: tuple[Condition, ...] = ()
    fixes: dict[str, str] = field(default_factory=dict)
    sdk_from: str | None = None  # first Neuron SDK release the rule applies to (None: all known)
    sdk_fixed: str | None = None  # first release that no longer has the problem (None: not fixed)
    provenance: str = ""
    override: bool = False  # a user's rule that replaces the bundled rule of its id (for the ops it names)

    def fix_for(self, key: str) -> str:
        return self.fixes.get(key) or self.fixes.get(key.split(".")[0]) or self.fix

    def applies_to_sdk(self, sdk: str) -> bool:
        """Whether the rule holds in Neuron SDK release ``sdk`` (from <= sdk < fixed)."""
        v = release_key(sdk)
        return (self.sdk_from is None or release_key(self.sdk_from) <= v) and (self.sdk_fixed is None or v < release_key(self.sdk_fixed))

    def reason(self) -> str:
        """The message, with the condition that made the rule fire."""
        if not self.when:
            return self.message
        return f"{self.message} (here: {'; '.join(c.describe() for c in self.when)})"


def release_key(version: str) -> tuple[int, ...]:
    """``"2.32.0"`` -> ``(2, 32, 0)``, for ordering SDK releases."""
    return tuple(int(p) for p in version.split(".") if p.isdigit())


__all__ = ["TARGETS", "Rule", "release_key"]
