"""``native-cpu``: run the model in neuronprobe's own torch with a CPU stand-in for TorchNeuron's ``neuron`` device.

What it is (and is not). The model's forward runs once, for real, in a killable forked worker
(:func:`neuronprobe.process.isolation.run_isolated`) under a ``TorchDispatchMode`` that plays the neuron
device's dispatch while the tensors stay on the CPU:

* A dispatch mode sees each aten call after CompositeImplicitAutograd ops have decomposed, which is what
  reaches a backend's key: the calls of library code (``torch.nn.functional``, transformers) and of
  data-dependent paths included, each placed at the innermost frame of the user's code.
* Each call gets the native table's verdict (:func:`neuronprobe.support.native.classify.classify_native`,
  the same rules as the static answer): a Neuron kernel runs as a device op; an op with a
  CompositeExplicitAutograd kernel and no kernel of its own runs that kernel, whose inner calls come back
  to the stand-in (``sort`` -> ``sort.stable``); every other call goes through a recording CPU fallback
  (counted, with the bytes a host round trip would move).
* 64-bit results of device ops are narrowed as TorchNeuron narrows them: float64 outputs are rounded to
  float32, int64 outputs wrap to int32 (``python_ops/dtype_autocast.py``; zero-dimensional tensors are
  kept). A wrap that changes a value is observed, at its line, with the real values.

Also covered:

* ``torch.compile`` inside the model (``torch.compile(submodule, backend="neuron")``): dynamo does not compile a
  frame while a dispatch mode is on the stack (torch 2.13, ``_dynamo/convert_frame.py``), so the compiled
  submodule runs eagerly under the stand-in and each of its ops is observed at its own line. The name
  ``"neuron"`` is registered as a pass-through dynamo backend where TorchNeuron is not installed
  (:func:`neuronprobe._torch.neuron_device.install_compile_backend`), so such a model builds at all.
* ``'neuron'`` device strings: the worker renames PrivateUse1 to ``neuron`` with Python stubs for its device
  guard and hooks (:mod:`neuronprobe._torch.neuron_device`), and the stand-in turns every ``neuron`` device
  argument into the CPU before the call runs: ``x.to("neuron")`` and ``torch.arange(..., device="neuron")`` are
  device ops of the table. The parent's static capture does not know the name, so a forward with such strings
  is observed (``NativeCpuBackend.observe``) but not analysed statically.
* ``--train``: one training step (:func:`neuronprobe.backends.train_program.train_program`, the step the xla-cpu
  backend runs) under the stand-in; a call made while an autograd node runs is backward, one made inside
  ``torch.optim`` is optimizer, and each is placed at the forward line that made it.

Not covered: a compiled graph's own compile (its lowering, a graph break's cost); the device's numerics beyond
the 64-bit narrowing; ``hf:`` models without weights. ``auto`` picks this backend on the native stack
(:func:`choose` says when it does not). The findings are observed ``origin``, next to the static predictions;
:func:`neuronprobe.analysis.prediction_diff` compares the two per op, :meth:`NativeCpuBackend.refine_diff` by line.
"""

from __future__ import annotations

import tempfile
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from neuronprobe.backends import Capabilities, Observation
from neuronprobe.errors import InputError
from neuronprobe.report.model import BackendInfo, Finding, Limitation
from neuronprobe.vocabulary import Origin, Phase, SourceLocation, StepStatus, Verdict

BACKEND_NAME = "native-cpu"
# Kernels torch picks because the tensors are on the CPU (scaled_dot_product_attention's flash kernel for the CPU):
# the neuron device decides its own path (TorchNeuron's _scaled_dot_product_fused_attention_overrideable or the math
# decomposition), which the stand-in does not know; such calls run unrecorded and the report names them.
CPU_CHOICE_SUFFIX = "_for_cpu"
_WRAP_RULE = "native-int64-range"
# --train on the stand-in: the weights' gradients and AdamW's two states (exp_avg, exp_avg_sq) are new tensors in
# the forked worker; the weights themselves are shared with this process
TRAIN_NEW_COPIES = 3


