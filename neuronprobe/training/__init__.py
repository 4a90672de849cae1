"""``--train``: the whole training step (forward, loss, backward, optimizer step, the loop) as the device runs it.

The package has one module per job, each importing only those listed before it:

* :mod:`~neuronprobe.training.options`: :class:`TrainOptions` and their check (no torch).
* :mod:`~neuronprobe.training.step`: the parts of an eager step the capture and ``parity --train`` share
  (the loss of a model without ``train_step``, the optimizer's label, the user's error, train mode).
* :mod:`~neuronprobe.training.recorder`: the torch-function and dispatch modes that record one step's ops by
  phase, its host reads and its uploads.
* :mod:`~neuronprobe.training.capture`: runs one step on fake tensors (again on real ones when a stand-in value
  made it fail) into a :class:`TrainCapture`; the forward the step called, exported.
* :mod:`~neuronprobe.training.classify`: the measured training rules, verdicts by phase, host-read findings.
* :mod:`~neuronprobe.training.observed`: the step on a live backend, its findings placed like the prediction's.
* :mod:`~neuronprobe.training.reporting`: :class:`TrainInfo`, the per-phase summary and the epoch's recompiles.

This module re-exports what the pipeline, the command line and the tests use.
"""

from __future__ import annotations

from neuronprobe.capture.graph import TensorMeta
from neuronprobe.training.capture import STEP_CAPTURE, TrainCapture, capture_step_forward, capture_training
from neuronprobe.training.classify import HOST_READ_OP, TrainingRule, classify_training, fused_fix, host_read_findings, provenance, training_rules
from neuronprobe.training.observed import OBSERVED_ERROR_RULE, observe_training, place_observed
from neuronprobe.training.options import OPTIMIZER_IMPLS, OPTIMIZERS, TrainOptions, check_options
from neuronprobe.training.recorder import HostRead
from neuronprobe.training.reporting import epoch_batches, epoch_recompiles, observed_train_info, phase_summaries, train_info
from neuronprobe.training.step import check_trainable, loss_of, optimizer_label, step_error, train_mode, with_labels

__all__ = [
    "HOST_READ_OP",
    "OBSERVED_ERROR_RULE",
    "OPTIMIZERS",
    "OPTIMIZER_IMPLS",
    "STEP_CAPTURE",
    "HostRead",
    "TensorMeta",
    "TrainCapture",
    "TrainOptions",
    "TrainingRule",
    "capture_step_forward",
    "capture_training",
    "check_options",
    "check_trainable",
    "classify_training",
    "epoch_batches",
    "epoch_recompiles",
    "fused_fix",
    "host_read_findings",
    "loss_of",
    "observe_training",
    "observed_train_info",
    "optimizer_label",
    "phase_summaries",
    "place_observed",
    "provenance",
    "step_error",
    "train_info",
    "train_mode",
    "training_rules",
    "with_labels",
]
