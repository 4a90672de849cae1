"""Backends decide what happens to each op on Neuron.

* ``static`` predicts from the bundled support table (any machine).
* ``neuron`` asks the real Neuron SDK on a Neuron host and reports what it
  observed; predictions are still made, so the two can be compared.
* ``xla-cpu`` runs the real torch-xla 2.9 lowering on the host CPU, in its own
  interpreter (``neuronprobe setup xla-cpu``), and reports what it observed.
* ``native-cpu`` runs the model under a CPU stand-in for TorchNeuron's ``neuron`` device
  (``--stack native``) and reports the fallbacks and narrowing it observed.

A live backend implements :class:`LiveBackend`, and declares what more it can do
in its :class:`Capabilities` (counting real compiles, refining the prediction diff
by line, observing a shrunken copy): the pipeline reads the declaration, never
probes the object for methods. :func:`resolve_backend` picks one for
``--backend auto|static|neuron`` and enforces ``--require-backend`` before any
work is done.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from neuronprobe.errors import InputError
from neuronprobe.report.model import BackendInfo, Finding, Limitation, ObservedCompiles

if TYPE_CHECKING:
    from neuronprobe.backends.train_program import TrainProgramOptions

BACKEND_CHOICES: tuple[str, ...] = ("auto", "static", "neuron", "xla-cpu", "native-cpu")


@dataclass
class Observation:
    """What a live backend saw for one model."""

    findings: list[Finding] = field(default_factory=list)  # origin == "observed"
    op_verdicts: dict[str, str] = field(default_factory=dict)  # dispatcher op name -> observed verdict
    limitations: list[Limitation] = field(default_factory=list)
    compile_log: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class CompileCounter(Protocol):
    """Counts the real compiles of a stream of inputs on the device (the recompile section's evidence).

    ``inputs_per_call`` holds one call's inputs per distinct shape, in stream order (at most
    ``--max-compiles``), each in ``get_example_inputs()`` form: a tuple of positional arguments or
    a dict of keyword arguments. The tensors are on the CPU, or on the meta device for ``hf:``
    models (which have no weights: materialise them first).
    """

    def __call__(self, loaded: Any, inputs_per_call: list[Any], *, timeout: float) -> ObservedCompiles: ...


class DiffRefiner(Protocol):
    """Matches the observation to the capture by line where op names differ (torch-xla names decomposed ops)."""

    def __call__(self, report: Any, observation: Observation, calls: list[Any]) -> None: ...


@dataclass(frozen=True)
class Capabilities:
    """What a live backend can do beyond :class:`LiveBackend`'s methods, declared by the backend.

    The pipeline asks for these by name (typed, checked by mypy) instead of probing the backend
    object with ``getattr``: a capability a backend lacks is ``None`` (or False), and the pipeline
    says what it did instead.
    """

    count_compiles: CompileCounter | None = None  # real compiles per traffic shape (Neuron host, xla-cpu)
    refine_diff: DiffRefiner | None = None  # line-matched prediction diff (xla-cpu)
    observe_shrunk: Callable[[bool], None] | None = None  # observe a shrunken copy of an hf: model instead (xla-cpu)
    falls_back_to_static: bool = False  # picked by --backend auto: an observation that fails or does not fit keeps the static report


class LiveBackend(Protocol):
    def info(self) -> BackendInfo: ...

    def capabilities(self) -> Capabilities:
        """What else this backend can do (see :class:`Capabilities`)."""
        ...

    def observe(self, loaded: Any, target: str, *, timeout: float, op_timeout: float) -> Observation:
        """What the backend saw of one forward of ``loaded``."""
        ...

    def observe_training(self, loaded: Any, target: str, options: TrainProgramOptions, *, timeout: float, op_timeout: float) -> Observation:
        """What the backend saw of one training step (``--train``): forward, backward, optimizer step.

        A backend that can only run the forward observes that and says so with :func:`forward_only`.
        """
        ...


TRAINING_STEP_LIMITATION = "training step on the live backend"


def forward_only(backend: LiveBackend, loaded: Any, target: str, *, timeout: float, op_timeout: float) -> Observation:
    """``observe_training`` of a backend that runs the forward only: the forward, and a limitation saying so."""
    observation = backend.observe(loaded, target, timeout=timeout, op_timeout=op_timeout)
    observation.limitations.append(
        Limitation(TRAINING_STEP_LIMITATION, f"the {backend.info().name} backend observes the forward only; backward, optimizer and loop are predicted")
    )
    return observation


@dataclass
class ResolvedBackend:
    info: BackendInfo
    live: LiveBackend | None = None


def static_info(detail: str = "predicted from the bundled support table") -> BackendInfo:
    import platform

    versions = {"python": platform.python_version()}
    try:
        import torch

        versions["torch"] = torch.__version__
    except ImportError:  # pragma: no cover
        pass
    return BackendInfo(name="static", kind="static", versions=versions, detail=detail)


def resolve_backend(name: str, require: str | None = None) -> ResolvedBackend:
    """Pick the backend; fail closed (BackendUnavailable, exit 2) when ``require`` cannot be met."""
    if name not in BACKEND_CHOICES:
        raise InputError(f"--backend {name!r}: use one of {', '.join(BACKEND_CHOICES)}")
    if require not in (None, "neuron", "static", "xla-cpu"):
        raise InputError(f"--require-backend {require!r}: use neuron, xla-cpu (or static, which is always there)")
    if name == "native-cpu":  # TorchNeuron's dispatch on a CPU stand-in (--stack native; backends/native_cpu.py)
        from neuronprobe.backends.native_cpu import NativeCpuBackend

        backend = NativeCpuBackend()
        return ResolvedBackend(backend.info(), backend)
    if name == "xla-cpu" or require == "xla-cpu":
        from neuronprobe.backends.xla_resolve import resolve_xla_cpu

        return resolve_xla_cpu(name, require)
    from neuronprobe.backends import neuron

    resolved = neuron.resolve(name, require)
    if name == "auto" and resolved.live is None:
        from neuronprobe.backends.xla_resolve import auto_xla_cpu

        return auto_xla_cpu(resolved)
    return resolved
