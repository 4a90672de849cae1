"""Agreement of the static classifier with torch-xla 2.9 on torch's OpInfo samples (issue 11).

One command regenerates the committed table::

    .venv/bin/python benchmarks/opinfo_agreement.py

1. torch-xla's side runs ``opinfo_xla_worker.py`` in the torch-xla 2.9 interpreter
   (``NEURONPROBE_XLA_PYTHON``, else the environment ``neuronprobe setup xla-cpu``
   creates): per sample, the ops torch-xla sent to the CPU. A worker that dies is
   restarted after the sample that killed it, which is counted as ``crashed``.
2. The static side runs here (torch 2.13): the same OpInfo, dtype and sample
   index, dispatched on CPU under a recording ``TorchDispatchMode``; every aten op
   the sample dispatches is classified by :func:`neuronprobe.support.classify`.
3. A sample agrees when both sides say the same thing about the host: torch-xla
   ran an op on the CPU (``executed_fallback_ops`` not empty) exactly when the
   static classifier put an op of the sample on the host (``cpu_fallback`` or
   ``dynamic_shape``). ``compile_error`` is a Neuron compiler rejection of an op
   torch-xla lowers, so it counts as "on the device" here.

Samples are matched by OpInfo name + variant, dtype and index; OpInfos or
samples only one torch release has are reported as unmatched, and samples
torch-xla itself cannot run (an exception, a crash) are counted separately.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
WORKER = HERE / "opinfo_xla_worker.py"
DEFAULT_WORK = HERE.parent / "reports" / "opinfo"
TABLE_MD = HERE / "opinfo_agreement.md"
TABLE_JSON = HERE / "opinfo_agreement.json"
MAX_SAMPLES = 16
MAX_RESTARTS = 200  # worker restarts after native crashes
HOST_VERDICTS = ("cpu_fallback", "dynamic_shape")


def xla_python() -> str:
    """The torch-xla 2.9 interpreter: NEURONPROBE_XLA_PYTHON, else the one ``neuronprobe setup xla-cpu`` made."""
    explicit = os.environ.get("NEURONPROBE_XLA_PYTHON", "").strip()
    if explicit:
        return explicit
    try:
        from neuronprobe.backends.xla_env import find_env  # the xla-cpu backend's own lookup
    except ImportError:
        cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        managed = Path(cache) / "neuronprobe" / "xla-cpu" / "bin" / "python"
        if managed.exists():
            return str(managed)
        sys.exit("no torch-xla interpreter: run `neuronprobe setup xla-cpu` or set NEURONPROBE_XLA_PYTHON")
    env = find_env()
    if not env.usable:
        sys.exit(f"no usable torch-xla interpreter: {env.summary()} (run `neuronprobe setup xla-cpu`)")
    return str(env.python)


def run_xla_side(work: Path, max_samples: int, ops: str = "") -> Path:
    """Run the worker until every sample has a record; a crash skips the sample that caused it."""
    work.mkdir(parents=True, exist_ok=True)
    out, current, skip = work / "xla.jsonl", work / "xla.current", work / "xla.crashed"
    python = xla_python()
    env = {**os.environ, "PJRT_DEVICE": "CPU"}
    for _ in range(MAX_RESTARTS):
        cmd = [python, str(WORKER), "--out", str(out), "--current", str(current), "--skip", str(skip)]
        cmd += ["--max-samples", str(max_samples), "--ops", ops]
        proc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if proc.returncode == 0:
            return out
        crashed = current.read_text().strip() if current.exists() else ""
        if not crashed:
            sys.exit(f"torch-xla worker failed before any sample: {proc.stderr[-2000:]}")
        seen = skip.read_text().split() if skip.exists() else []
        op_dtype = crashed.rsplit("|", 1)[0]
        # A second crash in the same OpInfo and dtype skips the rest of it: each restart costs seconds.
        if crashed in seen or crashed.endswith("|samples") or any(k.startswith(op_dtype + "|") for k in seen):
            crashed = op_dtype + "|*"
        with skip.open("a") as f:
            f.write(crashed + "\n")
    sys.exit(f"torch-xla worker crashed more than {MAX_RESTARTS} times")


# --- the static side (this interpreter, torch 2.13) ------------------------------------


_PARTS: dict[str, Any] = {}  # composite op -> the ops it calls, as the capture path caches them


def _has_tensor(sample: Any) -> bool:
    """Whether a sample passes any tensor: factory samples (``device='cpu'``) never reach the XLA device."""
    import torch

    values = [sample.input, *sample.args, *sample.kwargs.values()]
    flat: list[Any] = []
    while values:
        v = values.pop()
        if isinstance(v, (list, tuple)):
            values.extend(v)
        else:
            flat.append(v)
    return any(isinstance(v, torch.Tensor) for v in flat)


def _record_calls(fn: Any) -> tuple[list[Any], str | None]:
    """Run ``fn`` on CPU under a recording dispatch mode: the aten calls it makes, as OpCalls with arguments."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from neuronprobe.capture import _to_meta, describe_call, replay_parts

    calls: list[Any] = []
    keys: list[str] = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            if isinstance(func, torch._ops.OpOverload):
                call = describe_call(func, args, kwargs, out, len(calls))
                replay_key = f"{call.op}|{call.constants}|{[str(m) for m in call.inputs]}"
                if (call.has_composite_implicit or call.has_composite_explicit) and replay_key not in _PARTS:
                    try:
                        pending[replay_key] = (func, [_to_meta(a) for a in args], {k: _to_meta(v) for k, v in kwargs.items()})
                    except Exception:
                        _PARTS[replay_key] = None
                keys.append(replay_key)
                calls.append(call)
            return out

    pending: dict[str, Any] = {}
    error = None
    try:
        with Record():
            fn()
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"[:300]
    # Replayed outside the recording mode (a mode pushed inside a dispatch handler sees nothing).
    for replay_key, (func, meta_args, meta_kwargs) in pending.items():
        if replay_key not in _PARTS:
            explicit = not torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), "CompositeImplicitAutograd")
            _PARTS[replay_key] = replay_parts(func, meta_args, meta_kwargs, explicit)
    for call, replay_key in zip(calls, keys, strict=False):
        if call.has_composite_implicit or call.has_composite_explicit:
            call.parts = _PARTS.get(replay_key)
    return calls, error


