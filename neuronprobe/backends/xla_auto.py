"""``--backend auto`` with the xla-cpu environment: observe what fits, and never do worse than static.

``auto`` picks the xla-cpu backend when its environment is ready (see
:mod:`neuronprobe.backends.xla_resolve`), but the observation runs the model with
real weights in a second interpreter, inside the same ``--max-memory`` as the
analysis. Before it starts, :func:`choose` decides, from what the capture already
knows (the weights' shapes and dtypes, on the meta device for ``hf:`` models, and
every op's output shape):

* observe the model as it is, when the estimate fits;
* observe a shrunken copy (``hf:`` only: fewer layers and experts, narrower; the
  loader's :func:`~neuronprobe.loaders.hf.shrink_config`), when only that fits;
  the report says so, since shapes differ; op kinds and lines hold only while the shrunken copy keeps every
  layer kind of the full model (loaders/hf/shrink.py checks it; what it lacks is named);
* keep the static analysis, with the reason, when nothing fits or the model
  cannot cross into the worker (a model object of the Python API lives in this
  process's torch; ``tv:``/``timm:`` models need packages the environment does not
  install).

Only an explicit ``--backend xla-cpu`` / ``--require-backend xla-cpu`` turns a
failed observation into an error; under ``auto`` the analysis keeps the static
report and names the failure as a limitation (:func:`observation_failed`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from neuronprobe.loaders.resolve import HF_PREFIX

# The xla-cpu interpreter's own resident memory: torch 2.9, torch-xla 2.9 and transformers imported
# and one op run on the XLA device (measured: 0.78 GiB, `ru_maxrss` after that import in the managed
# environment), rounded up.
INTERPRETER_BYTES = 2**30
# The worker builds the weights on its CPU and then moves them to the XLA device (a PJRT CPU buffer
# each): both copies are alive while the move runs.
FORWARD_WEIGHT_COPIES = 2
# A training step adds gradients and two optimizer states (AdamW's exp_avg and exp_avg_sq) per weight.
TRAIN_WEIGHT_COPIES = FORWARD_WEIGHT_COPIES + 3
# Headroom below --max-memory for what the estimate does not count (XLA's compiler, fallback copies).
HEADROOM = 0.85


@dataclass(frozen=True)
class MemoryEstimate:
    """What the observation would hold, in bytes, next to what the analysis already holds."""

    analysis: int  # this process now: the capture, and a model file's own weights
    interpreter: int
    weights: int  # one copy of the weights and buffers
    weight_copies: int
    activations: int  # every captured op's outputs, at the example inputs

    @property
    def total(self) -> int:
        return self.analysis + self.interpreter + self.weights * self.weight_copies + self.activations

    def describe(self) -> str:
        from neuronprobe.formatting import format_memory

        return (
            f"{format_memory(self.total)}: {format_memory(self.weights)} of weights x{self.weight_copies}, "
            f"{format_memory(self.activations)} of activations, {format_memory(self.interpreter)} for torch 2.9 + torch-xla "
            f"and {format_memory(self.analysis)} the analysis already holds"
        )


@dataclass(frozen=True)
class AutoChoice:
    """What ``auto`` does with the xla-cpu backend for one model."""

    observe: bool
    shrink: bool = False
    reason: str = ""  # why static, or why a shrunken copy
    changes: str = ""  # the shrunken config's changes
    kinds_lost: tuple[str, ...] = ()  # what the full-depth model has that the shrunken copy lacks (its ops go unobserved)


def resident_bytes() -> int:
    """This process's resident memory now (Linux ``/proc/self/statm``; 0 where there is none)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def tensor_bytes(module: Any) -> int:
    """Weights and buffers at their dtype's size (meta and fake tensors count as real ones would)."""
    params = sum(p.numel() * p.element_size() for p in module.parameters())
    buffers = sum(b.numel() * b.element_size() for b in module.buffers())
    return params + buffers


def activation_bytes(calls: list[Any]) -> int:
    """Every captured op's outputs (a size known only from data counts as nothing)."""
    return sum(t.nbytes or 0 for c in calls for t in c.outputs)


