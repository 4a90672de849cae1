"""The zoo tier under both stacks in one run (issue 36.9): TorchNeuron's native table against the XLA static analysis.

For each ``hf:`` type of ``tests/data/zoo_tier.json`` (its ``--set`` overrides), one process analyses the
model twice with ``--backend static`` on ``--target trn2``: ``--stack xla`` (torch-xla 2.9 lowerings + Neuron
rules) and ``--stack native`` (the native table), alternating which goes first. It records per stack the time,
the op calls, the support percentage, the CPU-fallback findings and ops, and the top-line verdict; and across
the tier, the ops that fall back most often on the native stack and the types whose verdict differs.

Usage: OMP_NUM_THREADS=1 python benchmarks/bench_native.py [--limit N] [--out benchmarks/bench_native_results.json]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parent.parent
TIER = ROOT / "tests" / "data" / "zoo_tier.json"


def one(model_type: str, overrides: list[str], stack: str) -> dict[str, Any]:
    from neuronprobe.analysis import AnalyzeOptions, analyze_spec

    started = time.perf_counter()
    try:
        report = analyze_spec(f"hf:{model_type}", AnalyzeOptions(backend="static", target="trn2", stack=stack, overrides=list(overrides)))
    except Exception as exc:  # a type the capture cannot run is a row, not the end of the benchmark
        return {"error": f"{type(exc).__name__}: {str(exc)[:160]}", "seconds": round(time.perf_counter() - started, 3)}
    fallbacks = [f for f in report.findings if f.verdict == "cpu_fallback"]
    return {
        "seconds": round(time.perf_counter() - started, 3),
        "op_calls": report.summary.ops_total,
        "fallback_bytes_per_call": report.summary.fallback_bytes_per_call,
        "support_percentage": report.summary.support_percentage,
        "verdict": str(report.verdict),
        "cpu_fallback_findings": len(fallbacks),
        "fallback_ops": sorted({f.op for f in fallbacks}),
        "problems": sum(1 for f in report.findings if f.verdict.is_problem),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=None, help="only the first N types of the tier")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "bench_native_results.json")
    args = parser.parse_args(argv)
    types = json.loads(TIER.read_text())["types"][: args.limit]
    one("gpt2", [], "xla")  # warm-up: imports and first-call caches, not timed
    rows = []
    for i, t in enumerate(types):
        order = ("xla", "native") if i % 2 == 0 else ("native", "xla")
        row = {"model_type": t["model_type"], **{stack: one(t["model_type"], t.get("set", []), stack) for stack in order}}
        rows.append(row)
        args.out.write_text(json.dumps({"partial": True, "rows": rows}, indent=1) + "\n")  # a cut run keeps what it measured
        x, n = row["xla"], row["native"]
        print(
            f"{t['model_type']:<28} xla {x.get('seconds')}s {x.get('verdict', x.get('error'))} | native {n.get('seconds')}s {n.get('verdict', n.get('error'))}",
            file=sys.stderr,
        )
    ok = [r for r in rows if "error" not in r["xla"] and "error" not in r["native"]]
    counter: collections.Counter[str] = collections.Counter(op for r in ok for op in r["native"]["fallback_ops"])
    total = {s: sum(r[s]["seconds"] for r in ok) for s in ("xla", "native")}
    summary = {
        "types": len(rows),
        "analysed_both": len(ok),
        "seconds": {s: round(v, 2) for s, v in total.items()},
        "native_over_xla_time": round(total["native"] / total["xla"], 3) if total["xla"] else None,
        "mean_support_percentage": {s: round(sum(r[s]["support_percentage"] for r in ok) / len(ok), 2) if ok else None for s in ("xla", "native")},
        "types_with_native_cpu_fallback": sum(1 for r in ok if r["native"]["cpu_fallback_findings"]),
        "verdict_differs": [r["model_type"] for r in ok if r["xla"]["verdict"] != r["native"]["verdict"]],
        "top_native_fallback_ops": counter.most_common(15),
    }
    args.out.write_text(json.dumps({"summary": summary, "rows": rows}, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