def run_static_side(work: Path, max_samples: int, ops: str = "") -> Path:
    """Classify every aten call of every sample (same OpInfo, dtype and index as the worker)."""
    import itertools

    import torch
    from torch.testing._internal.common_methods_invocations import op_db

    sys.path.insert(0, str(HERE))
    from opinfo_xla_worker import DTYPE_NAMES, op_label

    from neuronprobe.support import classify, load_table

    table = load_table()
    out = work / "static.jsonl"
    wanted = set(filter(None, ops.split(",")))
    with out.open("w") as f:
        for op in op_db:
            label = op_label(op)
            if wanted and label not in wanted:
                continue
            supported = op.supported_dtypes("cpu")
            for dtype_name in DTYPE_NAMES:
                dtype = getattr(torch, dtype_name)
                if dtype not in supported:
                    continue
                torch.manual_seed(0)
                try:
                    samples = list(itertools.islice(op.sample_inputs("cpu", dtype), max_samples))
                except Exception as exc:
                    f.write(json.dumps({"op": label, "dtype": dtype_name, "index": -1, "error": f"samples: {exc!r}"[:300]}) + "\n")
                    continue
                for index, sample in enumerate(samples):
                    if not _has_tensor(sample):
                        f.write(json.dumps({"op": label, "dtype": dtype_name, "index": index, "no_tensor": True}) + "\n")
                        continue
                    calls, error = _record_calls(lambda op=op, sample=sample: op(sample.input, *sample.args, **sample.kwargs))
                    verdicts = []
                    for call in calls:
                        c = classify(call, "trn1", table)
                        if c.rule != "bookkeeping":
                            verdicts.append((call.key, c.verdict, c.rule))
                    rec = {"op": label, "dtype": dtype_name, "index": index, "calls": verdicts, "error": error}
                    f.write(json.dumps(rec) + "\n")
    return out


# --- comparison -----------------------------------------------------------------------


def _read_jsonl(path: Path) -> dict[tuple[str, str, int], dict[str, Any]]:
    out = {}
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        out[(rec["op"], rec["dtype"], rec["index"])] = rec
    return out


