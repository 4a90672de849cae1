"""What torch-xla does with a program: the observation shared by the trn1 and xla-cpu backends.

Runs inside an interpreter that has torch_xla (a trn1 host's, or the xla-cpu
backend's torch 2.9 environment); imports only torch, torch_xla and the
standard library, and returns plain data (JSON-able dicts), never objects.

The program is a parameter (:func:`observe`): a zero-argument callable that runs
work on the XLA device (a forward now; a training step can be observed the same
way). While it runs, a ``TorchDispatchMode`` sees every aten op call and

* compares torch-xla's fallback counters (``aten::*``, ``met.executed_fallback_ops()``)
  before and after it: a change means that call ran on the CPU, so each fallback
  is placed at the user's frame of the call that caused it, with the bytes it moved;
* counts host reads (``aten::_local_scalar_dense``: ``.item()``, ``if t > 0``,
  printing a tensor), each of which forces the pending graph to run;
* tags the op's output IR with the user's file:line (``_set_xla_custom_op_name_prefix``),
  so every HLO instruction lowered from it carries the user's line in ``op_name``.

A program the aten-level mode breaks (functionalization rejects a CPU tensor in an
in-place op on an XLA tensor under it) is observed again with a ``TorchFunctionMode``,
above the dispatcher: the same records, per torch call instead of per aten op.

``XLA_HLO_DEBUG=1`` / ``XLA_IR_DEBUG=1`` (set before torch_xla is imported) make torch-xla
write ``source_file``/``source_line`` metadata on HLO ops, but from the innermost Python
frame only, which is usually torch's own module code; the op-name tag is what places
HLO at the user's line. ``XLA_SAVE_TENSORS_FILE`` with ``XLA_SAVE_TENSORS_FMT=hlo``
makes torch-xla write the HLO of every graph it executes (one per compile or cache
hit), including the graphs cut short by a fallback or a host read.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from neuronprobe.usercode import user_frame

TAG_PREFIX = "np@"  # op_name prefix "np@FILE:LINE@aten::op@": the user's line and the dispatched op, in the HLO
HOST_SYNC_OP = "aten::_local_scalar_dense"
MAX_LINES_PER_OP = 20  # enough to know whether an op was called from one line only
# Environment for the interpreter that runs torch-xla, set before torch_xla is imported.
DEBUG_ENV = {"XLA_HLO_DEBUG": "1", "XLA_IR_DEBUG": "1", "XLA_SAVE_TENSORS_FMT": "hlo"}
SAVE_FILE_ENV = "XLA_SAVE_TENSORS_FILE"
# The place of an op is the user's frame (neuronprobe.usercode: stdlib only, so the worker can import it).


def op_name(func: Any) -> str:
    """``aten.add.Tensor`` -> ``aten::add.Tensor``; ``aten.mm.default`` -> ``aten::mm`` (the capture's spelling)."""
    text = str(func)
    namespace, _, rest = text.partition(".")
    if rest.endswith(".default"):
        rest = rest[: -len(".default")]
    return f"{namespace}::{rest}"


def _fallback_counts(met: Any) -> dict[str, int]:
    names = met.executed_fallback_ops() if hasattr(met, "executed_fallback_ops") else [n for n in met.counter_names() if n.startswith("aten::")]
    return {n: int(met.counter_value(n) or 0) for n in names}


def _function_name(func: Any) -> str:
    """``torch.nn.functional.max_pool2d`` for a functional, ``torch.unique`` for the rest (the user's spelling)."""
    name = getattr(func, "__name__", None) or str(func)
    module = getattr(func, "__module__", None) or ""
    return f"torch.nn.functional.{name}" if module == "torch.nn.functional" else f"torch.{name}"


def _aliases(func: Any) -> bool:
    """An op whose output is (a view of) an input: its IR may be the input's own, which must not be renamed."""
    schema = getattr(func, "_schema", None)
    return schema is None or any(r.alias_info is not None for r in schema.returns)


def _nbytes(values: Any) -> int:
    import torch
    from torch.utils._pytree import tree_leaves

    return sum(t.numel() * t.element_size() for t in tree_leaves(values) if isinstance(t, torch.Tensor))


def _recorder_classes() -> tuple[Any, Any]:
    """(dispatch-level recorder, function-level recorder); built lazily: their bases come from torch.

    Long because the two classes are defined in its body: their bases (``TorchDispatchMode``, ``TorchFunctionMode``)
    and the torch-xla hooks they call exist only once torch-xla 2.9 is imported in the worker's own interpreter, and
    the module is imported without torch (the ``worker-side-stdlib`` contract). Each method is short; the shared
    state (``Record``) is one class.
    """
    import torch
    import torch_xla
    import torch_xla.debug.metrics as met
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    set_prefix = getattr(getattr(torch_xla, "_XLAC", None), "_set_xla_custom_op_name_prefix", None)

    class Record:
        """Fallbacks and host reads per user line, and the line (and op) tagged onto each output's IR."""

        def _start(self, tag: bool) -> None:
            self.tag = tag and set_prefix is not None
            self.sites: dict[tuple[str, str | None, int | None], dict[str, Any]] = {}
            self.calls = 0
            self.ops: set[str] = set()  # dispatched aten ops (the dispatch level only)
            self.lines: set[tuple[str, int]] = set()  # user lines whose ops ran (with tagging on)
            self.op_lines: dict[str, set[tuple[str, int]]] = {}  # dispatched op -> the user lines that called it
            # user lines whose calls had a float64 tensor of rank >= 1: the float64 the model asked for, not the
            # f64 scalars torch-xla makes of Python floats (the device's dtype mapping narrows only the former)
            self.float64_lines: set[tuple[str, int]] = set()
            self.accounted: dict[str, int] = {}  # fallback counter -> the calls placed so far

        def add_site(self, counter: str, delta: int, file: str | None, line: int | None, moved: int, name: str) -> None:
            if delta <= 0:
                return
            site = self.sites.setdefault(
                (counter, file, line),
                {"op": counter, "file": file, "line": line, "count": 0, "bytes": 0, "called_as": name},
            )
            site["count"] += delta
            site["bytes"] += moved
            self.accounted[counter] = self.accounted.get(counter, 0) + delta

        def record(self, name: str, call: Callable[[], Any], inputs: Any, aten: bool, may_tag: Callable[[Any], bool]) -> Any:
            before = _fallback_counts(met)
            out = call()
            self.calls += 1
            if aten:
                self.ops.add(name)
            after = _fallback_counts(met)
            file = line = None
            if after != before or self.tag:
                file, line = user_frame(sys._getframe())  # depth 0: an op from a C++ thread has no caller frame
                if file is not None and line is not None:
                    self.lines.add((file, line))
                    if any(isinstance(t, torch.Tensor) and t.dtype == torch.float64 and t.dim() > 0 for t in tree_leaves((inputs, out))):
                        self.float64_lines.add((file, line))
                    if aten:
                        places = self.op_lines.setdefault(name, set())
                        if len(places) < MAX_LINES_PER_OP:
                            places.add((file, line))
            if after != before:
                moved = _nbytes((inputs, out))
                for counter, value in after.items():
                    self.add_site(counter, value - before.get(counter, 0), file, line, moved, name)
            if self.tag and file is not None:
                tag = f"{TAG_PREFIX}{file}:{line}@{name if aten else ''}@"
                for t in tree_leaves(out):
                    if isinstance(t, torch.Tensor) and t.device.type == "xla" and may_tag(t):
                        with contextlib.suppress(Exception):  # a tag is a convenience; never break the user's program
                            set_prefix(t, tag, 1)  # type: ignore[misc]  # not None: self.tag requires it
            return out

    class DispatchRecorder(Record, TorchDispatchMode):
        """Every aten call, after decomposition: the exact op that fell back."""

        def __init__(self, tag: bool) -> None:
            TorchDispatchMode.__init__(self)
            self._start(tag)
            self.callers = CallerRecorder(self)

        def __enter__(self) -> Any:
            self.callers.__enter__()
            try:
                return TorchDispatchMode.__enter__(self)
            except BaseException:
                self.callers.__exit__(None, None, None)
                raise

        def __exit__(self, *exc: Any) -> Any:
            try:
                return TorchDispatchMode.__exit__(self, *exc)
            finally:
                self.callers.__exit__(*exc)

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            aliasing = _aliases(func)
            return self.record(op_name(func), lambda: func(*args, **kwargs), (args, kwargs), True, lambda t: not aliasing)

    class CallerRecorder(TorchFunctionMode):
        """The torch calls above the dispatch mode, for the fallbacks it cannot see.

        torch-xla registers some ops at its autograd key (``max_pool2d``: torch_xla's
        ``aten_autograd_ops.cpp``), which comes before the Python dispatch key, so a
        fallback such a kernel takes (a dilated max pool runs ``max_pool2d_with_indices``
        on the CPU) changes the counters without any aten call of the mode around it.
        A counter change inside a torch call that the aten calls under it do not
        account for is placed at that call's user frame (``F.max_pool2d`` in
        ``nn.MaxPool2d``: the line that called the module). Nested torch calls run with
        this mode popped, so only the outermost call, the one the user's code made, is seen.
        """

        def __init__(self, inner: Record) -> None:
            TorchFunctionMode.__init__(self)
            self.inner = inner

        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            before = _fallback_counts(met)
            accounted = dict(self.inner.accounted)
            out = func(*args, **kwargs)
            after = _fallback_counts(met)
            if after != before:
                file, line = user_frame(sys._getframe())
                moved = _nbytes((args, kwargs, out))
                for counter, value in after.items():
                    seen = self.inner.accounted.get(counter, 0) - accounted.get(counter, 0)
                    self.inner.add_site(counter, value - before.get(counter, 0) - seen, file, line, moved, _function_name(func))
            return out

    class FunctionRecorder(Record, TorchFunctionMode):
        """Every torch call the program makes, above the dispatcher: invisible to functionalization."""

        def __init__(self, tag: bool) -> None:
            TorchFunctionMode.__init__(self)
            self._start(tag)

        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            leaves = [a for a in tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)]
            name = f"torch.{getattr(func, '__name__', func)}"

            def may_tag(t: Any) -> bool:  # not an input returned (in-place) and not a view of one
                return not t._is_view() and not any(t is a for a in leaves)

            return self.record(name, lambda: func(*args, **kwargs), (args, kwargs), False, may_tag)

    return DispatchRecorder, FunctionRecorder


