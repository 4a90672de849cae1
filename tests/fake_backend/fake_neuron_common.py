"""Shared parts of the fake Neuron SDK: its fixture data and its op recorder.

Which ops fail, fall back or hang is the fake's OWN data (a JSON fixture),
never neuronprobe's support table, so a test can make the fake disagree with
the prediction. The fixture is read on every call, from the file named by
``FAKE_NEURON_FIXTURE`` (default: ``fixtures/default.json`` next to this file).

Fixture keys (all optional):

``analyze_unsupported``  {"aten::op": "neuronx-cc" | "Lowering to HLO"}: what
                         ``torch_neuronx.analyze`` reports unsupported, and where it failed.
``compile_errors``       {"aten::op": {"code": "NCC_...", "message": "..."}}: ops that make
                         ``neuronx-cc compile`` (trace, or a lazy torch-xla graph) fail.
``compile_status``       exit status of a failing compile (default 1).
``fallback_ops``         ["aten::op", ...]: ops torch-xla (or TorchNeuron) runs on the CPU.
``executed_fallback_ops`` false: mimic torch-xla < 2.4, which lacks ``met.executed_fallback_ops()``.
``hang``                 any of "analyze", "trace", "run": that step never finishes
                         (the compiler process, or the lazy graph execution, sleeps).
``hang_pid_file``        a hanging compiler process writes its pid here (to check it gets killed).

An op name matches its overloads: "aten::add" matches "aten::add.Tensor".
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

__neuronprobe_fake__ = True

HERE = Path(__file__).resolve().parent
FIXTURE_ENV = "FAKE_NEURON_FIXTURE"
DEFAULT_FIXTURE = HERE / "fixtures" / "default.json"
HANG_SECONDS = 3600.0  # "forever" for a test: far beyond any timeout a test sets


def fixture() -> dict[str, Any]:
    path = os.environ.get(FIXTURE_ENV) or str(DEFAULT_FIXTURE)
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def base_name(op: str) -> str:
    return op.split(".", 1)[0]


def lookup(op: str, table: Any) -> Any:
    """The entry for ``op`` (exact name first, then its base name) in a dict or list; None when absent."""
    if isinstance(table, dict):
        if op in table:
            return table[op]
        return table.get(base_name(op))
    if isinstance(table, list) and (op in table or base_name(op) in table):
        return True
    return None


def hangs(step: str) -> bool:
    return step in (fixture().get("hang") or [])


def hang_forever() -> None:
    time.sleep(HANG_SECONDS)


def dispatcher_name(func: Any) -> str:
    """``aten::add.Tensor`` / ``aten::nonzero``: the name torch-xla's fallback counters use."""
    name = func._schema.name
    overload = func._overloadname
    return name if overload in ("default", "") else f"{name}.{overload}"


def tensor_signature(args: Any) -> str:
    import torch

    parts = []
    for a in args:
        if isinstance(a, torch.Tensor):
            parts.append(f"{str(a.dtype).replace('torch.', '')}{list(a.shape)}")
        elif isinstance(a, (list, tuple)):
            parts.append(tensor_signature(a))
        else:
            parts.append(type(a).__name__)
    return "(" + ",".join(parts) + ")"


_RECORDER: Any = None


def recorder() -> Any:
    """The process-wide op recorder (a TorchDispatchMode), entered on first use and never left.

    The fake device is the CPU: from the moment a fake device is asked for, every
    aten op this process runs is recorded, as a lazy-tensor backend would record IR.
    """
    global _RECORDER
    if _RECORDER is None:
        from torch.utils._python_dispatch import TorchDispatchMode

        class Recorder(TorchDispatchMode):
            def __init__(self) -> None:
                super().__init__()
                self.ops: list[tuple[str, str]] = []  # (dispatcher name, input signature)

            @classmethod
            def ignore_compile_internals(cls) -> bool:
                # a device records its ops below dynamo: torch.compile still compiles while the recorder is on
                # (torch 2.13 skips compiling frames under any other dispatch mode, _dynamo/convert_frame.py)
                return True

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                self.ops.append((dispatcher_name(func), tensor_signature(args)))
                return func(*args, **(kwargs or {}))

            def take(self) -> list[tuple[str, str]]:
                ops, self.ops = self.ops, []
                return ops

        _RECORDER = Recorder()
        _RECORDER.__enter__()
    return _RECORDER