def _base(op_key: str) -> str:
    return op_key.removeprefix("aten::").split(".")[0]


def compare(work: Path) -> dict[str, Any]:
    """Sample by sample: agreement, disagreements, and the samples that cannot be compared."""
    xla = _read_jsonl(work / "xla.jsonl")
    static = _read_jsonl(work / "static.jsonl")
    crashed = set((work / "xla.crashed").read_text().split()) if (work / "xla.crashed").exists() else set()
    counts: Counter[str] = Counter()
    per_op: dict[str, Counter[str]] = defaultdict(Counter)
    per_dtype: dict[str, Counter[str]] = defaultdict(Counter)  # "op|dtype" -> compared / agree
    disagreements: list[dict[str, Any]] = []
    lowered_fallbacks: list[dict[str, Any]] = []
    for key, srec in sorted(static.items()):
        op, dtype, index = key
        if index < 0:
            counts["static_no_samples"] += 1
            continue
        if srec.get("no_tensor"):
            counts["no_tensor_input"] += 1
            per_op[op]["no_tensor_input"] += 1
            continue
        xrec = xla.get(key)
        if xrec is None:
            dead = f"{op}|{dtype}|{index}" in crashed or f"{op}|{dtype}|*" in crashed
            kind = "xla_crashed" if dead else "unmatched_static_only"
            counts[kind] += 1
            per_op[op][kind] += 1
            continue
        if srec["error"]:
            counts["static_error"] += 1
            per_op[op]["static_error"] += 1
            continue
        if xrec["error"]:
            counts["xla_error"] += 1
            per_op[op]["xla_error"] += 1
            continue
        host_calls = [(k, v, r) for k, v, r in srec["calls"] if v in HOST_VERDICTS]
        static_host = bool(host_calls)
        xla_host = bool(xrec["fallbacks"])
        counts["compared"] += 1
        per_op[op]["compared"] += 1
        per_dtype[f"{op}|{dtype}"]["compared"] += 1
        lowered = {_base(k) for k, v, _ in srec["calls"] if v in ("lowered", "decomposed", "compile_error")}
        called_lowered = sorted(f for f in xrec["fallbacks"] if _base(f) in lowered and _base(f) not in {_base(k) for k, _, _ in host_calls})
        if called_lowered:
            lowered_fallbacks.append({"op": op, "dtype": dtype, "index": index, "fallbacks": called_lowered})
        if static_host == xla_host:
            counts["agree"] += 1
            per_op[op]["agree"] += 1
            per_dtype[f"{op}|{dtype}"]["agree"] += 1
        else:
            disagreements.append(
                {
                    "op": op,
                    "dtype": dtype,
                    "index": index,
                    "static": [f"{k} {v} ({r})" for k, v, r in host_calls] or ["all on the device"],
                    "torch_xla": xrec["fallbacks"] or ["no CPU fallback"],
                }
            )
    for key in xla.keys() - static.keys():
        if key[2] >= 0:
            counts["unmatched_xla_only"] += 1
            per_op[key[0]]["unmatched_xla_only"] += 1
    compared = counts["compared"]
    return {
        "counts": dict(counts),
        "agreement_percent": round(100.0 * counts["agree"] / compared, 2) if compared else 0.0,
        "per_op": {op: dict(c) for op, c in sorted(per_op.items())},
        "per_op_dtype": {k: dict(c) for k, c in sorted(per_dtype.items())},
        "disagreements": disagreements,
        "fallbacks_called_lowered": lowered_fallbacks,
    }


