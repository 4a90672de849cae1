"""Benchmark the shape-bucket optimiser: speed, and padding on real traffic.

    python benchmarks/bench_buckets.py [TRACE.csv ...] [--column ContextTokens] [--output FILE.md]

1. Speed: 10^6 synthetic lengths (log-normal body, >= 10^4 distinct values), K = 16,
   end to end through ``propose_buckets`` (histogram, exact DP for every k, baselines,
   configs), in this one process pinned to one core. Target: <= 1 s.
2. Padding on real traffic: for each trace given (e.g. the Azure LLM inference traces
   2023, ``AzureLLMInferenceTrace_conv.csv`` / ``_code.csv``, column ``ContextTokens``),
   the NxD Inference ladder against the optimum with the same number of graphs, plus
   a held-out check (fit on the first half in time order, score on the second).

The Azure traces are CC-BY 4.0 (github.com/Azure/AzurePublicDataset); cite: Patel et al.,
"Splitwise: Efficient Generative LLM Inference Using Phase Splitting", ISCA 2024. They
are read from the path given and never copied into this repository.
"""

from __future__ import annotations

import os

# One core, one process: pin BLAS/OpenMP pools before numpy loads.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from neuronprobe.shape_buckets import propose_buckets, read_lengths  # noqa: E402
from neuronprobe.shape_buckets.baselines import nxdi_ladder  # noqa: E402
from neuronprobe.shape_buckets.costs import ATTENTION, TOKENS, score  # noqa: E402

SPEED_TARGET_S = 1.0  # the budget for 10^6 lengths, K = 16, one core
ATTRIBUTION = (
    "Azure LLM inference trace 2023 (CC-BY 4.0, github.com/Azure/AzurePublicDataset); "
    'Patel et al., "Splitwise: Efficient Generative LLM Inference Using Phase Splitting", ISCA 2024.'
)


def _pin_one_core() -> str:
    if hasattr(os, "sched_setaffinity"):
        cpu = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpu})
        return f"pinned to CPU {cpu}"
    return "not pinned (no sched_setaffinity)"


def synthetic(n: int, seed: int = 0) -> np.ndarray:
    """A log-normal prompt-length body (median ~665) capped at 32768: ~1.2e4 distinct values at 1e6."""
    rng = np.random.default_rng(seed)
    return np.clip(np.round(rng.lognormal(6.5, 1.0, n)), 1, 32768).astype(np.int64)


def bench_speed(n: int, k: int, repeat: int) -> list[str]:
    rows = [f"| lengths | distinct | K | cost | best of {repeat} (s) | target (s) |", "|---|---|---|---|---|---|"]
    for label, lengths in (("log-normal", synthetic(n)), ("uniform 1..10^5", np.random.default_rng(1).integers(1, 100_001, n))):
        distinct = int(np.unique(lengths).size)
        for cost in ("tokens", "attention"):
            times = []
            for _ in range(repeat):
                start = time.perf_counter()
                propose_buckets(lengths, k, cost=cost)
                times.append(time.perf_counter() - start)
            rows.append(f"| {n:,} ({label}) | {distinct:,} | {k} | {cost} | {min(times):.3f} | {SPEED_TARGET_S:.1f} |")
    # End to end from a file: one integer per line, read_lengths + propose_buckets.
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "lengths.txt"
        lengths = synthetic(n)
        path.write_text("\n".join(map(str, lengths.tolist())) + "\n", encoding="utf-8")
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            propose_buckets(read_lengths(path), k)
            times.append(time.perf_counter() - start)
        distinct = int(np.unique(lengths).size)
        rows.append(f"| {n:,} (log-normal, read from a text file) | {distinct:,} | {k} | tokens | {min(times):.3f} | {SPEED_TARGET_S:.1f} |")
    return rows


def bench_trace(path: Path, column: str) -> list[str]:
    data = read_lengths(path, column=column)
    lengths = data.lengths
    values, counts = np.unique(lengths, return_counts=True)
    top = int(values[-1])
    ladder = nxdi_ladder(top)
    k = len(ladder)
    name = path.stem.replace("AzureLLMInferenceTrace_", "")
    opt = propose_buckets(data, max(k, 8))
    opt_attn = propose_buckets(data, k, cost="attention")
    strict = propose_buckets(data, k, fit="strict")
    held = propose_buckets(data, k, holdout=0.5)
    nxdi = score(values, counts, ladder, "inclusive", TOKENS)
    nxdi_strict = score(values, counts, ladder, "strict", TOKENS)
    nxdi_attn = score(values, counts, ladder, "inclusive", ATTENTION)
    same_k = opt.curve[k - 1]
    best8 = opt.curve[7] if len(opt.curve) >= 8 else opt.curve[-1]
    held_nxdi = held.holdout["baselines"]["nxd-inference"]["tokens"]
    return [
        f"| {name} | {lengths.size:,} | {top:,} | {k} | {nxdi.tokens:.1f}% | {same_k.overhead.tokens:.1f}% "
        f"| {nxdi_strict.tokens:.1f}% | {strict.overhead.tokens:.1f}% "
        f"| {nxdi_attn.attention:.1f}% | {opt_attn.overhead.attention:.1f}% "
        f"| {best8.overhead.tokens:.1f}% | {held_nxdi:.1f}% | {held.holdout['overhead']['tokens']:.1f}% |",
        f"  optimal edges at k={k}: {same_k.edges}; best 8: {best8.edges}; timestamps: {data.time_column}",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("traces", nargs="*", type=Path, help="trace CSVs (e.g. AzureLLMInferenceTrace_conv.csv)")
    parser.add_argument("--column", default="ContextTokens", help="the length column of the traces")
    parser.add_argument("--n", type=int, default=1_000_000, help="synthetic lengths for the speed test")
    parser.add_argument("--k", type=int, default=16, help="K for the speed test")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--output", type=Path, help="also write the tables (Markdown) here")
    args = parser.parse_args(argv)

    pin = _pin_one_core()
    lines = [
        "## Speed (one process, one core)",
        "",
        f"{platform.processor() or platform.machine()}, Python {platform.python_version()}, numpy {np.__version__}; {pin}.",
        "",
        *bench_speed(args.n, args.k, args.repeat),
    ]
    if args.traces:
        lines += [
            "",
            "## Padding overhead on real traffic: NxD Inference ladder vs the optimum with as many graphs",
            "",
            "Overhead = padded / real - 1 (tokens: sum of bucket lengths; attention: sum of squared bucket lengths).",
            "Inclusive fit unless marked strict (NxD Inference's runtime rule). Last bucket = the trace's maximum.",
            "Held-out: fitted on the first half of the hour (time order), scored on the second half.",
            "",
            "| trace | requests | max | graphs (k) | NxDI tokens | optimal tokens | NxDI strict | optimal strict "
            "| NxDI attention | optimal attention (x^2 objective) | optimal k=8 tokens | held-out NxDI | held-out optimal |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        details = []
        for path in args.traces:
            row, detail = bench_trace(path, args.column)
            lines.append(row)
            details.append(detail)
        lines += ["", *details, "", f"Data: {ATTRIBUTION}"]
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if args.output:
        args.output.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
