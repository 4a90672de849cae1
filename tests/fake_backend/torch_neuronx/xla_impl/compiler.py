"""FAKE: the model's TorchScript nodes and the neuronx-cc subprocess, shared by trace and analyze."""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fake_neuron_common
import torch

logger = logging.getLogger("Neuron")
NEURON_REPO = "https://pip.repos.neuron.amazonaws.com"
IGNORED_OPS = frozenset({"aten::to", "aten::copy"})


@dataclass
class Node:
    kind: str
    call: str  # the TorchScript source range: a stack, innermost frame first
    op_graph: str
    signature: str


class FunctionForward(torch.nn.Module):
    """Wraps a plain function so torch.jit.trace takes it (as the real analyze does)."""

    def __init__(self, func: Any) -> None:
        super().__init__()
        self.func = func

    def forward(self, *args: Any) -> Any:
        return self.func(*args)


def as_tuple(example_inputs: Any) -> tuple[Any, ...]:
    return tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)


def require_compiler() -> None:
    try:
        import neuronxcc  # noqa: F401
    except ImportError:
        raise RuntimeError(
            f"neuronx-cc is not installed.\nneuronx-cc can be installed using:\npython3 -m pip install neuronx-cc --extra-index-url={NEURON_REPO}"
        ) from None


def aten_nodes(model: Any, example_inputs: tuple[Any, ...], ignored: frozenset[str] = frozenset()) -> list[Node]:
    """The aten nodes analyze and trace look at: torch.jit.trace, inlined; tensor outputs only."""
    if not isinstance(model, torch.nn.Module):
        model = FunctionForward(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(model, example_inputs, check_trace=False, strict=False)
    nodes = []
    for node in traced.inlined_graph.nodes():
        kind = node.kind()
        if not kind.startswith("aten::") or kind in IGNORED_OPS or kind in ignored:
            continue
        if not all(isinstance(o.type(), torch._C.TensorType) for o in node.outputs()):
            continue
        inputs = ", ".join(f"%{i.debugName()} : {i.type()}" for i in node.inputs())
        outputs = ", ".join(f"%{o.debugName()}" for o in node.outputs())
        op_graph = f"graph({inputs}):\n  {str(node).strip()}\n  return ({outputs})\n"
        signature = kind + "|" + ";".join(str(i.type()) for i in node.inputs()) + "->" + ";".join(str(o.type()) for o in node.outputs())
        try:
            call = node.sourceRange()
        except Exception:
            call = ""
        nodes.append(Node(kind, call, op_graph, signature))
    return nodes


def signature_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def compiler_command() -> list[str]:
    return [sys.executable, "-m", "neuronxcc.driver"]


def compiler_env() -> dict[str, str]:
    """The fake compiler is a Python module: its folder (and the fixture helper's) must be importable."""
    import neuronxcc

    folders = [str(Path(neuronxcc.__file__).resolve().parent.parent), str(fake_neuron_common.HERE)]
    current = os.environ.get("PYTHONPATH", "")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*folders, *([current] if current else [])])
    return env


def run_compiler(args: list[str]) -> subprocess.CompletedProcess:
    """Run the compiler; its output goes to this process's stdout/stderr, as the real one does."""
    sys.stdout.flush()
    sys.stderr.flush()
    return subprocess.run([*compiler_command(), *args], env=compiler_env(), check=False)


def run_compiler_quiet(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([*compiler_command(), *args], env=compiler_env(), check=False, capture_output=True, text=True)
