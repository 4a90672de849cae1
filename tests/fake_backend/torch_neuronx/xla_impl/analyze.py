"""FAKE torch_neuronx.analyze: the documented report dict, from the fixture's verdicts.

Like the real one: torch.jit.trace + inline, every ``aten::`` node with tensor
outputs (minus aten::to / aten::copy and ``additional_ignored_ops``), one
``neuronx-cc ... --query-compute-placement`` process per unique op signature
on a thread pool, ``failureAt`` "Lowering to HLO" or "neuronx-cc".
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import fake_neuron_common

from torch_neuronx._version import __version__
from torch_neuronx.xla_impl.compiler import as_tuple, aten_nodes, logger, require_compiler, run_compiler_quiet, signature_hash

LOWERING = "Lowering to HLO"
COMPILER = "neuronx-cc"


def _check(kind: str, folder: Path) -> bool:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "graph.hlo").write_text(json.dumps({"ops": [kind]}), encoding="utf-8")
    done = run_compiler_quiet(
        ["compile", str(folder / "graph.hlo"), "--framework", "XLA", "--target", "trn1", "--verbose", "error", "--query-compute-placement"]
    )
    return done.returncode == 0


def analyze(
    model: Any,
    ex_input: Any,
    compiler_workdir: Any = None,
    additional_ignored_ops: Any = None,
    max_workers: int = 4,
    is_hf_transformers: bool = False,
    cleanup: bool = False,
) -> dict[str, Any]:
    if additional_ignored_ops is None:
        additional_ignored_ops = set([])
    require_compiler()
    import neuronxcc

    logger.info("Analyzing Operator Support...")
    previous = os.environ.get("TOKENIZERS_PARALLELISM")
    if is_hf_transformers:
        os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        nodes = aten_nodes(model, as_tuple(ex_input), frozenset(additional_ignored_ops))
    finally:
        if is_hf_transformers:
            if previous is None:
                os.environ.pop("TOKENIZERS_PARALLELISM", None)
            else:
                os.environ["TOKENIZERS_PARALLELISM"] = previous
    fixture = fake_neuron_common.fixture()
    workdir = Path(compiler_workdir) if compiler_workdir else Path(tempfile.gettempdir()) / "neuron-analyze"
    unique = {n.signature: n for n in nodes}
    verdict: dict[str, str | None] = {}
    to_compile = []
    for sig, node in unique.items():
        if fake_neuron_common.lookup(node.kind, fixture.get("analyze_unsupported", {})) == LOWERING:
            verdict[sig] = LOWERING
        else:
            folder = workdir / f"analyze-{node.kind.replace('::', '_')}-{signature_hash(sig)}-compiler-cache"
            to_compile.append((sig, node.kind, folder))
    with ThreadPoolExecutor(max_workers=max(1, max_workers)) as pool:
        results = pool.map(lambda item: (item[0], _check(item[1], item[2])), to_compile)
        for sig, ok in results:
            verdict[sig] = None if ok else COMPILER
    supported: dict[str, int] = {}
    unsupported: list[dict[str, str]] = []
    for node in nodes:
        failure = verdict[node.signature]
        if failure is None:
            supported[node.kind] = supported.get(node.kind, 0) + 1
        else:
            unsupported.append({"kind": node.kind, "failureAt": failure, "call": node.call, "opGraph": node.op_graph})
    total = sum(supported.values()) + len(unsupported)
    percentage = sum(supported.values()) * 100 / total  # ZeroDivisionError when nothing qualifies, as upstream
    logger.info("The following operations are currently supported:")
    for kind in supported:
        logger.info(kind)
    logger.info("The following operations are currently not supported:")
    for entry in unsupported:
        logger.info(f"{entry['kind']}, {entry['call']}")
    logger.info(f"{percentage:.2f}% of arithmetic operations ({sum(supported.values())} of {total}) are supported")
    if cleanup:
        for path in workdir.glob("analyze-aten*"):
            shutil.rmtree(path, ignore_errors=True)
    return {
        "torch_neuronx_version": __version__,
        "neuronx_cc_version": neuronxcc.__version__,
        "support_percentage": f"{percentage:.2f}%",
        "supported_operators": supported,
        "unsupported_operators": unsupported,
    }
