"""A live backend says in its protocol what it observes of a training step (issue 27): no getattr, no rewritten messages."""

from __future__ import annotations

from types import SimpleNamespace

from helpers import MODELS

from neuronprobe.backends import TRAINING_STEP_LIMITATION, Observation, forward_only
from neuronprobe.backends.train_program import TrainProgramOptions
from neuronprobe.backends.xla_cpu import XlaCpuBackend
from neuronprobe.report.model import BackendInfo
from neuronprobe.training import TrainOptions, observe_training
from neuronprobe.vocabulary import StepStatus


class ForwardOnly:
    def __init__(self) -> None:
        self.forwards = 0

    def info(self) -> BackendInfo:
        return BackendInfo(name="probe", kind="probe")

    def observe(self, loaded, target, *, timeout, op_timeout) -> Observation:
        self.forwards += 1
        return Observation()

    def observe_training(self, loaded, target, options, *, timeout, op_timeout) -> Observation:
        return forward_only(self, loaded, target, timeout=timeout, op_timeout=op_timeout)


def test_a_backend_that_runs_the_forward_only_observes_it_and_says_so():
    backend = ForwardOnly()
    observation = observe_training(backend, object(), TrainOptions(), "trn1", 10.0, 5.0)
    assert backend.forwards == 1
    assert [(lim.what, lim.why) for lim in observation.limitations] == [
        (TRAINING_STEP_LIMITATION, "the probe backend observes the forward only; backward, optimizer and loop are predicted")
    ]


def test_the_xla_cpu_backend_gets_the_optimizer_as_a_dataclass_and_sends_the_worker_its_fields(monkeypatch):
    sent = {}

    def fake_observe(self, request, loaded, target, *, timeout, op_timeout):
        sent.update(request)
        return Observation()

    monkeypatch.setattr(XlaCpuBackend, "_observe", fake_observe)
    backend = XlaCpuBackend(env=SimpleNamespace())  # type: ignore[arg-type]  # the environment is not reached
    loaded = SimpleNamespace(source=str(MODELS / "mlp.py"), path=MODELS / "mlp.py", overrides=[], input_plan=None, import_paths=(), entry=None)
    observe_training(backend, loaded, TrainOptions(optimizer="sgd", optimizer_impl="foreach"), "trn1", 10.0, 5.0)
    assert sent["program"] == "train" and sent["program_options"] == {"optimizer": "sgd", "optimizer_impl": "foreach"}
    assert TrainProgramOptions(**sent["program_options"]) == TrainProgramOptions("sgd", "foreach")  # what the worker rebuilds


def test_the_xla_cpu_backend_names_the_program_that_failed_on_the_device():
    """The finding of a program that raises on the XLA device says which program it was (the training step's
    text is the backend's own, not a rewrite of the forward's by the training analysis)."""
    from neuronprobe.backends.xla_cpu import StepOutcome, WorkerRun

    run = WorkerRun(
        steps={"load": StepOutcome(StepStatus.OK), "observe": StepOutcome(StepStatus.FAILED, error="RuntimeError: no lowering", extra={"cpu_ok": True})}
    )
    backend = XlaCpuBackend(env=SimpleNamespace())  # type: ignore[arg-type]
    loaded = SimpleNamespace(source="m.py")
    forward, train = (backend._observation(run, "trn1", loaded, program).findings for program in ("forward", "train"))
    assert [(f.op, f.message) for f in forward] == [
        ("<forward on the XLA device>", "the forward runs on torch 2.9's CPU but fails on the XLA device: RuntimeError: no lowering")
    ]
    assert [(f.op, f.message) for f in train] == [("<training step on the XLA device>", "the training step fails on the XLA device: RuntimeError: no lowering")]


def test_each_backend_declares_its_capabilities_and_the_pipeline_reads_only_the_declaration():
    """Typed capabilities instead of getattr (issue 35.3): what each live backend can do beyond observing."""
    from neuronprobe.backends import Capabilities
    from neuronprobe.backends.native_cpu import NativeCpuBackend
    from neuronprobe.backends.neuron import NeuronLiveBackend

    xla = XlaCpuBackend(env=SimpleNamespace(), chosen_by_auto=True)  # type: ignore[arg-type]
    declared = xla.capabilities()
    assert declared.count_compiles == xla.count_compiles and declared.refine_diff == xla.refine_diff
    assert declared.falls_back_to_static is True
    assert XlaCpuBackend(env=SimpleNamespace()).capabilities().falls_back_to_static is False  # type: ignore[arg-type]
    assert declared.observe_shrunk is not None
    declared.observe_shrunk(True)
    assert xla.shrink is True
    neuron = NeuronLiveBackend(detection=SimpleNamespace())  # type: ignore[arg-type]
    assert neuron.capabilities() == Capabilities(count_compiles=neuron.count_compiles)
    native = NativeCpuBackend()  # eager: no compile count; the line-matched diff as xla-cpu's (issue 36.5)
    assert native.capabilities() == Capabilities(refine_diff=native.refine_diff)
    assert NativeCpuBackend(chosen_by_auto=True).capabilities().falls_back_to_static is True
