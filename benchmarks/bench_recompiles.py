"""Benchmark: recompile prediction over a 10^5-call stream (target: <= 1 s).

Measures, best of REPEATS, on synthetic traffic:

* ``read``: parsing a --shapes JSON Lines file of 10^5 calls;
* ``predict``: graphs per policy, first_seen and the shape causes for the whole stream,
  including the bucket proposal (shape_buckets.propose_buckets) for the bucketed policy.

Streams: ``realistic`` (log-normal lengths 1..4096, batch sizes 1/2/4/8: a few
thousand distinct signatures), ``all-distinct`` (every call a new signature: the
worst case for the dict work), and ``lengths`` (--lengths with 3 batch sizes, with a
stand-in for make_inputs so that torch is not timed).

Run: .venv/bin/python benchmarks/bench_recompiles.py
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from neuronprobe.recompiles.predict import predict
from neuronprobe.recompiles.traffic import Traffic, read_shapes, traffic_from_lengths

CALLS = 100_000
REPEATS = 3
TARGET_SECONDS = 1.0
SEED = 0


def best_of(fn: Callable[[], object]) -> float:
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def realistic_lines(rng: np.random.Generator) -> list[str]:
    lengths = np.clip(rng.lognormal(5.0, 0.8, CALLS).astype(int), 1, 4096)
    batches = rng.choice([1, 2, 4, 8], CALLS)
    return [json.dumps({"input_ids": [int(b), int(n)], "attention_mask": [int(b), int(n)]}) for b, n in zip(batches, lengths, strict=False)]


def distinct_lines() -> list[str]:
    return [json.dumps({"input_ids": [1 + i // 4096, 1 + i % 4096]}) for i in range(CALLS)]


def lengths_traffic(rng: np.random.Generator) -> Traffic:
    lengths = np.clip(rng.lognormal(5.0, 0.8, CALLS // 3).astype(int), 1, 4096)

    def signature_for(b: int, n: int) -> tuple:
        return (("input_ids", (b, n)),)

    return traffic_from_lengths(lengths, [1, 4, 8], signature_for, "synthetic lengths")


def main() -> None:
    rng = np.random.default_rng(SEED)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, lines in (("realistic", realistic_lines(rng)), ("all-distinct", distinct_lines())):
            path = Path(tmp) / f"{name}.jsonl"
            path.write_text("\n".join(lines) + "\n")
            traffic = read_shapes(path)
            read_s = best_of(lambda path=path: read_shapes(path))
            predict_s = best_of(lambda traffic=traffic: predict(traffic))
            rows.append((name, traffic.calls, len(traffic.signatures), read_s, predict_s))
    traffic = lengths_traffic(rng)
    rows.append(("lengths x 3 batch sizes", traffic.calls, len(traffic.signatures), float("nan"), best_of(lambda: predict(traffic))))

    print(f"recompile prediction, best of {REPEATS} (target: predict <= {TARGET_SECONDS:.1f} s for 10^5 calls)")
    print(f"{'stream':<26}{'calls':>9}{'distinct':>10}{'read s':>9}{'predict s':>11}")
    for name, calls, distinct, read_s, predict_s in rows:
        read = "-" if read_s != read_s else f"{read_s:.3f}"
        flag = "" if predict_s <= TARGET_SECONDS else "  OVER TARGET"
        print(f"{name:<26}{calls:>9,}{distinct:>10,}{read:>9}{predict_s:>11.3f}{flag}")


if __name__ == "__main__":
    main()
