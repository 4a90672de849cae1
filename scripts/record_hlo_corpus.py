"""Record the HLO text torch-xla 2.9 builds for OpInfo samples on the CPU: the corpus of the HLO reader's property test.

Run it with the xla-cpu environment's interpreter (torch 2.9 + torch-xla 2.9), from the repository root:

    ~/.cache/neuronprobe/xla-cpu/venv/bin/python scripts/record_hlo_corpus.py --out tests/data/hlo_corpus.json

OpInfo needs the pure-Python package ``expecttest`` (requirements/dev.txt), which the xla-cpu
environment does not install: put a folder that holds it on PYTHONPATH (the project venv's
site-packages has it; a folder with just a link to that package keeps torch 2.13 out).

For every OpInfo of ``op_db`` and each dtype of ``--dtypes`` the op supports on CPU, the first
``--max-samples`` sample inputs are moved to the XLA device (``PJRT_DEVICE=CPU``, ``XLA_HLO_DEBUG=1``
so the metadata is there as in a real observation), the op is called once, and the HLO module of
its outputs is taken with ``torch_xla._XLAC._get_xla_tensors_hlo`` (nothing is compiled or run).

To keep the fixture small, only lines of a *shape* no earlier sample had are kept: the line with
every name, number and quoted string blanked (``%x.12 = f32[2,3]{1,0} add(...)`` and ``%y.9 =
f32[7]{0} add(...)`` are one shape), with their module's header, computation headers and closing
braces around them, and the environment's own path shortened to ``/venv``. The fixture records the
torch and torch-xla versions, the samples tried and the number of distinct line shapes.

A native crash of torch-xla kills the worker; the script restarts it after the sample that
crashed (named in the fixture). Standalone: it does not import neuronprobe.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

SAMPLE_TIMEOUT_S = 20
_NAME = re.compile(r"%[\w.\-]+")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_NUMBER = re.compile(r"\d+")


def line_shape(line: str) -> str:
    """A line with names, quoted strings and numbers blanked: what the parser has to cope with."""
    return _NUMBER.sub("0", _NAME.sub("%", _STRING.sub('""', line.strip())))


def op_label(op: Any) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def _alarm(signum: int, frame: Any) -> None:
    raise TimeoutError(f"sample ran over {SAMPLE_TIMEOUT_S} s")


def worker(args: argparse.Namespace) -> int:
    """Append one JSON line per sample to --raw: {key, hlo} or {key, error}."""
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    os.environ.setdefault("XLA_HLO_DEBUG", "1")
    import torch
    import torch_xla
    from torch.testing._internal.common_methods_invocations import op_db

    done: set[str] = set()
    if args.raw.exists():
        done = {json.loads(line)["key"] for line in args.raw.read_text().splitlines() if line.strip()}
    device = torch_xla.device()
    signal.signal(signal.SIGALRM, _alarm)
    leaves = lambda out: [t for t in (out if isinstance(out, (tuple, list)) else [out]) if isinstance(t, torch.Tensor)]  # noqa: E731
    with args.raw.open("a") as raw:
        for op in op_db:
            label = op_label(op)
            supported = op.supported_dtypes("cpu")
            for dtype_name in args.dtypes.split(","):
                dtype = getattr(torch, dtype_name)
                if dtype not in supported:
                    continue
                torch.manual_seed(0)
                try:
                    samples = list(itertools.islice(op.sample_inputs("cpu", dtype), args.max_samples))
                except Exception:
                    continue
                for index, sample in enumerate(samples):
                    key = f"{label}|{dtype_name}|{index}"
                    if key in done:
                        continue
                    raw.write(json.dumps({"key": key, "error": "started"}) + "\n")  # a crash leaves this
                    raw.flush()
                    rec: dict[str, Any] = {"key": key}
                    signal.alarm(SAMPLE_TIMEOUT_S)
                    try:
                        moved = sample.transform(lambda t: t.to(device) if isinstance(t, torch.Tensor) else t)
                        out = leaves(op(moved.input, *moved.args, **moved.kwargs))
                        rec["hlo"] = torch_xla._XLAC._get_xla_tensors_hlo(out) if out else ""
                    except Exception as exc:
                        rec["error"] = f"{type(exc).__name__}: {exc}"[:200]
                    finally:
                        signal.alarm(0)
                    raw.write(json.dumps(rec) + "\n")
                    raw.flush()
    return 0


def collect(raw: Path) -> tuple[dict[str, str], list[str], int, set[str]]:
    """The modules that add a line shape, the samples that crashed the worker, samples tried, shapes."""
    records: dict[str, dict[str, Any]] = {}
    for line in raw.read_text().splitlines():
        if line.strip():
            rec = json.loads(line)
            records[rec["key"]] = rec  # the last record of a key wins ("started" is overwritten)
    crashed = sorted(k for k, r in records.items() if r.get("error") == "started")
    shapes: set[str] = set()
    kept: dict[str, str] = {}
    prefix = str(Path(sys.prefix))
    for key, rec in records.items():
        lines = []
        for ln in (rec.get("hlo") or "").replace(prefix, "/venv").splitlines():
            shape = line_shape(ln)
            structure = ln.startswith("HloModule") or ln.strip() == "}" or ln.rstrip().endswith("{")
            if structure or (ln.strip() and shape not in shapes):
                lines.append(ln)
                shapes.add(shape)
        if any(not (ln.startswith("HloModule") or ln.strip() == "}" or ln.rstrip().endswith("{")) for ln in lines):
            kept[key] = "\n".join(lines) + "\n"
    return kept, crashed, len(records), shapes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--raw", type=Path, default=Path("/tmp/hlo_corpus_raw.jsonl"))
    parser.add_argument("--max-samples", type=int, default=2)
    parser.add_argument("--dtypes", default="float32,int64,float64,complex64,int16,bool")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--collect-only", action="store_true", help="rebuild --out from an existing --raw")
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    try:
        import expecttest  # noqa: F401
    except ImportError:
        sys.exit("OpInfo needs expecttest: put a folder holding it on PYTHONPATH (see the module docstring)")
    for _ in range(0 if args.collect_only else 50):  # a native crash ends the worker: go on after the sample that killed it
        before = len(args.raw.read_text().splitlines()) if args.raw.exists() else 0
        cmd = [sys.executable, __file__, "--worker", "--out", str(args.out), "--raw", str(args.raw)]
        cmd += ["--max-samples", str(args.max_samples), "--dtypes", args.dtypes]
        if subprocess.run(cmd, check=False).returncode == 0:
            break
        if (len(args.raw.read_text().splitlines()) if args.raw.exists() else 0) == before:
            sys.exit("the worker failed before any sample")
    import torch
    import torch_xla

    kept, crashed, tried, shapes = collect(args.raw)
    doc = {
        "generated_by": "scripts/record_hlo_corpus.py",
        "torch": torch.__version__,
        "torch_xla": torch_xla.__version__,
        "dtypes": args.dtypes.split(","),
        "max_samples": args.max_samples,
        "samples_tried": tried,
        "crashed_samples": crashed,
        "line_shapes": len(shapes),
        "modules": kept,
    }
    args.out.write_text(json.dumps(doc, indent=0, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{tried} samples, {len(kept)} modules kept, {len(shapes)} line shapes -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
