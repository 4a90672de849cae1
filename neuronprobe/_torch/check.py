"""What a self-check of one torch internal says, and the error a missing internal raises.

Every module of this package wraps one private torch internal and has a
``self_check() -> Check``. A wrapper whose internal is absent or changed raises
:class:`MissingInternal`, which names the internal and the feature that degrades,
so that callers turn it into a limitation of the report instead of quietly
returning fewer results.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Check:
    """One internal's self-check: present and behaving (``ok``), and what degrades without it."""

    internal: str  # the torch name, e.g. "torch._dynamo.guard_failures"
    ok: bool
    degrades: str  # the neuronprobe feature that is degraded when ok is False
    detail: str = ""  # what failed, one line (empty when ok)


class MissingInternal(RuntimeError):
    """A torch internal neuronprobe relies on is missing or behaves differently in this torch."""

    def __init__(self, internal: str, degrades: str, detail: str = "") -> None:
        self.internal = internal
        self.degrades = degrades
        self.detail = detail
        super().__init__(f"torch internal {internal} is unavailable in this torch ({detail or 'missing'}): {degrades} is degraded")


def run_check(internal: str, degrades: str, probe: Callable[[], object]) -> Check:
    """Run ``probe``; any exception means the internal is not usable here (the self-check must never raise)."""
    try:
        probe()
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return Check(internal, False, degrades, f"{type(exc).__name__}: {first}" if first else type(exc).__name__)
    return Check(internal, True, degrades)
