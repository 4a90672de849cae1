"""The xla-cpu worker: loads a model and observes it under torch-xla, in the torch 2.9 interpreter.

Run as ``python -m neuronprobe.backends.xla_worker REQUEST.json`` by
:mod:`neuronprobe.backends.xla_cpu`, with neuronprobe's source on ``PYTHONPATH``.
It needs nothing beyond torch, torch-xla (and transformers for ``hf:`` specs):
it imports only :mod:`neuronprobe.loaders.resolve` and :mod:`neuronprobe.backends.xla_observe`.

The request names the model (a file or ``hf:`` spec), the *program* to run on the
XLA device (``forward``; more programs, such as a training step, register in
:data:`PROGRAMS`), and the steps to take:

* ``observe``: run the program once under :func:`xla_observe.observe`;
* ``compiles``: run the model once per input of a traffic stream (a
  ``torch.save``'d list of calls, loaded with ``weights_only=True``) and count compiles.

Everything comes back as JSON lines appended to the request's ``events`` file, one
per step as it starts and ends, so that a step killed for its time limit leaves the
earlier steps' results intact. Nothing is pickled back.

The worker ends with ``os._exit`` once its last event is written: a thread the model
started and never ended must not keep it alive (a plain interpreter exit waits for
every non-daemon thread). A ``SystemExit`` or ``KeyboardInterrupt`` the model raises
is reported as the model's own ending (``StepStatus.EXIT``), never as a failure of the
XLA device. When the analysis worker runs it (``STACKS_DIR_ENV`` set), ``SIGUSR1``
dumps every thread's stack to ``<dir>/<pid>.stacks``, so that a kill for ``--timeout``
or ``--max-memory`` can name the model's line that was running here.
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from neuronprobe.backends.xla_tensors import DefectWatch, move_problems, real_tensors, registrations, to_device
from neuronprobe.process.supervisor import STACKS_DIR_ENV, STACKS_SUFFIX
from neuronprobe.usercode import is_library
from neuronprobe.vocabulary import StepStatus

# What a program factory gets: the loaded model (on the CPU) and the XLA device; it
# returns the zero-argument callable that observe() runs.
ProgramFactory = Callable[..., Callable[[], Any]]  # (loaded, device[, options])
# The model's own ways of ending the process, reported as such (StepStatus.EXIT), not as a device failure.
_MODEL_EXITS = (SystemExit, KeyboardInterrupt)


def forward_program(loaded: Any, device: Any) -> Callable[[], Any]:
    """One inference forward of the model on ``device``, as the user calls it."""
    import torch

    module = loaded.module.to(device)
    args, kwargs = to_device(real_tensors(loaded.args), device), to_device(real_tensors(loaded.kwargs), device)

    def run() -> Any:
        with torch.no_grad():
            return module(*args, **kwargs)

    return run


def train_step_program(loaded: Any, device: Any, options: dict[str, Any] | None = None) -> Callable[[], Any]:
    """One training step (``--train``): see :mod:`neuronprobe.backends.train_program`."""
    from neuronprobe.backends.train_program import TrainProgramOptions, train_program

    return train_program(loaded, device, TrainProgramOptions(**options) if options else None)


PROGRAMS: dict[str, ProgramFactory] = {"forward": forward_program, "train": train_step_program}


def load(request: dict[str, Any]) -> Any:
    """The model, as the main process loaded it, but under this interpreter's torch."""
    from neuronprobe.loaders.resolve import HF_PREFIX, load_hf, load_model_file, worker_sys_path

    spec = str(request["spec"])
    worker_sys_path(spec, request)  # the model's folder first, --path, then the user's PYTHONPATH (after torch 2.9's own)
    if spec.startswith(HF_PREFIX):
        overrides, shrink = list(request.get("overrides", [])), bool(request.get("shrink", False))  # shrink: a smaller config (xla_auto)
        return load_hf(spec[len(HF_PREFIX) :], overrides, device="cpu", shrink=shrink, input_plan=request.get("input_plan"))
    return load_model_file(Path(spec), request.get("entry"), [str(p) for p in request.get("paths", [])])


def _user_place(exc: BaseException) -> tuple[str | None, int | None]:
    place: tuple[str | None, int | None] = (None, None)
    for frame in traceback.extract_tb(exc.__traceback__):
        if not is_library(frame.filename) and not frame.filename.endswith("xla_worker.py"):
            place = (frame.filename, frame.lineno)
    return place


