"""FAKE torch_xla.debug.metrics: counters and metrics with the real functions' shapes.

``metric_data(name)`` is ``(total_samples, accumulator, ((timestamp_s, value), ...))``;
``CompileTime`` values are nanoseconds. ``executed_fallback_ops()`` exists unless the
fixture says ``"executed_fallback_ops": false`` (torch-xla < 2.4 lacks it).
"""

from __future__ import annotations

from typing import Any

import fake_neuron_common

from torch_xla import _lazy


def counter_names() -> list[str]:
    return [name for name, value in _lazy.COUNTERS.items() if value]


def counter_value(name: str) -> int | None:
    return _lazy.COUNTERS.get(name) or None


def metric_names() -> list[str]:
    return list(_lazy.METRICS)


def metric_data(name: str) -> Any:
    samples = _lazy.METRICS.get(name)
    if not samples:
        return None
    return (len(samples), float(sum(v for _, v in samples)), tuple(samples))


def clear_counters() -> None:
    _lazy.COUNTERS.clear()


def clear_metrics() -> None:
    _lazy.METRICS.clear()


def clear_all() -> None:
    clear_counters()
    clear_metrics()


def metrics_report() -> str:
    lines = []
    for name, samples in _lazy.METRICS.items():
        lines += [f"Metric: {name}", f"  TotalSamples: {len(samples)}", f"  Accumulator: {sum(v for _, v in samples)}ns"]
    for name, value in _lazy.COUNTERS.items():
        lines += [f"Counter: {name}", f"  Value: {value}"]
    return "\n".join(lines) + "\n"


def short_metrics_report(counter_names: list[str] | None = None, metric_names: list[str] | None = None) -> str:
    return metrics_report()


def _executed_fallback_ops() -> list[str]:
    return [name for name, value in _lazy.COUNTERS.items() if name.startswith("aten::") and value]


def __getattr__(name: str) -> Any:
    if name == "executed_fallback_ops" and fake_neuron_common.fixture().get("executed_fallback_ops", True):
        return _executed_fallback_ops
    raise AttributeError(f"module 'torch_xla.debug.metrics' has no attribute {name!r}")
