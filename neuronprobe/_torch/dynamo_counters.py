"""``torch._dynamo.utils.counters``: dynamo's process-wide statistics, graph-break reasons among them.

Checked on torch 2.13.0 (not used by the xla-cpu worker).

Breaks at the very start of a frame leave no log line, only a count under
``counters["graph_break"]``; capture reads the reasons added during its compile
and then puts every counter back, so the user's statistics (``unique_graphs``,
``calls_captured``...) count the user's compiles only.
"""

from __future__ import annotations

from collections import Counter
from typing import cast

from neuronprobe._torch.check import Check, MissingInternal, run_check

INTERNAL = "torch._dynamo.utils.counters"
DEGRADES = "graph breaks at the start of a frame (those that leave no log line)"
GRAPH_BREAK = "graph_break"

Snapshot = dict[str, Counter[object]]


def _counters() -> dict[str, Counter[object]]:
    try:
        from torch._dynamo.utils import counters
    except ImportError as exc:
        raise MissingInternal(INTERNAL, DEGRADES, str(exc)) from exc
    if not isinstance(counters, dict):
        raise MissingInternal(INTERNAL, DEGRADES, f"is a {type(counters).__name__}, not a dict")
    return cast(dict[str, Counter[object]], counters)


def snapshot() -> Snapshot:
    return {key: Counter(value) for key, value in list(_counters().items())}


def restore(saved: Snapshot) -> None:
    counters = _counters()
    for key in list(counters):
        if key not in saved:
            del counters[key]
    for key, value in saved.items():
        counters[key].clear()
        counters[key].update(value)


def new_graph_break_reasons(before: Snapshot) -> list[str]:
    """Graph-break reasons counted after ``before``, first line of each."""
    seen = before.get(GRAPH_BREAK, Counter())
    now = _counters().get(GRAPH_BREAK, Counter())
    return [str(reason).splitlines()[0] if str(reason) else "" for reason, n in now.items() if n > seen.get(reason, 0)]


def self_check() -> Check:
    def probe() -> None:
        saved = snapshot()
        new_graph_break_reasons(saved)
        restore(saved)

    return run_check(INTERNAL, DEGRADES, probe)