def write_tables(result: dict[str, Any], seconds: dict[str, float], max_samples: int) -> None:
    """The committed table: the figure, the per-op counts where anything differs, every disagreement."""
    TABLE_JSON.write_text(json.dumps({**result, "seconds": seconds, "max_samples": max_samples}, indent=1) + "\n")
    c = result["counts"]
    lines = [
        "# Static classifier vs torch-xla 2.9 on torch's OpInfo samples",
        "",
        "Regenerate: `.venv/bin/python benchmarks/opinfo_agreement.py` (torch-xla side in the xla-cpu environment "
        "or `NEURONPROBE_XLA_PYTHON`, `PJRT_DEVICE=CPU`). "
        f"Up to {max_samples} samples per OpInfo and dtype (float32, bfloat16, int32, int64, bool); "
        "a sample agrees when torch-xla ran an op on the CPU exactly when the static classifier put one of the "
        "sample's ops on the host (cpu_fallback or dynamic_shape).",
        "",
        f"- **agreement: {result['agreement_percent']}%** ({c.get('agree', 0)} of {c.get('compared', 0)} compared samples)",
        f"- samples where an op torch-xla ran on the CPU was put on the device by the static side (lowered, "
        f"decomposed or compile_error): {len(result['fallbacks_called_lowered'])}",
        f"- not compared: torch-xla raised {c.get('xla_error', 0)}, torch-xla crashed {c.get('xla_crashed', 0)}, "
        f"torch 2.13 raised {c.get('static_error', 0)}, only in torch 2.13's OpInfo {c.get('unmatched_static_only', 0)}, "
        f"only in torch 2.9's {c.get('unmatched_xla_only', 0)}, "
        f"factory samples without a tensor input (never on the XLA device) {c.get('no_tensor_input', 0)}",
        f"- time: torch-xla side {seconds.get('xla', 0):.0f} s, static side {seconds.get('static', 0):.0f} s (a shared 2-core machine)",
        "",
        "## OpInfos with a disagreement or samples not compared",
        "",
        "| OpInfo | compared | agree | torch-xla raised | crashed | torch 2.13 raised | unmatched |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for op, pc in result["per_op"].items():
        if pc.get("agree", 0) == pc.get("compared", 0) and set(pc) <= {"agree", "compared", "no_tensor_input"}:
            continue
        unmatched = pc.get("unmatched_static_only", 0) + pc.get("unmatched_xla_only", 0)
        lines.append(
            f"| {op} | {pc.get('compared', 0)} | {pc.get('agree', 0)} | {pc.get('xla_error', 0)} | "
            f"{pc.get('xla_crashed', 0)} | {pc.get('static_error', 0)} | {unmatched} |"
        )
    lines += ["", "## Every disagreement", "", "| OpInfo | dtype | sample | static (host ops) | torch-xla (CPU fallbacks) |", "|---|---|---:|---|---|"]
    for d in result["disagreements"]:
        lines.append(f"| {d['op']} | {d['dtype']} | {d['index']} | {'; '.join(d['static'])} | {', '.join(d['torch_xla'])} |")
    if result["fallbacks_called_lowered"]:
        lines += ["", "## torch-xla CPU fallbacks the static side put on the device", ""]
        lines += [f"- {d['op']} {d['dtype']} #{d['index']}: {', '.join(d['fallbacks'])}" for d in result["fallbacks_called_lowered"]]
    TABLE_MD.write_text("\n".join(lines) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK, help="folder for the raw per-sample records")
    parser.add_argument("--max-samples", type=int, default=MAX_SAMPLES, help="samples per OpInfo and dtype")
    parser.add_argument("--xla-only", action="store_true", help="only run torch-xla's side")
    parser.add_argument("--compare-only", action="store_true", help="reuse both sides' records in --work")
    parser.add_argument("--ops", default="", help="comma-separated OpInfo labels (default: all)")
    args = parser.parse_args()
    times_file = args.work / "seconds.json"
    seconds = json.loads(times_file.read_text()) if times_file.exists() else {}
    if not args.compare_only:
        t = time.perf_counter()
        run_xla_side(args.work, args.max_samples, args.ops)
        seconds["xla"] = seconds.get("xla", 0.0) + time.perf_counter() - t
        times_file.write_text(json.dumps(seconds))
        if args.xla_only:
            return 0
        t = time.perf_counter()
        run_static_side(args.work, args.max_samples, args.ops)
        seconds["static"] = time.perf_counter() - t
        times_file.write_text(json.dumps(seconds))
    result = compare(args.work)
    write_tables(result, seconds, args.max_samples)
    c = result["counts"]
    print(
        f"agreement {result['agreement_percent']}% of {c.get('compared', 0)} samples; {len(result['disagreements'])} disagreements; table in {TABLE_MD}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