@dataclass
class ObservedCall:
    """One aten call that reached the stand-in's key (plain data: it crosses the worker's pipe)."""

    op: str
    verdict: str
    rule: str
    reason: str
    fix: str
    file: str | None
    line: int | None
    bytes: int = 0
    phase: str = "forward"  # of a training step: backward while an autograd node runs, optimizer inside torch.optim


def _metas(values: Any) -> list[Any]:
    import torch

    from neuronprobe.capture.graph import TensorMeta

    flat = values if isinstance(values, (list, tuple)) else [values]
    out = []
    for v in flat:
        if isinstance(v, (list, tuple)):
            out.extend(_metas(v))
        elif isinstance(v, torch.Tensor):
            out.append(TensorMeta(list(v.shape), str(v.dtype).removeprefix("torch.")))
    return out


def _constants(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    import torch

    out: dict[str, Any] = {}
    for i, arg in enumerate(func._schema.arguments):
        value = args[i] if i < len(args) else kwargs.get(arg.name)
        if (
            value is not None
            and not isinstance(value, torch.Tensor)
            and not (isinstance(value, (list, tuple)) and any(isinstance(v, torch.Tensor) for v in value))
        ):
            out[arg.name] = value
    return out


def _call(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], outputs: Any, file: str | None, line: int | None) -> Any:
    """The call as the static rules read it (an :class:`OpCall`): name, overload, tensors, constants, kernels."""
    from neuronprobe._torch.dispatcher import has_kernel
    from neuronprobe.capture.graph import OpCall

    namespace, _, rest = func._schema.name.partition("::")
    overload = func._overloadname
    qualname = _qualname(func)
    return OpCall(
        index=0,
        namespace=namespace,
        name=rest,
        overload=overload,
        inputs=_metas([*args, *kwargs.values()]),
        outputs=_metas(outputs) if outputs is not None else [],
        constants=_constants(func, args, kwargs),
        file=file,
        line=line,
        has_composite_implicit=False,  # a dispatch mode sees calls after implicit composites decomposed
        has_composite_explicit=has_kernel(qualname, "CompositeExplicitAutograd"),
    )


def _narrow(outputs: Any, file: str | None, line: int | None, op: str, records: list[ObservedCall]) -> None:
    """Round float64 and wrap int64 outputs in place, as TorchNeuron computes them; record what changed."""
    import torch

    for t in outputs if isinstance(outputs, (list, tuple)) else [outputs]:
        if not isinstance(t, torch.Tensor) or t.dim() == 0 or t.numel() == 0:
            continue
        if t.dtype == torch.int64:
            wrapped = t.to(torch.int32).to(torch.int64)
            changed = int((wrapped != t).sum())
            if changed:
                records.append(
                    ObservedCall(
                        op,
                        str(Verdict.PRECISION),
                        _WRAP_RULE,
                        f"{op} produced {changed} int64 value(s) beyond int32's range (largest {int(t.abs().max())}); on the neuron device they wrap "
                        "without an error (observed on the native-cpu stand-in with the real values)",
                        "",
                        file,
                        line,
                    )
                )
                t.copy_(wrapped)
        elif t.dtype == torch.float64:  # the call's own verdict is the native-float64 note
            t.copy_(t.to(torch.float32))


def _user_line(start: Any) -> tuple[str | None, int | None]:
    """The innermost frame of the user's code between this call and the worker's call of the model
    (:func:`neuronprobe.usercode.user_frame`, bounded: the worker's own and multiprocessing's frames are not the user's)."""
    from neuronprobe.usercode import Owner, owner

    frame = start
    helper: tuple[str | None, int | None] = (None, None)
    while frame is not None and frame.f_code is not _worker.__code__:
        whose = owner(frame.f_code.co_filename)
        if whose is Owner.USER:
            return frame.f_code.co_filename, frame.f_lineno
        if whose is Owner.HELPER and helper[0] is None:
            helper = (frame.f_code.co_filename, frame.f_lineno)
        frame = frame.f_back
    return helper


_OPTIM_FOLDER = "/torch/optim/"


def _phase(start: Any) -> str:
    """Which part of a training step is running: an autograd node's backward, an optimizer's step, else the forward."""
    from neuronprobe._torch.autograd_node import current_autograd_node

    if current_autograd_node() is not None:
        return str(Phase.BACKWARD)
    frame = start
    while frame is not None and frame.f_code is not _worker.__code__:
        if _OPTIM_FOLDER in frame.f_code.co_filename.replace("\\", "/"):
            return str(Phase.OPTIMIZER)
        frame = frame.f_back
    return str(Phase.FORWARD)


