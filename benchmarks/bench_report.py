"""Benchmark the HTML report: size and render time for GPT-2 (12 layers), and Chromium's load time.

    python benchmarks/bench_report.py [--lengths examples/request_lengths.txt] [--no-browser] [--keep DIR]

Target (issue 5): a GPT-2 (12 layers) report stays under 1.5 MB and renders in under 2 s.

Two reports are measured:

1. ``gpt2``: neuronprobe's own analysis of ``hf:gpt2`` (the 12-layer config, built
   without weights), with the traffic lengths when the analysis accepts them. This
   is the report a user gets.
2. ``gpt2-stress``: the same op inventory with everything a report can hold added,
   as an upper bound: a finding at every module each op is attributed to (82 for
   GPT-2, each with its source line), a recompiles section for 2,000 calls with one new
   shape every few calls (the timeline plot), the bucket proposal for the lengths
   with its curve, baselines and config snippets (the histogram and curve plots),
   and both diffs.

For each: HTML bytes; cold render (the first ``render_html`` in a fresh Python
process: Jinja2 and matplotlib imports, template compile, plots); warm render
(median of 5 in one process); and Chromium's load time (navigation start to the
load event, median of 3, headless, from a local file), with a check that the page
loaded with no console error and no network request.
"""

from __future__ import annotations

import argparse
import copy
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the DevTools-pipe Chromium driver lives with the browser tests

from neuronprobe.report.model import (  # noqa: E402
    Finding,
    PolicyPrediction,
    PredictionDiff,
    PredictionMismatch,
    RecompileCause,
    RecompileSection,
    Report,
    RunDiff,
)

MAX_BYTES = 1_500_000
MAX_RENDER_S = 2.0
STRESS_CALLS = 2000
STRESS_NEW_SHAPE_EVERY = 4  # calls per new input shape in the stress traffic: 500 graphs
WARM_RUNS = 5
BROWSER_RUNS = 3

_COLD = """
import sys, time
t0 = time.perf_counter()
from neuronprobe.report.model import load_report
report = load_report(sys.argv[1])
t1 = time.perf_counter()
from neuronprobe.report.html import render_html
html = render_html(report)
t2 = time.perf_counter()
print(t2 - t1)
"""


def read_lengths(path: Path) -> list[int]:
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [int(line) for line in lines if line]


def real_gpt2(lengths: Path | None) -> Report:
    from neuronprobe.analysis import AnalyzeOptions, TrafficOptions, analyze_spec

    traffic = TrafficOptions(lengths=lengths) if lengths else None
    try:
        return analyze_spec("hf:gpt2", AnalyzeOptions(command_line="bench_report.py"), traffic)
    except Exception as exc:  # traffic analysis may not accept this file; the op report is what matters
        print(f"note: analysis with traffic failed ({type(exc).__name__}: {exc}); analysing without traffic")
        return analyze_spec("hf:gpt2", AnalyzeOptions(command_line="bench_report.py"), None)


def stress(report: Report, lengths: list[int]) -> Report:
    """The GPT-2 report with every section filled to a realistic maximum."""
    big = copy.deepcopy(report)
    source = "/home/user/project/.venv/lib/python3.11/site-packages/transformers/models/gpt2/modeling_gpt2.py"
    findings = []
    for i, op in enumerate(big.ops):
        verdict = ("cpu_fallback", "dynamic_shape", "compile_error", "control_flow")[i % 4]
        for j, module in enumerate(op.modules or ["<root>"]):
            findings.append(
                Finding(
                    op=op.op,
                    verdict=verdict,
                    file=source,
                    line=100 + 7 * i + j,
                    module=module,
                    message=f"{op.op} in {module}: a made-up problem so the report is full",
                    fix="rewrite this call with ops that have a Neuron lowering; see the legend",
                    rule="stress",
                    ncc_code="NCC_EVRF007",
                    count=1 + j % 3,
                    source_line="attn_output = self._attn(query, key, value, attention_mask, head_mask)",
                    bytes_per_call=4096 * (j + 1) if verdict == "cpu_fallback" else 0,
                    shapes="[8, 12, 128, 64] float32",
                )
            )
    big.findings = findings
    big.summary.findings_total = len(findings)
    first_seen = list(range(0, STRESS_CALLS, STRESS_NEW_SHAPE_EVERY))
    big.recompiles = RecompileSection(
        calls=STRESS_CALLS,
        distinct_signatures=len(first_seen),
        predicted={
            "static": PolicyPrediction(len(first_seen), len(first_seen) * 90.0, first_seen, "one graph per shape"),
            "bucketed": PolicyPrediction(8, 720.0, [0, 3, 9, 20, 41, 90, 400, 1500], "8 buckets"),
        },
        causes=[RecompileCause(f"dim 1 of input_ids changed ({n})", 10, source, 900 + n, True, "def forward(self, input_ids):") for n in range(40)],
        compile_seconds_per_graph=90.0,
    )
    if lengths:
        from neuronprobe.shape_buckets import propose_buckets

        big.buckets = propose_buckets(lengths, 16, cost="attention", holdout=0.2)
    big.prediction_diff = PredictionDiff(
        [PredictionMismatch(o.op, "lowered", "cpu_fallback", source, 10 + n, "seen on the host") for n, o in enumerate(big.ops)],
        [],
    )
    big.baseline_diff = RunDiff(
        base_label="yesterday",
        new_label="today",
        new_findings=[],
        removed_findings=[],
        regressions=[f"regression {n}" for n in range(20)],
        version_changes={"neuronx-cc": ["2.20", "2.21"], "torch": ["2.8.0", "2.9.0"]},
    )
    return big