def read_saved_graphs(path: str | None) -> list[dict[str, str]]:
    """The graphs torch-xla executed, from its ``XLA_SAVE_TENSORS_FILE`` (it appends ``.<ordinal>``)."""
    if not path:
        return []
    import glob

    graphs: list[dict[str, str]] = []
    for name in sorted(glob.glob(path + "*")):
        try:
            text = Path(name).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for block in text.split("## BEGIN_GRAPH")[1:]:
            body, _, _ = block.partition("## END_GRAPH")
            hlo, _, tail = body.partition("Graph Hash:")
            graphs.append({"hlo": hlo.strip(), "hash": tail.strip().split()[0] if tail.strip() else ""})
    return graphs


def reset_saved_graphs(path: str | None) -> None:
    if not path:
        return
    import glob

    for name in glob.glob(path + "*"):
        with contextlib.suppress(OSError):
            os.remove(name)


def sync(wait: bool = True) -> None:
    """``torch_xla.sync`` (2.9; ``xm.mark_step`` before), waiting for the device where it can."""
    import torch_xla

    if hasattr(torch_xla, "sync"):
        try:
            torch_xla.sync(wait=wait)
        except TypeError:  # an older signature without wait
            torch_xla.sync()
        return
    import torch_xla.core.xla_model as xm

    xm.mark_step()


