"""The xla-cpu backend: the real torch-xla 2.9 lowering, run on the host CPU.

The model is loaded and run in the torch 2.9 interpreter of
:mod:`neuronprobe.backends.xla_env`, by :mod:`neuronprobe.backends.xla_worker`
in a subprocess of its own process group, with a per-step limit (``--op-timeout``)
and a whole-run limit (``--timeout``); a hang or a crash is killed and becomes a
limitation of the report. Results come back as JSON lines, never pickles.

What it reports, with ``origin=Origin.OBSERVED``:

* ``cpu_fallback``: every op torch-xla ran on the CPU, at the user's line of the
  call, with its count per forward and the bytes that crossed per call;
* ``dynamic_shape`` for each host read (``aten::_local_scalar_dense``: ``.item()``,
  a branch on a tensor value, printing a tensor), which cuts the graph;
* ``compile_error`` for each HLO pattern neuronx-cc rejects (:mod:`hlo_checks`), with its NCC code;
* compiles per input shape of the traffic (``count_compiles``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuronprobe.backends import Capabilities, Observation
from neuronprobe.backends.hlo_checks import load_rules
from neuronprobe.backends.train_program import TrainProgramOptions
from neuronprobe.backends.xla_env import XlaEnv
from neuronprobe.backends.xla_findings import (
    defect_findings,
    fallback_findings,
    hlo_findings,
    host_sync_findings,
    line_text,
    move_findings,
    observed_verdicts,
    rel_path,
    run_verdicts,
)
from neuronprobe.backends.xla_observe import DEBUG_ENV, SAVE_FILE_ENV
from neuronprobe.errors import InputError, ModelLoadError
from neuronprobe.process.lifeline import PARENT_PID_ENV
from neuronprobe.report.model import BackendInfo, BackendStep, Finding, Limitation, ObservedCompiles
from neuronprobe.support.device_dtypes import device_dtypes
from neuronprobe.vocabulary import REPORTED_STEP_STATUSES, Origin, SourceLocation, StepStatus

BACKEND_NAME = "xla-cpu"
# The worker's programs (xla_worker.PROGRAMS), and how a finding names each one's failure on the device.
FORWARD_PROGRAM, TRAIN_PROGRAM = "forward", "train"
_PROGRAM_FAILS = {
    FORWARD_PROGRAM: ("<forward on the XLA device>", "the forward runs on torch 2.9's CPU but fails on the XLA device"),
    TRAIN_PROGRAM: ("<training step on the XLA device>", "the training step fails on the XLA device"),
}
POLL_S = 0.05
# Steps --op-timeout limits: the observation's own work. Starting the interpreter and building
# the model (a cold import of torch 2.9 reads gigabytes of libraries) only count against --timeout.
TIMED_STEPS = frozenset({"observe", "compiles"})
REAP_S = 5.0
MAX_LOG_CHARS = 20_000
PACKAGE_DIR = Path(__file__).resolve().parents[1]  # neuronprobe/, imported by the worker from source


# --- running the worker ------------------------------------------------------------------


@dataclass
class StepOutcome:
    status: StepStatus  # OK | FAILED | EXIT (the model's own sys.exit) | TIMEOUT | DIED
    seconds: float = 0.0
    value: Any = None
    error: str = ""
    file: str | None = None
    line: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class WorkerRun:
    steps: dict[str, StepOutcome] = field(default_factory=dict)
    progress: list[dict[str, Any]] = field(default_factory=list)
    log: str = ""
    seconds: float = 0.0


def worker_path(workdir: Path) -> Path:
    """A folder holding only a link to neuronprobe's package: the worker's PYTHONPATH.

    Not the folder neuronprobe is installed in: that may be this process's
    site-packages, whose torch would shadow the worker's torch 2.9.
    """
    folder = workdir / "pythonpath"
    folder.mkdir(exist_ok=True)
    link = folder / "neuronprobe"
    if not link.exists():
        link.symlink_to(PACKAGE_DIR, target_is_directory=True)
    return folder


def worker_env(workdir: Path, save_graphs: bool) -> dict[str, str]:
    """The worker's environment: neuronprobe's source on the path, torch-xla on the CPU, HLO debug on."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("XLA_SAVE_TENSORS")}
    env["PYTHONPATH"] = str(worker_path(workdir))
    env["PJRT_DEVICE"] = "CPU"
    env["TF_CPP_MIN_LOG_LEVEL"] = env.get("TF_CPP_MIN_LOG_LEVEL", "2")
    env["HF_HUB_OFFLINE"] = "1"
    env[PARENT_PID_ENV] = str(os.getpid())  # the worker dies with this process (backends.lifeline)
    env.update(DEBUG_ENV)
    if save_graphs:
        env[SAVE_FILE_ENV] = str(workdir / "graphs.txt")
    return env