def cold_render_s(json_path: Path) -> float:
    out = subprocess.run([sys.executable, "-c", _COLD, str(json_path)], check=True, capture_output=True, text=True, cwd=ROOT)
    return float(out.stdout.strip().splitlines()[-1])


def warm_render_s(report: Report) -> tuple[float, str]:
    from neuronprobe.report.html import render_html

    html = render_html(report)
    times = []
    for _ in range(WARM_RUNS):
        start = time.perf_counter()
        html = render_html(report)
        times.append(time.perf_counter() - start)
    return statistics.median(times), html


def browser_load_ms(paths: list[Path]) -> dict[Path, tuple[float, int, int]]:
    from chromium_cdp import Browser

    results = {}
    with Browser() as browser:
        browser.load(paths[0])  # warm the browser itself once
        for path in paths:
            loads = [browser.load(path) for _ in range(BROWSER_RUNS)]
            last = loads[-1]
            results[path] = (statistics.median(x.load_ms for x in loads), len(last.errors), len(last.foreign_requests()))
            browser.screenshot(path.with_suffix(".png"), full_page=False)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=Path, default=ROOT / "examples" / "request_lengths.txt")
    parser.add_argument("--no-browser", action="store_true")
    parser.add_argument("--keep", type=Path, help="write the reports here (default: a temporary folder)")
    args = parser.parse_args()

    folder = args.keep or Path(tempfile.mkdtemp(prefix="bench-report-"))
    folder.mkdir(parents=True, exist_ok=True)
    lengths = read_lengths(args.lengths) if args.lengths and args.lengths.exists() else []

    start = time.perf_counter()
    gpt2 = real_gpt2(args.lengths if lengths else None)
    print(
        f"analysed hf:gpt2 in {time.perf_counter() - start:.1f} s: {gpt2.summary.ops_total} op calls, "
        f"{gpt2.summary.distinct_ops} distinct ops, {len(gpt2.findings)} findings, "
        f"recompiles={'yes' if gpt2.recompiles else 'no'}, buckets={'yes' if gpt2.buckets else 'no'}"
    )
    reports = {"gpt2": gpt2, "gpt2-stress": stress(gpt2, lengths)}

    rows = []
    for name, report in reports.items():
        json_path = folder / f"{name}.json"
        json_path.write_text(report.to_json(), encoding="utf-8")
        warm, html = warm_render_s(report)
        html_path = folder / f"{name}.html"
        html_path.write_text(html, encoding="utf-8")
        rows.append(
            {
                "name": name,
                "path": html_path,
                "bytes": len(html.encode()),
                "findings": len(report.findings),
                "svgs": html.count('<svg class="np-plot"'),
                "cold": cold_render_s(json_path),
                "warm": warm,
            }
        )
    if not args.no_browser:
        loads = browser_load_ms([r["path"] for r in rows])
        for r in rows:
            r["load_ms"], r["errors"], r["requests"] = loads[r["path"]]

    print(f"\nmachine: {platform.machine()}, {platform.python_implementation()} {platform.python_version()}; reports in {folder}\n")
    print("| report | findings | plots | size | cold render | warm render | Chromium load | console errors / requests |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    ok = True
    for r in rows:
        load = f"{r['load_ms']:.0f} ms" if "load_ms" in r else "not run"
        clean = f"{r['errors']} / {r['requests']}" if "load_ms" in r else "not run"
        print(f"| {r['name']} | {r['findings']} | {r['svgs']} | {r['bytes'] / 1e6:.3f} MB | {r['cold']:.2f} s | {r['warm'] * 1000:.0f} ms | {load} | {clean} |")
        ok &= r["bytes"] < MAX_BYTES and r["cold"] < MAX_RENDER_S and r.get("errors", 0) == 0 and r.get("requests", 0) == 0
    print(f"\ntarget: < {MAX_BYTES / 1e6:.1f} MB and < {MAX_RENDER_S:.0f} s render, no console errors, no requests: {'met' if ok else 'MISSED'}")
    summary = {r["name"]: {k: v for k, v in r.items() if k not in ("path", "name")} for r in rows}
    (folder / "bench_report.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