def compile_counters(met: Any) -> dict[str, int]:
    compile_time = met.metric_data("CompileTime")
    return {
        "uncached": int(met.counter_value("UncachedCompile") or 0),
        "cached": int(met.counter_value("CachedCompile") or 0),
        "compile_time_ns": int(compile_time[1]) if compile_time else 0,
    }


def transfer_counters(met: Any, pending: int = 0) -> dict[str, int]:
    """What torch-xla itself counted for the program: graph executions (``ExecuteTime``; a graph left
    pending, read as HLO instead of run, is one more), host-to-device transfers (``TransferToDeviceTime``:
    ``torch.tensor(..., device=)``, a CPU tensor's ``.to(device)``) and device-to-host transfers
    (``TransferFromDeviceTime``: ``.item()``, ``.cpu()``, a truth test). Call after the device is idle:
    executions finish asynchronously and are counted when they do."""

    def count(name: str) -> int:
        data = met.metric_data(name)
        return int(data[0]) if data else 0

    return {
        "executions": count("ExecuteTime") + pending,
        "to_device": count("TransferToDeviceTime"),
        "from_device": count("TransferFromDeviceTime"),
    }


def _wait_device() -> None:
    """Block until the device's queued executions finished (their counters are written then)."""
    try:
        import torch_xla.core.xla_model as xm

        xm.wait_device_ops()
    except Exception:  # an older torch-xla without it: the counters may miss the last execution
        return