class Events:
    """The JSON-lines channel back to the parent (a file: the user's prints go to stdout)."""

    def __init__(self, path: str) -> None:
        self.fh = open(path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115 - the event log is written until the worker exits

    def emit(self, **event: Any) -> None:
        self.fh.write(json.dumps(event, default=str) + "\n")
        self.fh.flush()


def run_step(events: Events, name: str, fn: Callable[[], Any]) -> tuple[bool, Any]:
    """Run one step, reporting its start and its result or error (with the user's frame)."""
    events.emit(event="start", step=name, time=time.time())
    start = time.monotonic()
    try:
        value = fn()
    except BaseException as exc:  # the step's failure is data for the parent
        file, line = _user_place(exc)
        events.emit(
            event="done",
            step=name,
            status=str(StepStatus.EXIT if isinstance(exc, _MODEL_EXITS) else StepStatus.FAILED),
            exit_code=_exit_code(exc),
            seconds=round(time.monotonic() - start, 3),
            error=f"{type(exc).__name__}: {exc}"[:4000],
            error_type=type(exc).__name__,
            file=file,
            line=line,
            traceback=traceback.format_exc()[-8000:],
        )
        return False, exc
    events.emit(event="done", step=name, status=str(StepStatus.OK), seconds=round(time.monotonic() - start, 3), value=value)
    return True, value


def _exit_code(exc: BaseException) -> Any:
    """``SystemExit``'s code as JSON can carry it (``sys.exit(0)``, ``sys.exit('bye')``); None otherwise."""
    if not isinstance(exc, SystemExit):
        return None
    code = exc.code
    return code if code is None or isinstance(code, (int, str)) else repr(code)


def arm_stack_dump() -> Any:
    """``SIGUSR1`` dumps every thread's stack to ``<STACKS_DIR_ENV>/<pid>.stacks`` (when the variable is set)."""
    folder = os.environ.get(STACKS_DIR_ENV, "")
    if not folder or not os.path.isdir(folder):
        return None
    fh = open(os.path.join(folder, f"{os.getpid()}{STACKS_SUFFIX}"), "w", encoding="utf-8")  # noqa: SIM115 - faulthandler writes to it until the worker exits
    faulthandler.register(signal.SIGUSR1, file=fh, all_threads=True, chain=False)
    return fh


def _cpu_forward_ok(loaded: Any) -> tuple[bool, str]:
    """Whether the forward runs on this torch's CPU: tells a torch-2.9 problem from an XLA one."""
    import torch

    try:
        with torch.no_grad():
            loaded.module.to("cpu")(*real_tensors(loaded.args), **real_tensors(loaded.kwargs))
    except BaseException as exc:  # a sys.exit() there too is the model failing on the CPU
        return False, f"{type(exc).__name__}: {exc}"
    return True, ""


def main(argv: list[str]) -> int:
    from neuronprobe.process.lifeline import die_with_parent, parent_from_env

    die_with_parent(parent_from_env())  # its own session: without this a killed parent left it running
    request = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    events = Events(request["events"])
    os.environ.setdefault("PJRT_DEVICE", "CPU")

    def versions() -> dict[str, str]:
        import torch
        import torch_xla

        return {"torch": torch.__version__, "torch-xla": torch_xla.__version__, "python": sys.version.split()[0]}

    ok, _ = run_step(events, "import", versions)
    if not ok:
        return 3
    models: dict[str, Any] = {}

    def load_step() -> dict[str, Any]:
        with registrations() as where:  # the user's line of each register_buffer / nn.Parameter
            models["loaded"] = loaded = load(request)
        models["where"] = where
        return {"name": loaded.name, "source": loaded.source}

    ok, _ = run_step(events, "load", load_step)
    if not ok:
        return 4
    loaded = models["loaded"]
    import torch_xla

    from neuronprobe.backends import xla_observe

    device = torch_xla.device()
    program_name = request.get("program", "forward")
    steps = list(request.get("steps", ["observe"]))
    # False: the program's last graph is read as HLO, not compiled by XLA's CPU compiler (see observe()).
    execute = bool(request.get("execute", False))
    if "observe" in steps or "parity" in steps:
        # Each parameter and buffer on its own first: a tensor the device refuses (a sparse buffer, a
        # subclass, a dtype) is named at its registering line, and the program, which cannot run, is not run.
        # Before an observation the weights stay on the device (its program would move them next); the
        # parity step loads the reference's weights into the model on the CPU and casts them there.
        keep = "observe" in steps
        ok, problems = run_step(events, "move", lambda: move_problems(loaded.module, device, models.get("where"), keep=keep))
        if ok and problems:
            return 0
    if "observe" in steps:
        factory = PROGRAMS[program_name]
        extra = [request["program_options"]] if "program_options" in request else []  # e.g. the train program's optimizer
        watch = DefectWatch()

        def observe_step() -> Any:
            program = factory(loaded, device, *extra)

            def watched() -> Any:  # observe() may run the program twice (its function-level retry): count the last run
                watch.sites.clear()
                with watch:
                    return program()

            return xla_observe.observe(watched, execute=execute)

        ok, failure = run_step(events, "observe", observe_step)
        if watch.found():  # known torch-xla defects met on the way, whether the run ended well or not
            events.emit(event="defects", step="observe", sites=watch.found())
        if isinstance(failure, _MODEL_EXITS):
            return 0
        if not ok:
            cpu_ok, why = _cpu_forward_ok(loaded)
            events.emit(event="cpu_check", step="observe", cpu_ok=cpu_ok, error=why[:2000])
    if "parity" in steps:  # issue 25: the model in bf16 on the XLA device, outputs back as files
        from neuronprobe.backends.xla_parity_worker import run_parity

        run_step(events, "parity", lambda: run_parity(loaded, device, request["program_options"]))
    if "compiles" in steps and request.get("calls_file"):
        import torch

        calls = torch.load(request["calls_file"], weights_only=True)
        module = loaded.module.to(device)

        def run_call(call: Any) -> Any:
            args, kwargs = call
            with torch.no_grad():
                out = module(*to_device(list(args), device), **to_device(dict(kwargs), device))
            return out

        def progress(value: dict) -> None:
            events.emit(event="progress", step="compiles", value=value)

        run_step(events, "compiles", lambda: xla_observe.count_compiles(run_call, calls, progress))
    return 0


def run(argv: list[str]) -> None:
    """``main``, then ``os._exit``: no thread the model left running (nor an atexit hook of its) holds the worker."""
    stacks = arm_stack_dump()
    code = 3
    try:
        code = main(argv)
    except BaseException:  # the request could not be read: the parent sees no events and reads the log
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr, stacks):
            try:
                if stream is not None:
                    stream.flush()
            except Exception:
                pass
    os._exit(code)


if __name__ == "__main__":
    run(sys.argv)
