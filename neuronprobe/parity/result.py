"""What a parity run hands on: the parity section, and the model, inputs and outputs it ran with.

Its own module because two steps read it: :mod:`.run` makes it, :mod:`.risky` (the risky constructs,
confirmed by the run) and :mod:`.frozen` read it: :mod:`.run` imports :mod:`.risky`, never the other way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from neuronprobe.loaders.resolve import LoadedModel
from neuronprobe.report.model import ParitySection


@dataclass
class ParityResult:
    """What :func:`~neuronprobe.parity.run.run_parity_full` returns: the section, and what the frozen-reference and xla-cpu steps reuse."""

    section: ParitySection
    loaded: LoadedModel  # the model as it ran (real CPU weights)
    inputs: list[tuple[tuple[Any, ...], dict[str, Any]]]
    reference_outputs: list[Any] = field(default_factory=list)  # the fp32 model output per input (as returned)
    per_module: list[dict[str, Any]] = field(default_factory=list)  # keep_outputs: per input, module call -> fp32 tensor
