"""FAKE ``neuronx-cc`` command line: ``python -m neuronxcc.driver compile <dir or graph.hlo> ...``.

The "HLO" the fake torch_neuronx writes is JSON: ``{"ops": ["aten::linear", ...]}``.
The driver looks the ops up in the fixture (fake_neuron_common): an op listed
in ``compile_errors`` (or, for ``--query-compute-placement``, in
``analyze_unsupported`` at "neuronx-cc") makes it print ``[NCC_*]``
diagnostics and exit with the fixture's ``compile_status``; a "trace" or
"analyze" entry in ``hang`` makes it sleep.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import fake_neuron_common as common

from neuronxcc import __version__


def _graph_ops(target: Path) -> list[str]:
    hlo = target / "graph.hlo" if target.is_dir() else target
    try:
        return list(json.loads(hlo.read_text(encoding="utf-8")).get("ops", []))
    except (OSError, ValueError):
        return []


def _option(argv: list[str], name: str, default: str) -> str:
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return default


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "compile" or len(argv) < 2:
        print("usage: neuronx-cc compile <input> --framework XLA --target trn1 [--output OUT]", file=sys.stderr)
        return 2
    fixture = common.fixture()
    query = "--query-compute-placement" in argv
    target = _option(argv, "--target", "trn1")
    ops = _graph_ops(Path(argv[1]))
    if common.hangs("analyze" if query else "trace"):
        print(f"neuronx-cc {__version__}: compiling {len(ops)} op(s) for {target} ...", flush=True)
        if fixture.get("hang_pid_file"):  # lets a test check that the hung compiler was killed
            Path(fixture["hang_pid_file"]).write_text(str(os.getpid()), encoding="utf-8")
        common.hang_forever()
    failures = []
    for op in ops:
        error = common.lookup(op, fixture.get("compile_errors", {}))
        if error is not None:
            failures.append((op, error))
        elif query and common.lookup(op, fixture.get("analyze_unsupported", {})) == "neuronx-cc":
            failures.append((op, {"code": "NCC_EVRF001", "message": f"Operation {common.base_name(op)[6:]} is not supported on {target}."}))
    if failures:
        for op, error in failures:
            code = error.get("code", "NCC_EVRF001")
            message = error.get("message") or f"Operation {common.base_name(op)[6:]} is not supported on {target}."
            print(f"[{code}] {message}", file=sys.stderr, flush=True)
        print("Compiler status ERROR", file=sys.stderr, flush=True)
        return int(fixture.get("compile_status", 1))
    output = _option(argv, "--output", "")
    if output:
        Path(output).write_bytes(b"FAKE-NEFF\n" + json.dumps(ops).encode())
    print("Compiler status PASS", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
