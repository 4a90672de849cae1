"""FAKE torch_neuronx.PartitionerConfig / partition, with the documented fields, defaults and errors."""

from __future__ import annotations

import logging
import warnings
from typing import Any

logger = logging.getLogger("Neuron")

NEAR_ZERO_PERCENT = 2.0


class PartitionerConfig:
    def __init__(
        self,
        *args: Any,
        trace_kwargs: dict | None = None,
        model_support_percentage_threshold: float = 0.5,
        min_subgraph_size: int = -1,
        max_subgraph_count: int = -1,
        ops_to_partition: set | None = None,
        analyze_parameters: dict | None = None,
        **kwargs: Any,
    ) -> None:
        if args:
            warnings.warn("Use Key Word arguments, instead of arguments. Ignoring supplied args and using default values.", stacklevel=2)
        self.trace_kwargs = trace_kwargs
        self.model_support_percentage_threshold = model_support_percentage_threshold
        self.min_subgraph_size = min_subgraph_size
        self.max_subgraph_count = max_subgraph_count
        self.ops_to_partition = ops_to_partition
        self.analyze_parameters = analyze_parameters


def partition(
    func: Any,
    example_inputs: Any,
    trace_kwargs: dict | None = None,
    model_support_percentage_threshold: float = 0.5,
    min_subgraph_size: int = -1,
    max_subgraph_count: int = -1,
    ops_to_partition: set | None = None,
    analyze_parameters: dict | None = None,
) -> Any:
    """Contiguous Neuron/CPU partitions; the fake runs every partition on the CPU."""
    from torch_neuronx.xla_impl.analyze import analyze
    from torch_neuronx.xla_impl.trace import trace

    report = analyze(func, example_inputs, **(analyze_parameters or {}))
    percentage = float(report["support_percentage"].rstrip("%"))
    if percentage == 100.0 and not ops_to_partition:
        logger.info("Model operator support is 100%; tracing entire model.")
        return trace(func, example_inputs, **(trace_kwargs or {}))
    if percentage <= NEAR_ZERO_PERCENT:
        raise ValueError("Model support percentage is very close to 0%, aborting trace.")
    threshold = model_support_percentage_threshold * 100
    if percentage < threshold:
        raise ValueError(f"Model support percentage of {percentage:.2f}% below threshold of {threshold:.2f}%")
    count = 1 + 2 * len({e["kind"] for e in report["unsupported_operators"]} | set(ops_to_partition or ()))
    if max_subgraph_count != -1 and count > max_subgraph_count:
        raise ValueError(f"The partitioner has found {count} subgraphs which exceeds the specified max subgraph count of {max_subgraph_count}.")
    logger.info(f"Num Partitions: {count}")
    return func
