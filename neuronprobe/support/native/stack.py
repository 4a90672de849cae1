"""Which software stack a target runs: torch-neuronx's XLA stack or TorchNeuron, the native backend.

The SDK documents the split (field-2026-12.md, section 1 and 2): trn1 and inf2 run the XLA-era
torch-neuronx 2.9 (torch-xla); TorchNeuron (torch-neuronx 2.13/2.14, device ``neuron``) is a
public beta from Neuron 2.33.0 (2026-10-19) on trn2 and trn3 only, and XLA inference is not shipped
from 2.32. So ``--stack`` defaults to ``native`` on trn2/trn3 for SDK 2.33 and later (and when no
``--sdk`` is given: the newest release), to ``xla`` otherwise.
"""

from __future__ import annotations

from neuronprobe.errors import InputError
from neuronprobe.support.rule import release_key

XLA = "xla"
NATIVE = "native"
STACKS: tuple[str, ...] = (XLA, NATIVE)
NATIVE_TARGETS: tuple[str, ...] = ("trn2", "trn3")
NATIVE_FROM = "2.33.0"  # TorchNeuron public beta (docs release-notes/components/torchneuron; GitHub aws-neuron/torch-neuronx v2.33.0)
# The releases that ship TorchNeuron as a public beta (docs release-notes/2.33.0, 2.34.0).
NATIVE_RELEASES: tuple[str, ...] = ("2.33.0", "2.34.0")
STACK_WORDS = {XLA: "torch-neuronx XLA stack (torch-xla 2.9)", NATIVE: "TorchNeuron native stack (device 'neuron', PrivateUse1)"}


def default_stack(target: str, sdk: str | None = None) -> str:
    """The stack the SDK documents for ``target`` in release ``sdk`` (None: the newest release)."""
    if target not in NATIVE_TARGETS:
        return XLA
    return NATIVE if sdk is None or release_key(sdk) >= release_key(NATIVE_FROM) else XLA


def check_stack(stack: str | None, target: str, sdk: str | None = None) -> str:
    """``stack`` checked against the target and release, or the default; a wrong pair is an :class:`InputError`."""
    if stack is None:
        return default_stack(target, sdk)
    if stack not in STACKS:
        raise InputError(f"--stack {stack!r}: unknown stack; use one of {', '.join(STACKS)}")
    if stack == NATIVE and target not in NATIVE_TARGETS:
        raise InputError(f"--stack native: TorchNeuron runs on {' and '.join(NATIVE_TARGETS)} only, not on --target {target}; use --stack xla or --target trn2")
    if stack == NATIVE and sdk is not None and release_key(sdk) < release_key(NATIVE_FROM):
        raise InputError(f"--stack native --sdk {sdk}: TorchNeuron is public from Neuron {NATIVE_FROM}; use --sdk {NATIVE_RELEASES[-1]} or --stack xla")
    return stack


def check_native_sdk(sdk: str | None) -> str:
    """The native stack's release: ``sdk`` if it ships TorchNeuron, else the newest that does."""
    if sdk is None:
        return NATIVE_RELEASES[-1]
    if sdk not in NATIVE_RELEASES:
        raise InputError(f"--sdk {sdk!r}: not a Neuron SDK release with TorchNeuron; known: {', '.join(NATIVE_RELEASES)}")
    return sdk
