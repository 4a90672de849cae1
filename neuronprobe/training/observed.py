"""The same training step on a live backend (xla-cpu runs it), and its findings placed like the prediction's.

A live backend records a problem at the innermost user frame, which for a backward op is the
``loss.backward()`` line; the capture knows the forward line whose gradient produced it, the phase
of every op, and which lines read values on the host. This module gives observed findings those.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from neuronprobe.backends import LiveBackend, Observation
from neuronprobe.backends.train_program import TrainProgramOptions
from neuronprobe.capture.graph import OpCall, relative_path
from neuronprobe.loaders.model import LoadedModel
from neuronprobe.support import Classification
from neuronprobe.training.classify import fused_fix
from neuronprobe.training.options import TrainOptions
from neuronprobe.training.recorder import HostRead
from neuronprobe.vocabulary import Phase

OBSERVED_ERROR_RULE = "observed-xla-error"  # the xla-cpu backend's rule for a program that raises on the device


class ClassifiedOp(Protocol):
    """A captured call with its verdict (the pipeline's ``ClassifiedCall``)."""

    call: OpCall
    verdict: Classification


def observe_training(live: LiveBackend, loaded: LoadedModel, options: TrainOptions, target: str, timeout: float, op_timeout: float) -> Observation:
    """The training step on the live backend (xla-cpu runs it; a backend that runs the forward only says so)."""
    choice = TrainProgramOptions(optimizer=options.optimizer, optimizer_impl=options.optimizer_impl)
    return live.observe_training(loaded, target, choice, timeout=timeout, op_timeout=op_timeout)


def place_observed(observation: Observation, calls: Sequence[ClassifiedOp], host_reads: list[HostRead]) -> None:
    """Give each observed finding its phase, and move backward ones to the forward line that produced them.

    torch-xla's recorder places a fallback at the innermost user frame, which for a
    backward op is the ``loss.backward()`` line; the prediction knows the forward line.
    """
    by_op: dict[str, list[OpCall]] = {}
    for c in calls:
        by_op.setdefault(c.call.op, []).append(c.call)
        by_op.setdefault(c.call.op.split(".", 1)[0], []).append(c.call)
    reads = {(relative_path(r.file), r.line): r for r in host_reads}
    fused = next((c.call for c in calls if c.verdict.rule == "fused-optimizer"), None)
    for f in observation.findings:
        if f.rule == OBSERVED_ERROR_RULE:
            if fused is not None and "fused" in f.message:
                f.op, f.phase = fused.op, Phase.OPTIMIZER
                f.fix = fused_fix()
                if f.line is None:
                    f.file, f.line, f.source_line = relative_path(fused.file), fused.line, fused.source_line
                observation.op_verdicts[fused.op] = f.verdict
            continue
        if (f.file, f.line) in reads:
            f.phase = Phase.FORWARD if reads[(f.file, f.line)].in_forward else Phase.LOOP
            continue
        candidates = [c for c in by_op.get(f.op, []) or by_op.get(f.op.split(".", 1)[0], []) if c.file]
        if f.phase is not Phase.FORWARD:  # the observer knew the phase (native-cpu: an autograd node ran): a call of that phase
            candidates = [c for c in candidates if c.phase == f.phase] or candidates
        if candidates:
            first = candidates[0]
            f.phase = Phase(first.phase)
            if first.phase == Phase.BACKWARD:
                f.file, f.line, f.source_line = relative_path(first.file), first.line, first.source_line
                f.module = first.module
        elif "_backward" in f.op:
            f.phase = Phase.BACKWARD
        elif "_foreach_" in f.op or "_fused_" in f.op:
            f.phase = Phase.OPTIMIZER