def _qualname(func: Any) -> str:
    overload = func._overloadname
    return func._schema.name + (f".{overload}" if overload != "default" else "")


def _stand_in(table: Any, records: list[ObservedCall], cpu_choices: set[str], training: bool = False) -> Any:
    """The dispatch mode that plays the neuron device (a class made here: torch is imported lazily)."""
    import sys

    from neuronprobe._torch.dispatch_mode import dispatch_mode_base
    from neuronprobe._torch.dispatcher import call_composite_explicit, has_kernel
    from neuronprobe._torch.neuron_device import on_cpu
    from neuronprobe.support.native.classify import classify_native

    base = dispatch_mode_base()

    class NeuronStandIn(base):  # type: ignore[valid-type,misc]
        def __init__(self) -> None:
            super().__init__()
            self.inside: list[Any] = []

        def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None) -> Any:
            # a 'neuron' device argument (torch.zeros(..., device="neuron"), x.to("neuron")) names the stand-in: the CPU
            args = tuple(on_cpu(a) for a in args)
            kwargs = {k: on_cpu(v) for k, v in (kwargs or {}).items()}
            if func._schema.name.endswith(CPU_CHOICE_SUFFIX):  # the CPU's own kernel choice, not the device's
                cpu_choices.add(f"{func._schema.name}")
                return func(*args, **kwargs)
            file, line = _user_line(sys._getframe(1))
            before = _call(func, args, kwargs, None, file, line)
            implicit = has_kernel(_qualname(func), "CompositeImplicitAutograd")
            verdict = classify_native(before, table)
            if func not in self.inside and (implicit or (verdict.rule == "native-composite" and before.has_composite_explicit)):
                self.inside.append(func)
                mark = len(records)
                try:
                    with self:  # its parts dispatch to the stand-in again
                        result = func.decompose(*args, **kwargs) if implicit else call_composite_explicit(func, *args, **kwargs)
                    if result is not NotImplemented:
                        return result
                except (RuntimeError, TypeError):  # a kernel that cannot be called on its own: the op runs whole
                    pass
                finally:
                    self.inside.pop()
                del records[mark:]
            out = func(*args, **kwargs)
            call = _call(func, args, kwargs, out, file, line)
            if not call.inputs and not call.outputs:  # no tensor in or out (the optimizer's profiler::_record_function_*): not a device op
                return out
            verdict = classify_native(call, table)
            if verdict.rule == "bookkeeping":
                return out
            moved = sum(t.nbytes or 0 for t in [*call.inputs, *call.outputs]) if verdict.verdict is Verdict.CPU_FALLBACK else 0
            phase = _phase(sys._getframe(1)) if training else str(Phase.FORWARD)
            records.append(ObservedCall(call.op, str(verdict.verdict), verdict.rule, verdict.reason, verdict.fix, file, line, moved, phase))
            if verdict.verdict is not Verdict.CPU_FALLBACK and not func.is_view:
                _narrow(out, file, line, call.op, records)
            return out

    return NeuronStandIn()


def _worker(loaded: Any, support_table: str | None, train: dict[str, str] | None, progress: Any) -> dict[str, Any]:
    """In the forked worker: one forward (or, with ``train``, one training step) under the stand-in; the calls as
    plain dicts, every line a call was seen at, and the CPU-only kernel choices."""
    import torch

    from neuronprobe._torch.neuron_device import install_compile_backend, install_device
    from neuronprobe.support.native.table import native_table

    table = native_table(Path(support_table) if support_table else None)
    install_device()  # 'neuron' device strings name the stand-in (this forked worker only: a rename is once per process)
    install_compile_backend()  # torch.compile(backend="neuron") inside the forward: the graph's ops reach the stand-in
    records: list[ObservedCall] = []
    cpu_choices: set[str] = set()
    if train is not None:
        from neuronprobe.backends.train_program import TrainProgramOptions, train_program

        # the step as the xla-cpu backend runs it (train_step(), else loss, backward, optimizer step), on the CPU
        step = train_program(loaded, torch.device("cpu"), TrainProgramOptions(**train))
        progress("training step on the native-cpu stand-in")
        with _stand_in(table, records, cpu_choices, training=True):
            step()
    else:
        progress("forward on the native-cpu stand-in")
        with torch.no_grad(), _stand_in(table, records, cpu_choices):
            loaded.module(*loaded.args, **loaded.kwargs)
    lines = sorted({(r.file, r.line) for r in records if r.file is not None and r.line is not None})
    return {"calls": [asdict(r) for r in records], "cpu_choices": sorted(cpu_choices), "lines_seen": lines}


