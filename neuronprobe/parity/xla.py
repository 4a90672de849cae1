"""Observed, not only emulated (issue 25, point 6): the model in bf16 through torch-xla 2.9 on the CPU.

The xla-cpu worker (``backends/xla_worker.py``, its own torch 2.9 interpreter) builds the model,
loads the very weights the fp32 reference ran with, casts model and inputs to bf16, runs the first
input on the XLA CPU device and sends the output back. Its error against the fp32 reference sits
next to the emulation's in the section, with how far the two are from each other: a real XLA
lowering (its own op decompositions and fusion on the CPU), not Neuron's compiler.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from neuronprobe.errors import BackendUnavailable
from neuronprobe.loaders.resolve import HF_PREFIX, LoadedModel
from neuronprobe.parity import drift, metrics
from neuronprobe.parity.precision import Precision
from neuronprobe.report.model import ModuleDrift, PrecisionRun
from neuronprobe.vocabulary import AutoCast, LowType, ParityRun, ServedDtype, StepStatus

# What the xla-cpu run computes: the model served in bf16 (the emulation's matching precision).
XLA_PRECISION = Precision(AutoCast.NONE, LowType.BF16, ServedDtype.BF16, True)
XLA_STEP = "parity"


def xla_env_or_fail() -> Any:
    """The xla-cpu environment; BackendUnavailable (exit 2) naming why when it cannot run."""
    from neuronprobe.backends.xla_env import find_env

    env = find_env()
    if not env.usable:
        raise BackendUnavailable(f"--backend xla-cpu: the xla-cpu environment is not usable ({env.summary()}); run `neuronprobe setup xla-cpu`")
    return env


def _request(loaded: LoadedModel) -> dict[str, Any] | str:
    """The worker's request for ``loaded``, or why the worker cannot build this model."""
    if loaded.source.startswith(HF_PREFIX):
        shrunk = any(n.startswith("shrunken config") for n in loaded.notes)
        return {"spec": loaded.source, "overrides": list(loaded.overrides), "input_plan": loaded.input_plan, "shrink": shrunk}
    if loaded.path is not None:
        from neuronprobe.loaders.resolve import worker_import_paths

        return {"spec": str(Path(loaded.path).resolve()), "overrides": [], **worker_import_paths(loaded)}
    return f"the xla-cpu worker builds hf: models and model files, not {loaded.source}"


def run_xla_bf16(
    loaded: LoadedModel,
    inputs: tuple[tuple[Any, ...], dict[str, Any]],
    reference: drift.Reference,
    *,
    tolerance: drift.Tolerance,
    timeout: float,
    env: Any = None,
) -> tuple[PrecisionRun, list[Any] | None]:
    """The xla-cpu bf16 run of ``inputs`` against ``reference``: the run's row, and its output tensors (None on failure)."""
    import torch

    from neuronprobe.backends.xla_cpu import run_worker
    from neuronprobe.parity.precision import precision_info

    row = PrecisionRun(precision_info(XLA_PRECISION), run=ParityRun.XLA_CPU)
    request = _request(loaded)
    if isinstance(request, str):
        row.error = request
        return row, None
    env = env or xla_env_or_fail()
    with tempfile.TemporaryDirectory(prefix="neuronprobe-parity-xla-") as tmp:
        folder = Path(tmp)
        torch.save(loaded.module.state_dict(), folder / "weights.pt")
        args, kwargs = inputs
        torch.save((tuple(args), dict(kwargs)), folder / "inputs.pt")
        out = folder / "outputs.pt"
        request = {
            **request,
            "steps": [XLA_STEP],
            "program_options": {"weights": str(folder / "weights.pt"), "inputs": str(folder / "inputs.pt"), "out": str(out)},
        }
        run = run_worker(str(env.python), request, folder, timeout=timeout, op_timeout=timeout, save_graphs=False)
        failed = next((s for s in run.steps.values() if s.status is not StepStatus.OK), None)
        step = run.steps.get(XLA_STEP)
        move = run.steps.get("move")
        if move is not None and move.status is StepStatus.OK and move.value:  # a tensor the device refused (issue 33.7)
            from neuronprobe.backends.xla_findings import move_sentence

            row.error = f"the xla-cpu run could not start: {move_sentence(move.value)}"
            return row, None
        if failed is not None or step is None or not out.exists():
            why = failed.error if failed is not None else "the worker ended before the parity step"
            row.error = f"the xla-cpu run failed: {why}"[:400]
            return row, None
        row.seconds = round(step.seconds, 3)
        tensors = torch.load(out, weights_only=True)
    stats = drift.drift_stats(reference.final, tensors, str(LowType.BF16), tolerance, reference.final_scale)
    row.output = ModuleDrift("", type(loaded.module).__name__, None, None, *stats)
    row.agreement = agreement_of(reference, tensors)
    return row, tensors


def agreement_of(reference: drift.Reference, tensors: list[Any]) -> Any:
    """Logit/top-1 agreement of output tensors that come in the reference's pytree order."""
    _, logits = metrics.output_kind(reference.final_value)
    if logits is None:
        return None
    index = next((i for i, t in enumerate(drift.float_tensors(reference.final_value)) if t is logits), None)
    if index is None or index >= len(tensors):
        return None
    return metrics.agreement(logits, tensors[index])


def compare_with_emulation(xla: list[Any], emulated: list[Any], xla_row: PrecisionRun, emulated_row: PrecisionRun) -> str:
    """One sentence: how far the emulated bf16 output is from the xla-cpu bf16 output, and each one's error."""
    stats = drift.drift_stats([t.float() for t in xla], emulated, str(LowType.BF16), drift.Tolerance())
    xla_rel = xla_row.output.rel if xla_row.output else float("nan")
    emu_rel = emulated_row.output.rel if emulated_row.output else float("nan")
    return (
        f"bf16 served: the emulation's output is {stats[0]:.3g} max-abs ({stats[1]:.3g} relative) from the xla-cpu run's; "
        f"against fp32 the emulation is {emu_rel:.3g} relative, xla-cpu {xla_rel:.3g}"
    )
