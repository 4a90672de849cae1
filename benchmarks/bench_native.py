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
        "distinct_ops": report.summary.distinct_ops,
        "findings_by_verdict": dict(sorted(collections.Counter(str(f.verdict) for f in report.findings).items())),
        "not_analysed": len(report.not_analysed),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=None, help="only the first N types of the tier")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "bench_native_results.json")
    parser.add_argument("--markdown", type=Path, default=None, help="also write the results as a Markdown table here")
    parser.add_argument("--from-json", action="store_true", help="only render --markdown from an existing --out")
    args = parser.parse_args(argv)
    if args.from_json:
        if args.markdown is None:
            parser.error("--from-json needs --markdown")
        args.markdown.write_text(render_markdown(json.loads(args.out.read_text())))
        return 0
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
    verdicts = {s: collections.Counter() for s in ("xla", "native")}  # type: dict[str, collections.Counter[str]]
    for r in ok:
        for s in verdicts:
            verdicts[s].update(r[s]["findings_by_verdict"])
    summary = {
        "types": len(rows),
        "analysed": {s: sum(1 for r in rows if "error" not in r[s]) for s in ("xla", "native")},
        "op_calls": {s: sum(r[s]["op_calls"] for r in ok) for s in ("xla", "native")},
        "findings_by_verdict": {s: dict(sorted(c.items())) for s, c in verdicts.items()},
        "analysed_both": len(ok),
        "seconds": {s: round(v, 2) for s, v in total.items()},
        "native_over_xla_time": round(total["native"] / total["xla"], 3) if total["xla"] else None,
        "mean_support_percentage": {s: round(sum(r[s]["support_percentage"] for r in ok) / len(ok), 2) if ok else None for s in ("xla", "native")},
        "types_with_native_cpu_fallback": sum(1 for r in ok if r["native"]["cpu_fallback_findings"]),
        "verdict_differs": [r["model_type"] for r in ok if r["xla"]["verdict"] != r["native"]["verdict"]],
        "top_native_fallback_ops": counter.most_common(15),
    }
    result = {"summary": summary, "rows": rows, "command": " ".join(["python", "benchmarks/bench_native.py", *(argv if argv is not None else sys.argv[1:])])}
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    if args.markdown is not None:
        args.markdown.write_text(render_markdown(result))
    print(json.dumps(summary, indent=1))
    return 0


def render_markdown(result: dict[str, Any]) -> str:
    """The results as the Markdown page ``benchmarks/native.md`` holds: the summary, then one row per type."""
    summary, rows = result["summary"], result["rows"]
    lines = [
        "| | xla (static) | native (static) |",
        "|---|---|---|",
        f"| types analysed (of {summary['types']}) | {summary['analysed']['xla']} | {summary['analysed']['native']} |",
        f"| op calls (types analysed by both) | {summary['op_calls']['xla']} | {summary['op_calls']['native']} |",
        f"| mean support % | {summary['mean_support_percentage']['xla']} | {summary['mean_support_percentage']['native']} |",
        f"| seconds (sum) | {summary['seconds']['xla']} | {summary['seconds']['native']} |",
    ]
    for verdict in sorted(set(summary["findings_by_verdict"]["xla"]) | set(summary["findings_by_verdict"]["native"])):
        lines.append(
            f"| findings `{verdict}` | {summary['findings_by_verdict']['xla'].get(verdict, 0)} | {summary['findings_by_verdict']['native'].get(verdict, 0)} |"
        )
    lines += [
        "",
        f"Time ratio native / xla-static: **{summary['native_over_xla_time']}**; types with a native `cpu_fallback`: "
        f"{summary['types_with_native_cpu_fallback']}; top-line verdict differs on {len(summary['verdict_differs'])} types.",
        "",
        "Ops that fall back most often on the native stack (types): " + ", ".join(f"`{op}` ({n})" for op, n in summary["top_native_fallback_ops"]),
        "",
        "| type | xla s | native s | xla ops | native ops | xla verdict | native verdict | native fallback ops |",
        "|---|---|---|---|---|---|---|---|",
    ]

    def cell(text: str) -> str:  # an error message inside a table cell: one line, no column separator
        return " ".join(text.split()).replace("|", "\\|")

    for r in rows:
        x, n = r["xla"], r["native"]
        lines.append(
            f"| {r['model_type']} | {x['seconds']} | {n['seconds']} | {x.get('op_calls', '-')} | {n.get('op_calls', '-')} "
            f"| {x.get('verdict', cell('error: ' + x.get('error', '')))} | {n.get('verdict', cell('error: ' + n.get('error', '')))} "
            f"| {', '.join('`' + op + '`' for op in n.get('fallback_ops', []))} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
