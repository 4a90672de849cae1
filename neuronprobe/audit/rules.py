"""The rule catalogue, read from ``data/rules.toml`` (data, not code).

Ids are stable: suppressions, baselines and SARIF results refer to them.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from importlib import resources

from neuronprobe.audit.model import SEVERITIES

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

STACKS: tuple[str, ...] = ("xla", "native")
# --target decides the stack when --stack is not given: trn1/inf2 run the XLA-era
# torch-neuronx, trn2/trn3 run TorchNeuron (shared/DESIGN.md, "Known field facts").
TARGET_STACK: dict[str, str] = {"trn1": "xla", "inf2": "xla", "trn2": "native", "trn3": "native"}
PROVENANCE_URLS: dict[str, str] = {
    "NXGUIDE": "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/frameworks/torch/torch-neuronx/programming-guide/training/pytorch-neuron-programming-guide.html",
    "TNHOME": "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/index.html",
    "TNCOMPILE": "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/reference-torch-compile.html",
    "TNABOUT": "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/about-pytorch-neuron.html",
    "ENVVARS": "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/archive/nxd-training/torch-neuron-envvars.html",
    "PTXLA29": "https://github.com/pytorch/xla/tree/v2.9.0/torch_xla",
    "TORCHACC": "https://docs.pytorch.org/docs/stable/accelerator.html",
    "NEURONPIP": "https://pip.repos.neuron.amazonaws.com",
    "NXCONTAINER": "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/containers/tutorials/build-run-neuron-container.html",
    "TNBEST": "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/best-practices-pytorch-neuron.html",
    "NXRN": "https://github.com/aws-neuron/aws-neuron-sdk/tree/81ce03ae/about-neuron/announcements",
}


@dataclass(frozen=True)
class Rule:
    """One rule: what it finds, how bad it is, and what to do on each Neuron stack."""

    id: str
    severity: str
    title: str
    message: str
    why: str
    fix_xla: str
    fix_native: str
    provenance: tuple[str, ...] = ()
    docs_silent: str = ""
    stacks: tuple[str, ...] = STACKS  # the stacks it is reported for (the XLA-stack idioms: native only)

    def fix(self, stack: str) -> str:
        return self.fix_native if stack == "native" else self.fix_xla


@functools.cache
def load_rules() -> dict[str, Rule]:
    """id -> Rule, in catalogue order. The file ships with the package; a bad entry is a bug."""
    text = resources.files("neuronprobe.audit").joinpath("data/rules.toml").read_text(encoding="utf-8")
    rules: dict[str, Rule] = {}
    for entry in tomllib.loads(text)["rule"]:
        rule = Rule(**{**entry, "provenance": tuple(entry.get("provenance", ())), "stacks": tuple(entry.get("stacks", STACKS))})
        if rule.severity not in SEVERITIES or rule.id in rules:
            raise ValueError(f"rules.toml: bad rule {rule.id!r}")
        rules[rule.id] = rule
    return rules


def stack_for(target: str | None, stack: str | None) -> str:
    """--stack wins; else the target's stack; else xla (the default target is trn1)."""
    if stack:
        return stack
    return TARGET_STACK.get(target or "trn1", "xla")