def _xla_leaves(value: Any) -> list[Any]:
    import torch
    from torch.utils._pytree import tree_leaves

    return [t for t in tree_leaves(value) if isinstance(t, torch.Tensor) and t.device.type == "xla"]


def observe(program: Callable[[], Any], *, tag_sources: bool = True, save_file: str | None = None, execute: bool = True) -> dict[str, Any]:
    """Run ``program`` once on the XLA device and report what torch-xla did with it.

    Returns ``fallbacks`` (one entry per op and user line: count, bytes moved),
    ``fallback_totals`` (torch-xla's own counters, the ground truth the entries add
    up to), ``host_syncs`` (the ``_local_scalar_dense`` entries), ``compiles``
    (UncachedCompile, CachedCompile, CompileTime) and ``graphs`` (the HLO of each
    executed graph, when ``XLA_SAVE_TENSORS_FILE`` is set).

    ``execute=False`` leaves the last graph (the one the outputs still depend on)
    uncompiled and reads its HLO instead: on the host CPU, compiling it with XLA's
    CPU compiler is most of the run's time and says nothing about neuronx-cc.
    Graphs cut earlier (by a fallback or a host read) were compiled and run, as
    they must be for the program to go on.
    """
    import torch_xla
    import torch_xla.debug.metrics as met

    save_file = save_file if save_file is not None else os.environ.get(SAVE_FILE_ENV)
    sync()
    reset_saved_graphs(save_file)
    met.clear_all()
    dispatch_recorder, function_recorder = _recorder_classes()
    recorder = dispatch_recorder(tag_sources)
    observer_failure = ""
    try:
        with recorder:
            out = program()
    except Exception as exc:
        # A Python dispatch mode is not invisible to torch-xla: a program that mixes a CPU
        # tensor into an in-place op on an XLA tensor trips functionalization under it. Observe
        # again at the torch-function level, above the dispatcher; if that fails too, the
        # failure is the program's own.
        observer_failure = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]
        sync()
        reset_saved_graphs(save_file)
        met.clear_all()
        recorder = function_recorder(tag_sources)
        with recorder:
            out = program()
    pending: list[dict[str, Any]] = []
    if execute:
        sync()
    else:
        leaves = _xla_leaves(out)
        if leaves:
            pending.append({"hlo": torch_xla._XLAC._get_xla_tensors_hlo(leaves), "hash": "", "pending": True})
    _wait_device()
    totals = _fallback_counts(met)
    sites = list(recorder.sites.values())
    return {
        "transfers": transfer_counters(met, len(pending)),
        "fallbacks": [s for s in sites if s["op"] != HOST_SYNC_OP],
        "host_syncs": [s for s in sites if s["op"] == HOST_SYNC_OP],
        "fallback_totals": totals,
        "counter_source": "torch-xla executed_fallback_ops()" if hasattr(met, "executed_fallback_ops") else "torch-xla aten:: counters",
        "compiles": compile_counters(met),
        "graphs": read_saved_graphs(save_file) + pending,
        "op_calls": recorder.calls,
        "ops_seen": sorted(recorder.ops),
        "lines_seen": sorted([f, n] for f, n in recorder.lines),
        "op_lines": {op: sorted([f, n] for f, n in places) for op, places in recorder.op_lines.items()},
        "float64_lines": sorted([f, n] for f, n in recorder.float64_lines) if recorder.tag else None,
        "output_bytes": _nbytes(out),
        "observer_failure": observer_failure,
    }


def count_compiles(run_call: Callable[[Any], Any], calls: list[Any], progress: Callable[[dict], None]) -> dict[str, Any]:
    """Run one call per input and count torch-xla's compiles (no dispatch mode: the graphs are the user's own)."""
    import torch_xla.debug.metrics as met

    sync()
    met.clear_all()
    for i, inputs in enumerate(calls):
        out = run_call(inputs)  # kept alive over the sync: a dead output's graph never runs
        sync()
        del out
        progress({"calls": i + 1, "compiles": int(met.counter_value("UncachedCompile") or 0)})
    return {"calls": len(calls), **compile_counters(met), "host_syncs": int(met.counter_value(HOST_SYNC_OP) or 0)}


__all__ = ["DEBUG_ENV", "TAG_PREFIX", "count_compiles", "observe", "read_saved_graphs"]
