"""``neuronprobe setup native-table``: the installed TorchNeuron release's own table, from its live registrations.

On a Neuron host the truth is what the installed ``torch_neuronx`` registers for the PrivateUse1 key.
A separate interpreter imports it and lists the key's registrations
(:data:`neuronprobe._torch.dispatch_table.PROBE_SCRIPT`); the names are resolved through torch's
dispatch table like the bundled table's, and written to
``${XDG_CACHE_HOME:-~/.cache}/neuronprobe/native-table.json``, which the analysis then prefers.
A recorded dump of the same JSON (``--from-dump``) builds the table without the SDK.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from datetime import date
from pathlib import Path
from typing import Any

from neuronprobe._torch.dispatch_table import PROBE_SCRIPT
from neuronprobe.errors import InputError
from neuronprobe.support.native.resolve import resolve
from neuronprobe.support.native.table import bundled

PROBE_TIMEOUT_S = 600.0
ALLOW_FAKE = "NEURONPROBE_ALLOW_FAKE_SDK"


def probe_installed(python: str = sys.executable, timeout: float = PROBE_TIMEOUT_S) -> dict[str, Any]:
    """The installed torch_neuronx's PrivateUse1 registrations and versions, read in a separate interpreter."""
    try:
        done = subprocess.run([python, "-c", PROBE_SCRIPT], capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise InputError(f"setup native-table: importing torch_neuronx took more than {timeout:g} s") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise InputError(f"setup native-table: no TorchNeuron to read here ({last}); run it on a trn2/trn3 host with torch-neuronx 2.13+, or pass --from-dump")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def read_dump(path: Path) -> dict[str, Any]:
    """A recorded probe result: ``{"registrations": [...], "torch_neuronx": ..., "torch": ..., "date": ...}``."""
    from neuronprobe.files import read_input_text
    from neuronprobe.support.native.table import MAX_TABLE_BYTES

    try:
        text = read_input_text(path, "registrations dump", cap=MAX_TABLE_BYTES)  # bounded: a FIFO or /dev/zero is one sentence
    except InputError as exc:
        raise InputError(f"--from-dump {exc}") from None
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InputError(f"--from-dump {path}: cannot read it ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("registrations"), list):
        raise InputError(f"--from-dump {path}: not a registrations dump (a JSON object with a 'registrations' list)")
    return doc


def table_from_probe(probe: Mapping[str, Any], where: str, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The table document for a probe result; the test fake is refused unless explicitly allowed."""
    env = os.environ if environ is None else environ
    fake = bool(probe.get("fake"))
    if fake and env.get(ALLOW_FAKE) != "1":
        raise InputError(f"setup native-table: the torch_neuronx found is neuronprobe's test fake, not the SDK (set {ALLOW_FAKE}=1 in tests)")
    names = [str(n) for n in probe["registrations"]]
    resolved = resolve(names, ())
    version = str(probe.get("torch_neuronx") or "unknown")
    dated = str(probe.get("date") or date.today().isoformat())
    base = bundled()
    return {
        "format": 1,
        "stack": "native",
        "release": f"torch-neuronx {version} as installed" + (" (FAKE SDK, not hardware)" if fake else ""),
        "dated": dated,
        "torch": str(probe.get("torch", "")),
        "provenance": [
            f"{where}: torch._C._dispatch_get_registrations_for_dispatch_key('PrivateUse1') after import torch_neuronx ({len(names)} registrations)",
            "resolved through torch's dispatcher (neuronprobe/support/native/resolve.py); host kernels from the bundled table",
        ],
        "neuron_kernel": resolved.neuron_kernel,
        "registered_cpu_fallback": [],
        "composite": resolved.composite,
        "no_kernel": resolved.no_kernel,
        "unmatched_registrations": resolved.unmatched,
        "silent_fallback": sorted(base.silent_fallback),
        "host_kernels": {k: v for k, v in base.host_kernels.items() if k in resolved.neuron_kernel},
        "dtype_fallback": {},
    }
