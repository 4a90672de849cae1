"""How ``--train`` builds the training step when the model file does not define it, checked before any work.

Light on purpose: the command line, the nightly and the request build :class:`TrainOptions`
without importing the capture (or torch).
"""

from __future__ import annotations

from dataclasses import dataclass

from neuronprobe.errors import InputError

OPTIMIZERS: tuple[str, ...] = ("adamw", "adam", "sgd")
OPTIMIZER_IMPLS: tuple[str, ...] = ("for-loop", "foreach", "fused")


@dataclass
class TrainOptions:
    """How to build the training step when the model file does not define it."""

    optimizer: str = "adamw"
    optimizer_impl: str = "for-loop"  # what torch picks on an XLA device by default (no foreach/fused support check passes)
    dataset_size: int | None = None
    batch_size: int | None = None


def check_options(options: TrainOptions) -> TrainOptions:
    """Reject unknown optimizer names and impossible batch settings before any work (exit 2)."""
    if options.optimizer not in OPTIMIZERS:
        raise InputError(f"--optimizer {options.optimizer!r}: unknown optimizer; use {', '.join(OPTIMIZERS)}")
    if options.optimizer_impl not in OPTIMIZER_IMPLS:
        raise InputError(f"--optimizer-impl {options.optimizer_impl!r}: unknown implementation; use {', '.join(OPTIMIZER_IMPLS)}")
    if (options.dataset_size is None) != (options.batch_size is None):
        raise InputError("--dataset-size and --batch-size go together: give both, e.g. --dataset-size 1000 --batch-size 32")
    for name, value in (("--dataset-size", options.dataset_size), ("--batch-size", options.batch_size)):
        if value is not None and value < 1:
            raise InputError(f"{name} {value}: use a positive number")
    return options