def findings_of(calls: list[dict[str, Any]]) -> tuple[list[Finding], dict[str, str]]:
    """Observed findings, one per (rule, line), and each op's worst observed verdict (for the prediction diff)."""
    from neuronprobe.backends.xla_findings import line_text, rel_path

    groups: dict[tuple[str, str, str | None, int | None, str], list[dict[str, Any]]] = defaultdict(list)
    verdicts: dict[str, str] = {}
    for c in calls:
        seen = Verdict(c["verdict"])
        if c["rule"] != _WRAP_RULE:
            old = verdicts.get(c["op"])
            if old is None or (seen.is_problem and Verdict(old).rank < seen.rank):
                verdicts[c["op"]] = str(seen)
        if seen.reported:
            groups[(c["rule"], c["verdict"], c["file"], c["line"], c.get("phase", str(Phase.FORWARD)))].append(c)
    out = []
    for (rule, verdict, file, line, phase), items in groups.items():
        first = items[0]
        others = sorted({i["op"] for i in items} - {first["op"]})
        also = f" (also on this line: {', '.join(others)})" if others else ""
        out.append(
            Finding.at(
                rule,
                SourceLocation(rel_path(file), line),
                first["op"],
                f"observed on the native-cpu stand-in, {len(items)} call(s): {first['reason']}{also}",
                verdict=Verdict(verdict),
                fix=first["fix"],
                count=len(items),
                origin=Origin.OBSERVED,
                bytes_per_call=sum(i["bytes"] for i in items),  # per forward, as the static finding counts it: every call on this line
                source_line=line_text(file, line),
                phase=Phase(phase),
            )
        )
    return out, verdicts


def choose(loaded: Any, calls: list[Any], *, max_memory: int, native_mode: str | None, train: bool = False) -> Any:
    """``auto`` on the native stack: observe on the stand-in when it can only add to the static answer, else stay static.

    The observation runs the forward once more, for real, in a worker forked from this process: the weights are
    shared (copy-on-write), what it adds is the forward's activations. It is never worse than static because the
    static findings stay and an observation that fails keeps the static report with a limitation. It is not
    chosen when it could not run or would say less than it seems to:

    * ``--native-mode compile``: the stand-in plays eager dispatch; a compiled graph's failure modes (a host op
      failing the graph's compile, recompiles per signature) are the static answer's;
    * a model on the meta device (an ``hf:`` model built without weights): there is nothing to run;
    * this process's memory plus the forward's activations over the ``--max-memory`` headroom (with ``--train``,
      twice the activations for their gradients, and the weights' gradients and two optimizer states, which the
      worker allocates anew).
    """
    from neuronprobe.backends.xla_auto import HEADROOM, AutoChoice, activation_bytes, resident_bytes, tensor_bytes
    from neuronprobe.formatting import format_memory
    from neuronprobe.support.native.compile import COMPILE

    if native_mode == COMPILE:
        return AutoChoice(False, reason="the native-cpu stand-in observes eager dispatch, and --native-mode compile analyses torch.compile(backend='neuron')")
    if getattr(loaded, "on_meta", False):
        return AutoChoice(False, reason=f"{loaded.source} has no weights here (meta tensors), so its forward cannot run on the stand-in")
    need = resident_bytes() + activation_bytes(calls) * (2 if train else 1)
    if train:
        need += tensor_bytes(loaded.module) * TRAIN_NEW_COPIES
    budget = int(max_memory * HEADROOM)
    if need > budget:
        return AutoChoice(
            False,
            reason=f"running its forward on the stand-in would need about {format_memory(need)} (this process and the forward's activations), "
            f"over {HEADROOM:.0%} of --max-memory {format_memory(max_memory)}",
        )
    return AutoChoice(True)