def _read_events(path: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    try:
        with open(path, encoding="utf-8") as fh:
            fh.seek(offset)
            data = fh.read()
    except OSError:
        return [], offset
    complete, _, _ = data.rpartition("\n")
    if not complete:
        return [], offset
    events = []
    for line in complete.split("\n"):
        try:
            event = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            continue
        if isinstance(event, dict) and isinstance(event.get("event"), str):  # anything else is not the worker's
            events.append(event)
    return events, offset + len(complete.encode("utf-8")) + 1


class _WorkerProcess:
    """The xla-cpu worker as a supervised :class:`~neuronprobe.process.supervisor.Child`: a process started
    with exec in torch-xla's interpreter, whose messages are the JSON lines it appends to its events file."""

    def __init__(self, proc: subprocess.Popen, events_path: Path) -> None:
        self.proc = proc
        self.events_path = events_path
        self.offset = 0

    @property
    def pid(self) -> int:
        return self.proc.pid

    def receive(self, wait: float) -> list[Any] | None:
        time.sleep(wait)
        events, self.offset = _read_events(self.events_path, self.offset)
        return events

    def exit_code(self) -> int | None:
        from neuronprobe.process.supervisor import exit_code_of

        return self.proc.returncode if self.proc.returncode is not None else exit_code_of(self.proc.pid)

    def kill(self) -> None:
        """The worker and every process it started (in any session), before it is reaped."""
        from neuronprobe.process.supervisor import kill_tree

        kill_tree(self.proc.pid)
        with contextlib.suppress(subprocess.TimeoutExpired):  # a process that survives SIGKILL
            self.proc.wait(REAP_S)


def run_worker(python: str, request: dict[str, Any], workdir: Path, *, timeout: float, op_timeout: float, save_graphs: bool = True) -> WorkerRun:
    """Run the worker under the one supervisor (:func:`neuronprobe.process.supervisor.supervise`); kill its
    process tree when an observation step exceeds ``op_timeout`` or the whole run ``timeout``."""
    from neuronprobe.process.supervisor import Deadline, supervise

    events_path = workdir / "events.jsonl"
    request = {**request, "events": str(events_path)}
    request_path = workdir / "request.json"
    request_path.write_text(json.dumps(request), encoding="utf-8")
    log_path = workdir / "worker.log"
    run = WorkerRun()
    start = time.monotonic()
    current: list[Any] = [None, start]  # the step running now, and when it started

    def on_event(event: Any) -> bool:
        current[0], current[1] = _apply_event(run, event, current[0], current[1])
        return False  # the conversation ends when the worker does

    def deadline() -> Deadline:
        whole = Deadline(start + timeout, f"--timeout {timeout:g} s")
        if current[0] in TIMED_STEPS and current[1] + op_timeout < whole.at:
            return Deadline(current[1] + op_timeout, f"--op-timeout {op_timeout:g} s")
        return whole

    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [python, "-m", "neuronprobe.backends.xla_worker", str(request_path)],
            cwd=str(workdir),
            env=worker_env(workdir, save_graphs),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        ending = supervise(_WorkerProcess(proc, events_path), on_event, deadline=deadline, poll_s=POLL_S)
    now = time.monotonic()
    if ending.status is StepStatus.TIMEOUT:
        run.steps[current[0] or "start"] = StepOutcome(StepStatus.TIMEOUT, now - current[1], error=f"stopped after {ending.limit}")
    run.seconds = now - start
    run.log = _tail(log_path)
    if current[0] is not None and current[0] not in run.steps:
        code = ending.exit_code
        how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        run.steps[current[0]] = StepOutcome(StepStatus.DIED, now - current[1], error=f"the worker died ({how})")
    return run


def _apply_event(run: WorkerRun, e: dict[str, Any], current: str | None, step_start: float) -> tuple[str | None, float]:
    kind, step = e.get("event"), str(e.get("step", ""))
    if kind == "start":
        return step, time.monotonic()
    if kind == "done":
        run.steps[step] = _outcome(step, e)
        return None, step_start
    if kind == "progress":
        value = e.get("value")
        if isinstance(value, dict) and all(isinstance(value.get(k), int) for k in ("calls", "compiles")):
            run.progress.append(value)
    elif kind == "cpu_check" and step in run.steps:
        run.steps[step].extra.update(cpu_ok=bool(e.get("cpu_ok")), cpu_error=str(e.get("error", "")))
    elif kind == "defects" and step in run.steps and isinstance(e.get("sites"), list):
        run.steps[step].extra["defects"] = e["sites"]  # calls that met a known torch-xla defect (xla_tensors.DefectWatch)
    return current, step_start


# What a step's value must hold for the parent to read it: the observation's and the compile count's fields.
_VALUE_FIELDS: dict[str, dict[str, type | tuple[type, ...]]] = {
    "observe": {"graphs": list, "op_lines": dict, "compiles": dict, "host_syncs": list, "lines_seen": list},
    "compiles": {"uncached": int, "cached": int, "calls": int},
}


def _outcome(step: str, e: dict[str, Any]) -> StepOutcome:
    """A ``done`` event as a StepOutcome, its fields checked: a malformed reply is a failed step, never a crash here."""
    seconds = e.get("seconds", 0.0)
    status = e.get("status")
    file, line = e.get("file"), e.get("line")
    outcome = StepOutcome(
        StepStatus(status) if status in StepStatus.values() else StepStatus.FAILED,
        float(seconds) if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) else 0.0,
        e.get("value"),
        str(e.get("error", "")),
        file if isinstance(file, str) else None,
        line if isinstance(line, int) and not isinstance(line, bool) else None,
        {"traceback": str(e.get("traceback", "")), "error_type": str(e.get("error_type", "")), "exit_code": e.get("exit_code")},
    )
    fields = _VALUE_FIELDS.get(step)
    if outcome.status is StepStatus.OK and fields is not None:
        value = outcome.value
        required = step == "compiles"  # read field by field below; the observation's fields all have defaults
        bad = (
            "the value"
            if not isinstance(value, dict)
            else next((k for k, t in fields.items() if (k in value or required) and not isinstance(value.get(k), t)), None)
        )
        if bad is not None:
            return StepOutcome(StepStatus.FAILED, outcome.seconds, error=f"the xla-cpu worker's reply for {step} is malformed ({bad})")
    return outcome