def estimate(loaded: Any, calls: list[Any], train: bool, module: Any = None) -> MemoryEstimate:
    return MemoryEstimate(
        analysis=resident_bytes(),
        interpreter=INTERPRETER_BYTES,
        weights=tensor_bytes(module if module is not None else loaded.module),
        weight_copies=TRAIN_WEIGHT_COPIES if train else FORWARD_WEIGHT_COPIES,
        activations=activation_bytes(calls) * (2 if train else 1),  # the backward's gradients of each output
    )


def not_observable(loaded: Any) -> str | None:
    """Why the xla-cpu worker cannot run this model at all, or None."""
    source = str(getattr(loaded, "source", ""))
    if source.startswith(HF_PREFIX) or getattr(loaded, "path", None) is not None:
        return None
    if source.startswith(("tv:", "timm:")):
        return f"{source} is built by torchvision/timm, which the xla-cpu environment (torch 2.9 + torch-xla 2.9 + transformers) does not install"
    return (
        "a model object lives in this process's torch, and the xla-cpu backend runs models in its own torch 2.9 "
        "interpreter; give a model file or an hf: spec to observe it"
    )


def built_shrunk(loaded: Any) -> bool:
    """An ``hf:`` model the capture itself built on the CPU: the cpu-shrunk strategy's smaller config."""
    return str(getattr(loaded, "source", "")).startswith(HF_PREFIX) and not getattr(loaded, "on_meta", True)


def _shrunk_weights(loaded: Any) -> tuple[int, str, tuple[str, ...]]:
    """One copy of the shrunken model's weights, built on the meta device, what the shrink changed and what it lost."""
    from neuronprobe.loaders import hf
    from neuronprobe.loaders.resolve import HF_DEFAULT_BATCH, HF_DEFAULT_SEQ_LEN, hf_build_scope

    plan = hf.InputPlan.from_json(loaded.input_plan) if loaded.input_plan else None
    with hf_build_scope():
        small = hf.load(loaded.source[len(HF_PREFIX) :], list(loaded.overrides), HF_DEFAULT_SEQ_LEN, HF_DEFAULT_BATCH, device="meta", shrink=True, plan=plan)
    changes = next((n for n in small.notes if n.startswith("shrunken config")), "")
    return tensor_bytes(small.module), changes, tuple(small.kinds_lost)


def choose(loaded: Any, calls: list[Any], *, max_memory: int, train: bool) -> AutoChoice:
    """Observe as it is, observe a shrunken copy, or stay static (with the reason)."""
    from neuronprobe.formatting import format_memory

    why_not = not_observable(loaded)
    if why_not is not None:
        return AutoChoice(False, reason=why_not)
    if built_shrunk(loaded):  # the worker builds the same shrunken config the capture ran
        return AutoChoice(
            True,
            shrink=True,
            reason="the capture itself ran a shrunken copy on the CPU (the cpu-shrunk strategy)",
            kinds_lost=tuple(getattr(loaded, "kinds_lost", ())),
        )
    budget = int(max_memory * HEADROOM)
    full = estimate(loaded, calls, train)
    if full.total <= budget:
        return AutoChoice(True)
    over = f"observing it would need about {full.describe()}, over {HEADROOM:.0%} of --max-memory {format_memory(max_memory)}"
    if not str(loaded.source).startswith(HF_PREFIX):
        return AutoChoice(False, reason=f"{over}; a model file is observed as it is, so the static table's verdicts stand")
    try:
        weights, changes, lost = _shrunk_weights(loaded)
    except Exception as exc:  # the shrunken build is an attempt: static stays
        return AutoChoice(False, reason=f"{over}, and its shrunken copy could not be built ({type(exc).__name__}: {str(exc)[:200]})")
    small = MemoryEstimate(full.analysis, full.interpreter, weights, full.weight_copies, full.activations)
    if small.total <= budget:
        return AutoChoice(True, shrink=True, reason=over, changes=changes, kinds_lost=lost)
    return AutoChoice(False, reason=f"{over}, and its shrunken copy would still need about {format_memory(small.total)}")


def observation_failed(exc: BaseException) -> str:
    """The limitation's text for an observation that raised under ``auto``."""
    from neuronprobe.errors import NeuronprobeError

    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if isinstance(exc, NeuronprobeError):
        return f"{text}; the static analysis stands"
    return f"reading the observation failed ({type(exc).__name__}: {text[:300]}), a bug in neuronprobe; the static analysis stands"


__all__ = ["AutoChoice", "MemoryEstimate", "choose", "estimate", "not_observable", "observation_failed"]
