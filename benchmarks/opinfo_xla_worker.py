"""torch-xla's side of the OpInfo agreement benchmark: run in the torch-xla 2.9 interpreter.

For every OpInfo of ``op_db`` and each dtype of float32/bfloat16/int32/int64/bool
the op supports on CPU, the first ``--max-samples`` sample inputs are moved to
the XLA device (``PJRT_DEVICE=CPU``) and the op is called once. torch-xla's CPU
fallbacks happen at dispatch time, so ``executed_fallback_ops()`` (cleared before
each sample) is known without compiling the graph: nothing is synced.

One JSON line per sample (``op``, ``dtype``, ``index``, ``fallbacks``, ``error``)
is appended to ``--out``; keys already in the file are skipped, so a worker that
dies (a native crash) is restarted by ``opinfo_agreement.py`` where it stopped.
Before each sample its key is written to ``--current``: the orchestrator records
the sample that killed the worker as ``crashed`` (``op|dtype|*`` when the same
key kills it twice: the whole dtype of the op is then skipped). Standalone: it does not import
neuronprobe (the torch-xla environment does not have it).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("PJRT_DEVICE", "CPU")

DTYPE_NAMES = ("float32", "bfloat16", "int32", "int64", "bool")
SAMPLE_TIMEOUT_S = 30


def op_label(op: Any) -> str:
    """OpInfo's name plus its variant (``max.reduction_with_dim``): the match key across torch releases."""
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


class SampleTimeout(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise SampleTimeout(f"sample ran over {SAMPLE_TIMEOUT_S} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--current", type=Path, required=True)
    parser.add_argument("--max-samples", type=int, default=16)
    parser.add_argument("--skip", type=Path, help="file of keys (op|dtype|index) to skip (crashed before)")
    parser.add_argument("--ops", default="", help="comma-separated OpInfo labels (default: all)")
    args = parser.parse_args()

    import torch
    import torch_xla
    import torch_xla.debug.metrics as met
    from torch.testing._internal.common_methods_invocations import op_db

    done: set[str] = set()
    if args.out.exists():
        for line in args.out.read_text().splitlines():
            rec = json.loads(line)
            done.add(f"{rec['op']}|{rec['dtype']}|{rec['index']}")
    if args.skip and args.skip.exists():
        done |= set(args.skip.read_text().split())
    wanted = set(filter(None, args.ops.split(",")))
    device = torch_xla.device()
    signal.signal(signal.SIGALRM, _alarm)
    to_device = lambda t: t.to(device) if isinstance(t, torch.Tensor) else t  # noqa: E731
    with args.out.open("a") as out:
        for op in op_db:
            label = op_label(op)
            if wanted and label not in wanted:
                continue
            supported = op.supported_dtypes("cpu")
            for dtype_name in DTYPE_NAMES:
                dtype = getattr(torch, dtype_name)
                if dtype not in supported:
                    continue
                if f"{label}|{dtype_name}|*" in done:
                    continue
                args.current.write_text(f"{label}|{dtype_name}|samples")
                torch.manual_seed(0)
                try:
                    samples = list(itertools.islice(op.sample_inputs("cpu", dtype), args.max_samples))
                except Exception as exc:  # OpInfo itself cannot build samples under torch 2.9
                    rec = {"op": label, "dtype": dtype_name, "index": -1, "fallbacks": [], "error": f"samples: {exc!r}"[:300]}
                    out.write(json.dumps(rec) + "\n")
                    continue
                for index, sample in enumerate(samples):
                    key = f"{label}|{dtype_name}|{index}"
                    if key in done:
                        continue
                    args.current.write_text(key)
                    error = None
                    met.clear_all()
                    signal.alarm(SAMPLE_TIMEOUT_S)
                    try:
                        moved = sample.transform(to_device)
                        op(moved.input, *moved.args, **moved.kwargs)
                    except Exception as exc:
                        error = f"{type(exc).__name__}: {exc}"[:300]
                    finally:
                        signal.alarm(0)
                    fallbacks = sorted(set(met.executed_fallback_ops()))
                    rec = {"op": label, "dtype": dtype_name, "index": index, "fallbacks": fallbacks, "error": error}
                    out.write(json.dumps(rec) + "\n")
                    out.flush()
    args.current.write_text("")
    return 0


if __name__ == "__main__":
    sys.exit(main())