class NativeCpuBackend:
    """The ``native-cpu`` live backend: TorchNeuron's dispatch played on the CPU, in a killable worker."""

    def __init__(self, support_table: Path | None = None, *, chosen_by_auto: bool = False) -> None:
        self.support_table = support_table
        self.chosen_by_auto = chosen_by_auto  # --backend auto picked it (native stack): a failed observation keeps the static report
        self._seconds: float | None = None

    def info(self) -> BackendInfo:
        import torch

        ran = f"; the forward ran in {self._seconds:.1f} s" if self._seconds is not None else ""
        return BackendInfo(
            name=BACKEND_NAME,
            kind="native",
            versions={"torch": torch.__version__},
            detail=f"observed: the forward ran on a CPU stand-in for TorchNeuron's neuron device (eager dispatch of the native table){ran}",
        )

    def capabilities(self) -> Capabilities:
        # no compile count (eager); line-matched diff; picked by auto, a failed observation keeps the static report
        return Capabilities(refine_diff=self.refine_diff, falls_back_to_static=self.chosen_by_auto)

    def observe(self, loaded: Any, target: str, *, timeout: float, op_timeout: float) -> Observation:
        return self._observe(loaded, None, timeout=timeout, op_timeout=op_timeout)

    def observe_training(self, loaded: Any, target: str, options: Any, *, timeout: float, op_timeout: float) -> Observation:
        """One training step on the stand-in: forward, backward and the optimizer's step all reach its dispatch."""
        train = {"optimizer": options.optimizer, "optimizer_impl": options.optimizer_impl}
        return self._observe(loaded, train, timeout=timeout, op_timeout=op_timeout)

    def refine_diff(self, report: Any, observation: Observation, calls: list[Any]) -> None:
        """Line-matched disagreements, as for xla-cpu: the stand-in names the op that reached the key
        (``sort.stable``), the capture the op the user called (``sort``)."""
        from neuronprobe.backends.xla_diff import refine_diff

        refine_diff(report, observation, calls, observer="the native-cpu stand-in")

    def _observe(self, loaded: Any, train: dict[str, str] | None, *, timeout: float, op_timeout: float) -> Observation:
        from neuronprobe.process.isolation import run_isolated

        if loaded.on_meta:
            raise InputError(f"--backend native-cpu runs the forward, and {loaded.source} has no weights here (meta tensors); use --backend static")
        with tempfile.TemporaryDirectory(prefix="neuronprobe-native-cpu-") as folder:
            step = run_isolated(
                _worker,
                (loaded, str(self.support_table) if self.support_table else None, train),
                limit_s=min(op_timeout, timeout),  # --op-timeout bounds the forward, as each SDK step of the live backends
                workdir=Path(folder),
                name="native-cpu training step" if train is not None else "native-cpu forward",
                chdir=False,
            )
        self._seconds = step.seconds
        if not step.ok:
            why = (
                f"{step.error}"
                if step.status is StepStatus.FAILED
                else f"the worker was stopped ({step.status}) after {step.seconds:.0f} s (--op-timeout {min(op_timeout, timeout):g} s)"
            )
            raise InputError(f"--backend native-cpu: the model's forward did not finish on the stand-in: {why}")
        findings, verdicts = findings_of(step.value["calls"])
        limits = [
            Limitation(
                "native-cpu backend: CPU kernel choices",
                f"{name} ran as torch picks it for CPU tensors; which kernel the neuron device takes there is TorchNeuron's choice, not observed",
            )
            for name in step.value["cpu_choices"]
        ] + [
            Limitation(
                "native-cpu backend",
                "observes TorchNeuron eager dispatch on the CPU: a torch.compile(backend='neuron') graph in the model runs its ops through the "
                "stand-in one by one (the graph's own compile is not exercised), 'neuron' devices are the CPU, and the device's own numerics are not modelled",
            )
        ]
        return Observation(findings=findings, op_verdicts=verdicts, limitations=limits, extra={"lines_seen": [tuple(x) for x in step.value["lines_seen"]]})
