"""The XLA-stack idioms that do not carry over to TorchNeuron (``audit --stack native``; issue 36).

Code written for torch-neuronx's XLA stack (trn1/inf2, torch-xla 2.9) uses a lazy device (``'xla'``),
cuts graphs with ``xm.mark_step()``, traces with ``torch_neuronx.trace``/``parallel_model_trace`` and
serves through transformers-neuronx or NxD Inference. TorchNeuron (trn2/trn3) is eager PyTorch on the
``neuron`` device with ``torch.compile(backend="neuron")``, so each idiom needs its replacement. The rules
(``stacks = ["native"]`` in ``data/rules.toml``) report only for the native stack; the XLA stack keeps them.
"""

from __future__ import annotations

import ast
import re

Hit = tuple[str, int, int]  # rule id, 1-based line, 1-based column (as python_scan.Hit)

PREFILTER = re.compile(rb"torch_xla|xla|parallel_model_trace|transformers_neuronx|neuronx_distributed_inference")
_DEVICE = re.compile(r"^xla(:\d+)?$")
_STEP = frozenset({"mark_step", "optimizer_step", "wait_device_ops", "xla_device", "sync"})
_NXDI_ENTRY = ("neuronx_distributed_inference",)


def mentions(source: bytes | str) -> bool:
    """Whether the source names any XLA-stack idiom at all (a cheap test before parsing)."""
    data = source.encode("utf-8", "replace") if isinstance(source, str) else source
    return PREFILTER.search(data) is not None


def _module_rule(module: str) -> str | None:
    root = module.split(".")[0]
    if root == "torch_xla":
        return "xla-import"
    if root == "transformers_neuronx":
        return "transformers-neuronx"
    if root in _NXDI_ENTRY:
        return "nxdi-entry-point"
    return None


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def scan(tree: ast.AST) -> list[Hit]:
    """Every XLA-stack idiom of one parsed module."""
    hits: list[Hit] = []
    xla_names: set[str] = set()  # local names bound to torch_xla modules (xm, torch_xla, xmp, ...)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                rule = _module_rule(alias.name)
                if rule:
                    hits.append((rule, node.lineno, node.col_offset + 1))
                if alias.name.split(".")[0] == "torch_xla":
                    xla_names.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module:
            rule = _module_rule(node.module)
            if rule:
                hits.append((rule, node.lineno, node.col_offset + 1))
            if node.module.split(".")[0] == "torch_xla":
                xla_names.update(a.asname or a.name for a in node.names)
            for alias in node.names:
                if alias.name == "parallel_model_trace":
                    hits.append(("parallel-model-trace", node.lineno, node.col_offset + 1))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            head, _, last = name.rpartition(".")
            if last in _STEP and head and head.split(".")[0] in xla_names:
                hits.append(("xla-mark-step", node.lineno, node.col_offset + 1))
            elif last == "parallel_model_trace":
                hits.append(("parallel-model-trace", node.lineno, node.col_offset + 1))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _DEVICE.match(node.value):
            hits.append(("xla-device-string", node.lineno, node.col_offset + 1))
    return sorted(set(hits), key=lambda h: (h[1], h[2], h[0]))
