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

Not covered: the model does not run on a PrivateUse1 device (``rename_privateuse1_backend`` plus a
Python-registered backend would need CPU-backed storage for every factory and copy op, more than this
module holds), so ``device='neuron'`` strings in the model are not exercised; ``torch.compile`` graphs
are not observed (the forward runs eagerly); the training step is observed forward only; ``hf:`` models
without weights cannot run. The findings are observed ``origin``, next to the static predictions, and
:func:`neuronprobe.analysis.prediction_diff` compares the two per op.
"""

from __future__ import annotations

import tempfile
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from neuronprobe.backends import Capabilities, Observation, forward_only
from neuronprobe.errors import InputError
from neuronprobe.report.model import BackendInfo, Finding, Limitation
from neuronprobe.vocabulary import Origin, SourceLocation, StepStatus, Verdict

BACKEND_NAME = "native-cpu"
# Kernels torch picks because the tensors are on the CPU (scaled_dot_product_attention's flash kernel for the CPU):
# the neuron device decides its own path (TorchNeuron's _scaled_dot_product_fused_attention_overrideable or the math
# decomposition), which the stand-in does not know; such calls run unrecorded and the report names them.
CPU_CHOICE_SUFFIX = "_for_cpu"
_WRAP_RULE = "native-int64-range"


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


def _qualname(func: Any) -> str:
    overload = func._overloadname
    return func._schema.name + (f".{overload}" if overload != "default" else "")


def _stand_in(table: Any, records: list[ObservedCall], cpu_choices: set[str]) -> Any:
    """The dispatch mode that plays the neuron device (a class made here: torch is imported lazily)."""
    import sys

    from neuronprobe._torch.dispatch_mode import dispatch_mode_base
    from neuronprobe._torch.dispatcher import call_composite_explicit, has_kernel
    from neuronprobe.support.native.classify import classify_native

    base = dispatch_mode_base()

    class NeuronStandIn(base):  # type: ignore[valid-type,misc]
        def __init__(self) -> None:
            super().__init__()
            self.inside: list[Any] = []

        def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None) -> Any:
            kwargs = kwargs or {}
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
            verdict = classify_native(call, table)
            if verdict.rule == "bookkeeping":
                return out
            moved = sum(t.nbytes or 0 for t in [*call.inputs, *call.outputs]) if verdict.verdict is Verdict.CPU_FALLBACK else 0
            records.append(ObservedCall(call.op, str(verdict.verdict), verdict.rule, verdict.reason, verdict.fix, file, line, moved))
            if verdict.verdict is not Verdict.CPU_FALLBACK and not func.is_view:
                _narrow(out, file, line, call.op, records)
            return out

    return NeuronStandIn()


def _worker(loaded: Any, support_table: str | None, progress: Any) -> dict[str, Any]:
    """In the forked worker: one forward under the stand-in; the calls as plain dicts, and the CPU-only kernel choices."""
    import torch

    from neuronprobe.support.native.table import native_table

    table = native_table(Path(support_table) if support_table else None)
    records: list[ObservedCall] = []
    cpu_choices: set[str] = set()
    progress("forward on the native-cpu stand-in")
    with torch.no_grad(), _stand_in(table, records, cpu_choices):
        loaded.module(*loaded.args, **loaded.kwargs)
    return {"calls": [asdict(r) for r in records], "cpu_choices": sorted(cpu_choices)}


def findings_of(calls: list[dict[str, Any]]) -> tuple[list[Finding], dict[str, str]]:
    """Observed findings, one per (rule, line), and each op's worst observed verdict (for the prediction diff)."""
    from neuronprobe.backends.xla_findings import line_text, rel_path

    groups: dict[tuple[str, str, str | None, int | None], list[dict[str, Any]]] = defaultdict(list)
    verdicts: dict[str, str] = {}
    for c in calls:
        seen = Verdict(c["verdict"])
        if c["rule"] != _WRAP_RULE:
            old = verdicts.get(c["op"])
            if old is None or (seen.is_problem and Verdict(old).rank < seen.rank):
                verdicts[c["op"]] = str(seen)
        if seen.reported:
            groups[(c["rule"], c["verdict"], c["file"], c["line"])].append(c)
    out = []
    for (rule, verdict, file, line), items in groups.items():
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
                bytes_per_call=sum(i["bytes"] for i in items) // len(items),
                source_line=line_text(file, line),
            )
        )
    return out, verdicts


class NativeCpuBackend:
    """The ``native-cpu`` live backend: TorchNeuron's dispatch played on the CPU, in a killable worker."""

    def __init__(self, support_table: Path | None = None) -> None:
        self.support_table = support_table
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
        return Capabilities()  # the forward only: no compile count, no line-matched diff

    def observe(self, loaded: Any, target: str, *, timeout: float, op_timeout: float) -> Observation:
        from neuronprobe.process.isolation import run_isolated

        if loaded.on_meta:
            raise InputError(f"--backend native-cpu runs the forward, and {loaded.source} has no weights here (meta tensors); use --backend static")
        with tempfile.TemporaryDirectory(prefix="neuronprobe-native-cpu-") as folder:
            step = run_isolated(
                _worker,
                (loaded, str(self.support_table) if self.support_table else None),
                limit_s=min(op_timeout, timeout),  # --op-timeout bounds the forward, as each SDK step of the live backends
                workdir=Path(folder),
                name="native-cpu forward",
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
                "observes TorchNeuron eager dispatch on the CPU: torch.compile graphs, 'neuron' device strings and the device's own numerics are not exercised",
            )
        ]
        return Observation(findings=findings, op_verdicts=verdicts, limitations=limits)

    def observe_training(self, loaded: Any, target: str, options: Any, *, timeout: float, op_timeout: float) -> Observation:
        return forward_only(self, loaded, target, timeout=timeout, op_timeout=op_timeout)
