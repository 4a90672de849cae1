"""The report's records of a frozen-reference comparison and of a training-step parity (issue 25, points 4 and 5).

Plain dataclasses with JSON-native fields, like the rest of :mod:`neuronprobe.report.model`
(which imports them): the parity section carries them, the JSON round-trips them, and the
``parity`` gate reads :attr:`ReferenceComparison.gate_fails`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from neuronprobe.vocabulary import ReferenceBackend, ReferenceTensorKind


@dataclass
class TensorCheck:
    """One tensor of a frozen reference against the same tensor of this run (``torch.testing.assert_close``)."""

    name: str  # "output['logits']", or a module path for a per-module tensor
    kind: ReferenceTensorKind = ReferenceTensorKind.OUTPUT
    dtype: str = ""  # the reference tensor's dtype, which picked the default tolerances
    shape: list[int] = field(default_factory=list)
    rtol: float = 0.0
    atol: float = 0.0
    passed: bool = True
    max_abs: float = 0.0  # the largest |run - reference|
    max_rel: float = 0.0  # the largest |run - reference| / |reference| over the nonzero reference elements
    mismatched: int = 0  # elements outside atol + rtol * |reference|
    total: int = 0
    detail: str = ""  # why it failed, in one line (assert_close's first line, a shape change, a missing tensor)
    file: str | None = None  # per-module: the user's line that called the module, when this run knows it
    line: int | None = None


@dataclass
class Top1Check:
    """Whether the arg-max over the last dimension of an output changed: the field's top-1 stability check."""

    tensor: str
    positions: int = 0  # rows compared (every index of the leading dimensions)
    changed: int = 0
    first_changed: int | None = None  # the first row (flattened leading index) whose top-1 changed


@dataclass
class ReferenceComparison:
    """This run's outputs against a frozen reference folder (``parity --reference DIR``)."""

    reference: str  # the folder as given
    produced_on: ReferenceBackend = ReferenceBackend.CPU_FP32
    compared_on: ReferenceBackend = ReferenceBackend.CPU_FP32
    produced_fake: bool = False  # produced on the test fake of the Neuron SDK (tests/fake_backend)
    compared_fake: bool = False
    cross_backend: bool = False  # produced and compared on different backends: reported, never gated
    model: str = ""
    model_hash: str = ""  # "sha256:..." of what the manifest says was hashed
    model_hash_of: str = ""
    inputs_hash: str = ""
    versions_then: dict[str, str] = field(default_factory=dict)  # as the manifest recorded them
    versions_now: dict[str, str] = field(default_factory=dict)
    tensors: list[TensorCheck] = field(default_factory=list)
    top1: list[Top1Check] = field(default_factory=list)
    first_mismatch: str | None = None  # the first tensor, in the reference's order, that does not match
    first_mismatch_module: str | None = None  # the first module, in execution order, whose output does not match
    passed: bool = True  # every tensor within tolerance and no top-1 changed
    summary: str = ""  # one sentence for people

    @property
    def gated(self) -> bool:
        """A cross-backend comparison is reported, never gated."""
        return not self.cross_backend

    @property
    def gate_fails(self) -> bool:
        """What ``--fail-on parity`` fails on: a gated comparison with a mismatch or a top-1 change."""
        return self.gated and not self.passed


@dataclass
class ParamGroupCheck:
    """One parameter group (the parameters a module owns directly) after one training step, emulated vs fp32."""

    group: str  # the module path, "(model)" for the parameters of the model itself
    parameters: list[str] = field(default_factory=list)
    grad_norm_ref: float = 0.0  # L2 norm of the group's gradient in fp32
    grad_norm: float = 0.0  # ... under the emulated precision
    grad_rel_error: float = 0.0  # ||g - g_fp32|| / ||g_fp32||
    update_norm_ref: float = 0.0  # L2 norm of the parameter update (after - before) in fp32
    update_norm: float = 0.0
    update_rel_error: float = 0.0
    nonfinite: int = 0  # gradient elements that are inf or nan under the emulated precision
    exceeds: bool = False  # grad_rel_error above the tolerance (or a nonfinite gradient)


@dataclass
class TrainParity:
    """``parity --train``: one training step in fp32 and under an emulated precision, compared per parameter group."""

    precision: str  # the emulated precision's label
    step: str = ""  # what ran: train_step(), or the default loss and optimizer
    loss_ref: float | None = None  # None when train_step() returned no loss
    loss: float | None = None
    loss_rel_error: float | None = None
    tolerance: float = 0.0  # relative L2 error of a group's gradient above which it differs
    order: str = "backward"  # groups are listed in the order autograd finished their gradients
    groups: list[ParamGroupCheck] = field(default_factory=list)
    first_exceeding: str | None = None  # the first group, in that order, whose gradient differs beyond tolerance
    notes: list[str] = field(default_factory=list)


__all__ = ["ParamGroupCheck", "ReferenceComparison", "TensorCheck", "Top1Check", "TrainParity"]
