"""The report's training-step section (``--train``): how the step was built and what its loop costs."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class TrainInfo:
    """How the training step was built and what its loop costs (``--train``)."""

    loss: str = ""  # what was differentiated: "train_step()", "the sum of the outputs", ...
    optimizer: str = ""  # e.g. "torch.AdamW (for-loop)"
    train_step: bool = False  # the model file's own train_step() ran
    # host reads per step: device-to-host transfers (.item(), .cpu(), a truth test), each a device sync that
    # first executes the pending graph (torch-xla's TransferFromDeviceTime count)
    host_syncs_per_step: int = 0
    graphs_per_step: int = 1  # graph executions per step, host-read cuts included (torch-xla's ExecuteTime count)
    seconds: float = 0.0  # the training-step capture
    # observed on the XLA device (--backend xla-cpu): one step's graph executions (ExecuteTime), host reads
    # (TransferFromDeviceTime), compiles
    observed_graphs_per_step: int | None = None
    observed_host_syncs_per_step: int | None = None
    observed_compiles: int | None = None
    # schema 6 (issue 33): host-to-device uploads per step (torch.tensor(..., device=), a CPU tensor's .to(device)):
    # copies, not syncs, and no graph execution of their own (torch-xla's TransferToDeviceTime count)
    uploads_per_step: int = 0
    observed_uploads_per_step: int | None = None
