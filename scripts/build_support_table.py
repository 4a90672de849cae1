"""Regenerate neuronprobe/support/data/xla_lowerings.json from torch-xla's lowering list.

The op names are facts; this script reads them from the upstream file
``codegen/xla_native_functions.yaml`` (pytorch/xla, BSD-3-Clause) at a tag and
writes them, with provenance, in neuronprobe's own format. The upstream file is
not committed here. Usage:

    python scripts/build_support_table.py PATH/TO/xla_native_functions.yaml --tag v2.9.0

``--python-kernels torch_xla/_internal/decomp_registration.py`` adds the ops
torch-xla registers a Python kernel for on the XLA key (``upsample_trilinear3d``
runs torch's own decomposition on the device: no CPU fallback, measured by
``benchmarks/opinfo_agreement.py``).

On a Neuron host with torch-xla installed, ``--from-dispatcher`` asks the
dispatcher instead (``torch._C._dispatch_get_registrations_for_dispatch_key``).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

SECTIONS = ("full_codegen", "ir_gen", "supported", "symint", "autograd")  # of the yaml
OUT = Path(__file__).resolve().parent.parent / "neuronprobe" / "support" / "data" / "xla_lowerings.json"


def names_from_yaml(text: str) -> dict[str, list[str]]:
    """Read the section lists without a YAML dependency: the file is flat `key:` + `  - name` lines."""
    sections: dict[str, list[str]] = {}
    current = None
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].rstrip()
        if not line:
            continue
        if not line.startswith(" ") and line.endswith(":"):
            current = line[:-1]
            sections.setdefault(current, [])
        elif line.lstrip().startswith("- ") and current in SECTIONS:
            sections[current].append(line.lstrip()[2:].strip())
    return sections


PYTHON_KERNEL = re.compile(r"""register_kernel\(\s*["']aten::([\w.]+)["']\s*,\s*["']xla["']""")


def names_from_python_kernels(text: str) -> list[str]:
    """``torch.library.register_kernel("aten::NAME", "xla", ...)`` calls: ops with an XLA kernel written in Python."""
    return sorted(set(PYTHON_KERNEL.findall(text)))


def names_from_dispatcher() -> dict[str, list[str]]:
    import torch
    import torch_xla  # noqa: F401  (registers the XLA kernels)

    regs = torch._C._dispatch_get_registrations_for_dispatch_key("XLA")
    auto = torch._C._dispatch_get_registrations_for_dispatch_key("AutogradXLA")
    strip = lambda n: n.split("::", 1)[1] if "::" in n else n  # noqa: E731
    return {"dispatcher_XLA": sorted(map(strip, regs)), "dispatcher_AutogradXLA": sorted(map(strip, auto))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("yaml", nargs="?", type=Path)
    parser.add_argument("--tag", default="v2.9.0")
    parser.add_argument("--from-dispatcher", action="store_true")
    parser.add_argument("--python-kernels", type=Path, help="torch_xla/_internal/decomp_registration.py at the same tag")
    args = parser.parse_args()
    if args.from_dispatcher:
        sections = names_from_dispatcher()
        source = "torch._C._dispatch_get_registrations_for_dispatch_key('XLA') on a Neuron host"
    else:
        if args.yaml is None:
            parser.error("give the yaml path or --from-dispatcher")
        sections = names_from_yaml(args.yaml.read_text())
        source = f"pytorch/xla codegen/xla_native_functions.yaml at tag {args.tag} (BSD-3-Clause)"
        if args.python_kernels:
            sections["python_kernels"] = names_from_python_kernels(args.python_kernels.read_text())
            source += " and the XLA kernels torch_xla/_internal/decomp_registration.py registers"
    names = sorted({n for ops in sections.values() for n in ops})
    data = {
        "torch_xla": args.tag,
        "source": source,
        "section_counts": {k: len(v) for k, v in sections.items() if v},
        "ops": names,
    }
    OUT.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {len(names)} op names to {OUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
