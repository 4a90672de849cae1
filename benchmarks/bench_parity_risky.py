"""What the risky low-precision constructs (issue 25, point 3) add to a parity run, and what they find.

For each case: the parity run (the fp32 reference and the emulated precisions, module by module),
then :func:`neuronprobe.parity.risky.scan_parity` on its result (one graph capture per served
dtype, the scan, the confirmation from the drift rows), timed apart; the findings are listed with
their rule, line, call count and confirmation. Real random weights from config, seed 0.

Usage: python benchmarks/bench_parity_risky.py
"""

from __future__ import annotations

import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

CASES = [
    ("hf:gpt2", {}),  # parity's default precisions
    ("hf:bert", {"dtype": "fp16", "mixed_precision_accumulation": "on,off"}),  # layer_norm_eps=1e-12 in fp16
]


def main() -> None:
    from neuronprobe.parity.precision import requested_precisions
    from neuronprobe.parity.risky import scan_parity
    from neuronprobe.parity.run import ParityOptions, parity_for_spec

    for spec, flags in CASES:
        start = time.perf_counter()
        result = parity_for_spec(spec, ParityOptions(precisions=requested_precisions(**flags)))
        parity_s = time.perf_counter() - start
        start = time.perf_counter()
        scan = scan_parity(result)
        scan_s = time.perf_counter() - start
        words = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in flags.items()) or "(default precisions)"
        print(f"{spec} {words}: parity {parity_s:.1f} s, risky scan {scan_s:.1f} s, {len(scan.findings)} finding(s)")
        for f in scan.findings:
            print(f"  {f.rule} line {f.line} x{f.count}: {f.confirmation}")
        for note in scan.notes:
            print(f"  not scanned: {note}")


if __name__ == "__main__":
    main()