def model_exit(run: WorkerRun, loaded: Any) -> ModelLoadError | None:
    """The model's own ``sys.exit()`` or ``KeyboardInterrupt`` in the worker, as the error the analysis worker gives it."""
    from neuronprobe.usercode import exit_text, where

    for step in run.steps.values():
        if step.status is not StepStatus.EXIT:
            continue
        kind = step.extra.get("error_type")
        what = f"called {exit_text(step.extra.get('exit_code'))}; a model file must return, not exit" if kind == "SystemExit" else f"raised {kind}"
        path, source = getattr(loaded, "path", None), str(getattr(loaded, "source", ""))
        if path is not None and step.file and os.path.realpath(step.file) == os.path.realpath(path):
            place = f"{where(source, step.line)}: "  # the model file as the user named it, as the analysis worker says it
        else:
            place = _where(step, loaded)
        return ModelLoadError(f"{place}the model code {what}")
    return None


def _tail(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return text if len(text) <= MAX_LOG_CHARS else "[... log truncated ...]\n" + text[-MAX_LOG_CHARS:]


# --- the backend ---------------------------------------------------------------------------


@dataclass
class XlaCpuBackend:
    """Drives the worker in the xla-cpu environment."""

    env: XlaEnv
    chosen_by_auto: bool = False
    program: str = FORWARD_PROGRAM  # what observe() runs on the XLA device: a name in xla_worker.PROGRAMS
    shrink: bool = False  # hf: build a shrunken copy in the worker (auto, when the full model does not fit: xla_auto)
    _steps: dict[str, BackendStep] = field(default_factory=dict)

    def info(self) -> BackendInfo:
        import platform

        versions = {"python": platform.python_version(), **{f"xla-cpu {k}": v for k, v in self.env.versions.items()}}
        where = self.env.python if self.env.source != "managed" else self.env.path
        detail = (
            f"observed: torch-xla {self.env.versions.get('torch-xla', '?')} on the host CPU (torch "
            f"{self.env.versions.get('torch', '?')}, {where}); neuronx-cc's own checks are HLO patterns, not the compiler"
        )
        if self.shrink:
            detail += "; a shrunken copy of the model was observed (see the limitations)"
        if self.chosen_by_auto:
            detail = f"auto: no Neuron SDK, so {detail}"
        return BackendInfo(name=BACKEND_NAME, kind=BACKEND_NAME, versions=versions, detail=detail, steps=dict(self._steps))

    def capabilities(self) -> Capabilities:
        return Capabilities(
            count_compiles=self.count_compiles,
            refine_diff=self.refine_diff,
            observe_shrunk=self._observe_shrunk,
            falls_back_to_static=self.chosen_by_auto,
        )

    def _observe_shrunk(self, shrink: bool) -> None:
        """``auto``'s choice: build a shrunken copy of an ``hf:`` model in the worker (see :mod:`xla_auto`)."""
        self.shrink = shrink

    def _request(self, loaded: Any, steps: list[str]) -> dict[str, Any]:
        from neuronprobe.backends.xla_auto import built_shrunk
        from neuronprobe.loaders.resolve import worker_import_paths

        source = str(getattr(loaded, "source", ""))
        shrink = False
        if source.startswith("hf:"):
            spec = source
            shrink = self.shrink or built_shrunk(loaded)  # the cpu-shrunk capture's config, or auto's choice
        elif getattr(loaded, "path", None) is not None:
            spec = str(Path(loaded.path).resolve())
        else:
            raise InputError("--backend xla-cpu runs the model in its own torch 2.9 interpreter: give a model file or an hf: spec, not a model object")
        return {
            "spec": spec,
            "overrides": list(getattr(loaded, "overrides", []) or []),
            "input_plan": getattr(loaded, "input_plan", None),  # the input repairs the capture needed, rebuilt there
            "entry": getattr(loaded, "entry", None),  # the method analysed (--entry, ENTRY): wrapped there the same way
            "program": self.program,
            "steps": steps,
            "shrink": shrink,
            **worker_import_paths(loaded),  # the model's imports resolve there as here (--path, PYTHONPATH)
        }

    def observe(self, loaded: Any, target: str, *, timeout: float, op_timeout: float) -> Observation:
        return self._observe(self._request(loaded, ["observe"]), loaded, target, timeout=timeout, op_timeout=op_timeout)

    def observe_training(self, loaded: Any, target: str, options: TrainProgramOptions, *, timeout: float, op_timeout: float) -> Observation:
        """One training step on the XLA device (``--train``): the worker's ``train`` program."""
        request = {**self._request(loaded, ["observe"]), "program": TRAIN_PROGRAM, "program_options": dataclasses.asdict(options)}
        return self._observe(request, loaded, target, timeout=timeout, op_timeout=op_timeout)

    def _observe(self, request: dict[str, Any], loaded: Any, target: str, *, timeout: float, op_timeout: float) -> Observation:
        with tempfile.TemporaryDirectory(prefix="neuronprobe-xla-") as tmp:
            run = run_worker(str(self.env.python), request, Path(tmp), timeout=timeout, op_timeout=op_timeout)
        self._steps = {k: _step_record(v) for k, v in run.steps.items()}
        return self._observation(run, target, loaded, request["program"])

    def _observation(self, run: WorkerRun, target: str, loaded: Any, program: str) -> Observation:
        if (exited := model_exit(run, loaded)) is not None:
            raise exited
        obs = Observation(compile_log=run.log)
        load = run.steps.get("load") or run.steps.get("import")
        for name in ("import", "load"):
            step = run.steps.get(name)
            if step is None or step.status is StepStatus.OK:
                continue
            if step.status is StepStatus.FAILED and name == "load":
                raise ModelLoadError(f"{_where(step, loaded)}cannot be loaded under torch 2.9 (the xla-cpu backend's torch): {step.error}")
            obs.limitations.append(Limitation(f"xla-cpu backend: {name}", f"{step.error or step.status}; nothing was observed"))
            return obs
        if load is None:
            obs.limitations.append(Limitation("xla-cpu backend", f"the worker reported nothing; its log ends: {run.log[-300:]}"))
            return obs
        move = run.steps.get("move")
        if move is not None and move.status is StepStatus.OK and move.value:  # a tensor the device refused: nothing else could run
            obs.findings = move_findings(move.value)
            obs.limitations.append(
                Limitation("xla-cpu backend: observe", "not run: the model cannot move to the XLA device (the findings name the tensors and their lines)")
            )
            obs.op_verdicts = observed_verdicts(obs.findings)
            return obs
        step = run.steps.get("observe")
        if step is None:
            obs.limitations.append(Limitation("xla-cpu backend: observe", "did not run"))
            return obs
        defects = defect_findings(step.extra.get("defects"))
        if step.status is StepStatus.FAILED:
            if step.extra.get("cpu_ok") is False:
                raise ModelLoadError(
                    f"{_where(step, loaded)}the model does not run under torch 2.9 (the xla-cpu backend's torch), "
                    f"not even on its CPU: {step.extra.get('cpu_error') or step.error}"
                )
            obs.findings = [*defects, device_error_finding(step, program, defects)]
            obs.op_verdicts = observed_verdicts(obs.findings)
            return obs
        if step.status is not StepStatus.OK:
            last = next((ln.strip() for ln in reversed(run.log.splitlines()) if ln.strip()), "")
            obs.limitations.append(
                Limitation(
                    "xla-cpu backend: observe",
                    f"{step.error or step.status}; its ops are only predicted" + (f" (the worker's last output: {last[:200]})" if last else ""),
                )
            )
            return obs
        value = step.value or {}
        fallbacks, limits = fallback_findings(value)
        dtypes = device_dtypes(target, os.environ)  # the worker inherits this environment (XLA_USE_BF16 and friends)
        hlo, graphs, rejected_ops = hlo_findings(value.get("graphs", []), target, value.get("op_lines", {}), dtypes.hlo_mapping(), value.get("float64_lines"))
        obs.findings = fallbacks + host_sync_findings(value) + hlo + defects
        obs.limitations.extend(limits)
        if value.get("observer_failure"):
            from neuronprobe.support.error_patterns import quieted

            failure = quieted(str(value["observer_failure"]))  # a PyTorch internal assertion is --debug's and the JSON detail's
            obs.limitations.append(
                Limitation(
                    "xla-cpu backend: per-call observation",
                    f"the program failed under neuronprobe's aten-level dispatch mode ({failure.shown}), so it "
                    "was observed at the torch-function level: each fallback is placed at the line of the torch call "
                    "that caused it, and ops are named by torch-xla's counters and HLO metadata",
                    detail=failure.detail,
                )
            )
        obs.op_verdicts = run_verdicts(value, obs.findings, rejected_ops)
        compiles = value.get("compiles", {})
        obs.extra = {
            "graphs": graphs,
            "compiles": compiles,
            "host_syncs": sum(int(s.get("count", 1)) for s in value.get("host_syncs", [])),
            "transfers": value.get("transfers") if isinstance(value.get("transfers"), dict) else {},
            "lines_seen": value.get("lines_seen", []),
            "hlo_rules": load_rules().version,
        }
        self._steps["observe"] = BackendStep(
            StepStatus.OK,
            round(step.seconds, 1),
            f"{graphs} graph(s) checked, {compiles.get('uncached', 0)} compiled on the way (cut by fallbacks or host reads), {len(fallbacks)} fallback site(s)",
        )
        return obs

    def refine_diff(self, report: Any, observation: Observation, calls: list[Any]) -> None:
        """Line-matched disagreements: torch-xla names decomposed ops, the capture names the user's."""
        from neuronprobe.backends.xla_diff import refine_diff

        refine_diff(report, observation, calls)

    def count_compiles(self, loaded: Any, inputs_per_call: list[Any], *, timeout: float) -> ObservedCompiles:
        """Real torch-xla compiles for a stream of inputs (UncachedCompile), one call per input."""
        import torch

        calls = []
        for inputs in inputs_per_call:
            args, kwargs = (list(inputs), {}) if isinstance(inputs, (tuple, list)) else ([], dict(inputs))
            calls.append((_real(args), _real(kwargs)))
        request = self._request(loaded, ["compiles"])
        with tempfile.TemporaryDirectory(prefix="neuronprobe-xla-compiles-") as tmp:
            calls_file = Path(tmp) / "calls.pt"
            torch.save(calls, calls_file)
            request["calls_file"] = str(calls_file)
            run = run_worker(str(self.env.python), request, Path(tmp), timeout=timeout, op_timeout=timeout, save_graphs=False)
        if (exited := model_exit(run, loaded)) is not None:
            raise exited
        step = run.steps.get("compiles")
        last = run.progress[-1] if run.progress else {"calls": 0, "compiles": 0}
        if step is None or step.status is not StepStatus.OK:
            what = (step.error if step else None) or next((s.error for s in run.steps.values() if s.error), "did not run")
            return ObservedCompiles(
                compiles=int(last["compiles"]),
                source="torch_xla-cpu",
                shapes_run=int(last["calls"]),
                note=f"the xla-cpu run stopped ({what[:300]}); counted over the first {last['calls']} of {len(calls)} call(s)",
            )
        value = step.value
        # seconds stay 0: XLA's CPU compiler's time says nothing about neuronx-cc's, so the
        # compile-time estimate per graph is not taken from it.
        cpu_compile_s = int(value.get("compile_time_ns", 0)) / 1e9
        return ObservedCompiles(
            compiles=int(value["uncached"]),
            source="torch_xla-cpu",
            shapes_run=int(value["calls"]),
            note=f"torch-xla 2.9 on the host CPU: UncachedCompile={value['uncached']}, CachedCompile={value['cached']}, "
            f"host reads={value.get('host_syncs', 0)} (XLA's CPU compiler took {cpu_compile_s:.1f} s: not a neuronx-cc time)",
        )


def _real(value: Any) -> Any:
    """Meta tensors (hf: inputs) become zero-filled: the worker needs values; shapes are what compiles see."""
    import torch

    if isinstance(value, torch.Tensor):
        return torch.zeros(value.shape, dtype=value.dtype) if value.device.type == "meta" else value.detach().cpu()
    if isinstance(value, list):
        return [_real(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_real(v) for v in value)
    if isinstance(value, dict):
        return {k: _real(v) for k, v in value.items()}
    return value


def device_error_finding(step: StepOutcome, program: str, defects: list[Finding]) -> Finding:
    """The program failed on the XLA device (it runs on the CPU): one sentence, the device's own text in the detail.

    After a call that met a known torch-xla defect, the defect is the likely cause: its fix, not a guess.
    """
    from neuronprobe.support.error_patterns import quieted

    what, fails = _PROGRAM_FAILS[program]
    text = quieted(step.error.splitlines()[0] if step.error else "")
    message = f"{fails}: {text.shown[:300]}"
    fix = None
    if defects:
        first = defects[0]
        message += f" (after {first.op} at {first.location}, a known torch-xla defect: see that finding)"
        fix = first.fix
    return Finding.at(
        "observed-xla-error",
        SourceLocation(rel_path(step.file), step.line),
        what,
        message,
        fix=fix,
        origin=Origin.OBSERVED,
        source_line=line_text(step.file, step.line),
        detail=step.error if step.error != text.shown else "",
    )


def _where(step: StepOutcome, loaded: Any) -> str:
    if step.file:
        return f"{SourceLocation(rel_path(step.file), step.line)}: "
    source = getattr(loaded, "source", "")
    return f"{source}: " if source else ""


def _step_record(step: StepOutcome) -> BackendStep:
    """A worker step as the report's backend step: a status the report does not hold (the model's exit) is ``skipped``."""
    status = step.status if step.status in REPORTED_STEP_STATUSES else StepStatus.SKIPPED
    if status is StepStatus.OK:
        return BackendStep(status, round(step.seconds, 1))
    return BackendStep(status, detail=step.error[:300])


__all__ = ["BACKEND_NAME", "XlaCpuBackend", "run_worker"]
