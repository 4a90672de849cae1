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

Samples are matched by OpInfo name + variant (``module:nn.CLASS.train|eval``
for a ModuleInfo), dtype and index; OpInfos or samples only one torch release
has are reported as unmatched, and samples torch-xla itself cannot run (an
exception, a crash) are counted separately.

A disagreement has a direction: ``host_missed`` (torch-xla ran an op on the
CPU, the static side put every op on the device: the report would call a
fallback clean) or ``host_extra``. Every figure of the written tables is
computed by :func:`summarize` from the per-OpInfo counts and the disagreement
rows (``tests/test_opinfo_harness.py`` recomputes them from the committed files);
a disagreement that stays carries its reason (``KNOWN_REASONS``).
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

sys.path.insert(0, str(HERE))
from opinfo_xla_worker import MAX_MODULE_INPUTS, MODULE_PREFIX  # noqa: E402  (a standalone script next to this one)


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


def _lend_test_modules(python: str, work: Path) -> dict[str, str]:
    """``PYTHONPATH`` for the worker when the torch-xla interpreter lacks ``expecttest``.

    ``torch.testing._internal`` (where OpInfo lives) imports it, but ``requirements/xla-cpu.txt``
    does not pin it (the backend never needs it). The dev environment pins it (pure Python,
    torch-independent): the worker gets a folder holding only that package, never this
    interpreter's site-packages (its torch 2.13 would shadow torch 2.9).
    """
    probe = subprocess.run([python, "-c", "import expecttest"], capture_output=True)
    if probe.returncode == 0:
        return {}
    try:
        import expecttest
    except ImportError:
        sys.exit("the torch-xla interpreter lacks expecttest and so does this one: pip install expecttest==0.3.0")
    lent = work / "lent"
    lent.mkdir(parents=True, exist_ok=True)
    link = lent / "expecttest"
    if not link.exists():
        link.symlink_to(Path(expecttest.__file__).parent, target_is_directory=True)
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(lent), os.environ.get("PYTHONPATH", "")]))}


def run_xla_side(work: Path, max_samples: int, ops: str = "") -> Path:
    """Run the worker until every sample has a record; a crash skips the sample that caused it."""
    work.mkdir(parents=True, exist_ok=True)
    out, current, skip = work / "xla.jsonl", work / "xla.current", work / "xla.crashed"
    python = xla_python()
    env = {**os.environ, "PJRT_DEVICE": "CPU", **_lend_test_modules(python, work)}
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

    from neuronprobe.capture.graph import _to_meta, describe_call, replay_parts

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
        # With oneDNN off, CPU tensors take the kernels every other device takes: an LSTM on float32 CPU
        # tensors would otherwise call mkldnn_rnn_layer, which no XLA device (and no capture) sees.
        with torch.backends.mkldnn.flags(enabled=False), Record():
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
    """Classify every aten call of every sample (same cases, dtype and index as the worker)."""
    from opinfo_xla_worker import cases

    from neuronprobe.support import classify, load_table

    table = load_table()
    out = work / "static.jsonl"
    wanted = set(filter(None, ops.split(",")))
    with out.open("w") as f:
        for label, dtype_name, samples, prepare in cases(max_samples, wanted):
            try:
                built = samples()
            except Exception as exc:
                f.write(json.dumps({"op": label, "dtype": dtype_name, "index": -1, "error": f"samples: {exc!r}"[:300]}) + "\n")
                continue
            for index, sample in enumerate(built):
                if not label.startswith(MODULE_PREFIX) and not _has_tensor(sample):
                    f.write(json.dumps({"op": label, "dtype": dtype_name, "index": index, "no_tensor": True}) + "\n")
                    continue
                try:
                    call = prepare(sample, lambda t: t)
                except Exception as exc:
                    calls, error = [], f"{type(exc).__name__}: {exc}"[:300]
                else:
                    calls, error = _record_calls(call)
                verdicts = []
                for c_call in calls:
                    c = classify(c_call, "trn1", table)
                    if c.rule != "bookkeeping":
                        verdicts.append((c_call.key, c.verdict, c.rule))
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


# The directions a sample can disagree in. HOST_MISSED is the dangerous one: the report says the
# model stays on the device, and torch-xla cuts the graph and runs an op on the CPU.
HOST_MISSED = "host_missed"
HOST_EXTRA = "host_extra"
DIRECTION_WORDS = {
    HOST_MISSED: "torch-xla ran an op on the CPU, the static side put every op on the device",
    HOST_EXTRA: "the static side put an op on the host, torch-xla ran every op on the device",
}
# Disagreements that stay, each with the reason it cannot be fixed in the rules (label -> reason).
# A HOST_MISSED sample whose OpInfo is not here is a rule to fix, not a figure to report.
_VECTOR_NORM_P0 = (
    "over-cautious by choice: on CPU and in a capture, torch.norm(x, p=0) (aten::norm on an XLA tensor, run on the "
    "host) and torch.linalg.vector_norm(x, ord=0) (lowered) are the same linalg_vector_norm call; the rule "
    "norm-p0-via-vector-norm takes the host side, so these direct linalg calls at ord=0 are called a fallback"
)
KNOWN_REASONS: dict[str, str] = {
    "linalg.vector_norm": _VECTOR_NORM_P0,
    "linalg.norm": _VECTOR_NORM_P0,
    "linalg.norm.subgradients_at_zero": _VECTOR_NORM_P0,
    "nn.functional.one_hot": (
        "a harness artefact: torch's one_hot (aten/src/ATen/native/Onehot.cpp) checks the class values with "
        "min()/max() .item() on CPU tensors and skips the check on XLA ones; the harness records on CPU tensors, "
        "neuronprobe's capture does not (F.one_hot(idx, num_classes=4) in a model has no finding)"
    ),
}
NOT_COMPARED = ("xla_error", "xla_crashed", "static_error", "unmatched_static_only", "unmatched_xla_only", "no_tensor_input")


def compare(work: Path) -> dict[str, Any]:
    """Sample by sample: one status per sample; every figure is derived from these rows."""
    xla = _read_jsonl(work / "xla.jsonl")
    static = _read_jsonl(work / "static.jsonl")
    crashed = set((work / "xla.crashed").read_text().split()) if (work / "xla.crashed").exists() else set()
    per_op: dict[str, Counter[str]] = defaultdict(Counter)
    per_dtype: dict[str, Counter[str]] = defaultdict(Counter)  # "op|dtype" -> compared / agree
    disagreements: list[dict[str, Any]] = []
    lowered_fallbacks: list[dict[str, Any]] = []
    for key, srec in sorted(static.items()):
        op, dtype, index = key
        if index < 0:
            per_op[op]["static_no_samples"] += 1
            continue
        if srec.get("no_tensor"):
            per_op[op]["no_tensor_input"] += 1
            continue
        xrec = xla.get(key)
        if xrec is None:
            dead = f"{op}|{dtype}|{index}" in crashed or f"{op}|{dtype}|*" in crashed
            per_op[op]["xla_crashed" if dead else "unmatched_static_only"] += 1
            continue
        if srec["error"]:
            per_op[op]["static_error"] += 1
            continue
        if xrec["error"]:
            per_op[op]["xla_error"] += 1
            continue
        host_calls = [(k, v, r) for k, v, r in srec["calls"] if v in HOST_VERDICTS]
        static_host = bool(host_calls)
        xla_host = bool(xrec["fallbacks"])
        per_op[op]["compared"] += 1
        per_dtype[f"{op}|{dtype}"]["compared"] += 1
        lowered = {_base(k) for k, v, _ in srec["calls"] if v in ("lowered", "decomposed", "compile_error")}
        called_lowered = sorted(f for f in xrec["fallbacks"] if _base(f) in lowered and _base(f) not in {_base(k) for k, _, _ in host_calls})
        if called_lowered:
            lowered_fallbacks.append({"op": op, "dtype": dtype, "index": index, "fallbacks": called_lowered})
        if static_host == xla_host:
            per_op[op]["agree"] += 1
            per_dtype[f"{op}|{dtype}"]["agree"] += 1
            continue
        direction = HOST_MISSED if xla_host else HOST_EXTRA
        per_op[op][direction] += 1
        disagreements.append(
            {
                "op": op,
                "dtype": dtype,
                "index": index,
                "direction": direction,
                "static": [f"{k} {v} ({r})" for k, v, r in host_calls] or ["all on the device"],
                "torch_xla": xrec["fallbacks"] or ["no CPU fallback"],
                "reason": KNOWN_REASONS.get(op, ""),
            }
        )
    for key in xla.keys() - static.keys():
        if key[2] >= 0:
            per_op[key[0]]["unmatched_xla_only"] += 1
    result: dict[str, Any] = {
        "per_op": {op: dict(c) for op, c in sorted(per_op.items())},
        "per_op_dtype": {k: dict(c) for k, c in sorted(per_dtype.items())},
        "disagreements": disagreements,
        "fallbacks_called_lowered": lowered_fallbacks,
    }
    result["summary"] = summarize(result)
    return result


def summarize(result: dict[str, Any]) -> dict[str, Any]:
    """The headline figures, computed from the per-OpInfo counts and the disagreement rows only.

    ``tests/test_opinfo_harness.py`` recomputes them from the committed tables: a figure that
    does not follow from the rows fails it.
    """
    totals: Counter[str] = Counter()
    for counts in result["per_op"].values():
        totals.update(counts)
    rows = result["disagreements"]
    missed = [d for d in rows if d["direction"] == HOST_MISSED]
    compared = totals["compared"]
    return {
        "compared": compared,
        "agree": totals["agree"],
        "agreement_percent": round(100.0 * totals["agree"] / compared, 2) if compared else 0.0,
        "disagreements": len(rows),
        HOST_MISSED: len(missed),
        "host_missed_unexplained": sum(1 for d in missed if not d["reason"]),
        HOST_EXTRA: sum(1 for d in rows if d["direction"] == HOST_EXTRA),
        "fallbacks_called_lowered": len(result["fallbacks_called_lowered"]),
        "module_samples_compared": sum(c.get("compared", 0) for op, c in result["per_op"].items() if op.startswith(MODULE_PREFIX)),
        **{kind: totals[kind] for kind in NOT_COMPARED},
    }


def render_markdown(result: dict[str, Any], seconds: dict[str, float], max_samples: int) -> str:
    """The committed table: the figures (from :func:`summarize`), the per-OpInfo counts, every disagreement."""
    s = result["summary"]
    lines = [
        "# Static classifier vs torch-xla 2.9 on torch's OpInfo and ModuleInfo samples",
        "",
        "Regenerate: `.venv/bin/python benchmarks/opinfo_agreement.py` (torch-xla side in the xla-cpu environment "
        "or `NEURONPROBE_XLA_PYTHON`, `PJRT_DEVICE=CPU`). "
        f"Up to {max_samples} samples per OpInfo and dtype (float32, bfloat16, int32, int64, bool), every sample of "
        "the OpInfos whose arguments decide the verdict (`ALL_SAMPLES` in `opinfo_xla_worker.py`: norm's p, rrelu's "
        f"training, pool dilation...), and up to {MAX_MODULE_INPUTS} float32 inputs per ModuleInfo and mode (`module:` rows, "
        "train and eval where they differ). A sample agrees when torch-xla ran an op on the CPU exactly when the static "
        "classifier put one of the sample's ops on the host (cpu_fallback or dynamic_shape). Every figure below is "
        "computed from the rows of the tables under it.",
        "",
        f"- **agreement: {s['agreement_percent']}%** ({s['agree']} of {s['compared']} compared samples; "
        f"{s['module_samples_compared']} of them ModuleInfo samples)",
        f"- **{DIRECTION_WORDS[HOST_MISSED]}: {s[HOST_MISSED]} samples** ({s['host_missed_unexplained']} without a listed reason)",
        f"- {DIRECTION_WORDS[HOST_EXTRA]}: {s[HOST_EXTRA]} samples",
        f"- op level, whatever the sample's verdict: samples where an op torch-xla ran on the CPU was called lowered, "
        f"decomposed or compile_error by the static side: {s['fallbacks_called_lowered']}",
        f"- not compared: torch-xla raised {s['xla_error']}, torch-xla crashed {s['xla_crashed']}, "
        f"torch 2.13 raised {s['static_error']}, only in torch 2.13's OpInfo {s['unmatched_static_only']}, "
        f"only in torch 2.9's {s['unmatched_xla_only']}, "
        f"factory samples without a tensor input (never on the XLA device) {s['no_tensor_input']}",
        f"- time: torch-xla side {seconds.get('xla', 0):.0f} s, static side {seconds.get('static', 0):.0f} s (a shared 2-core machine)",
        "",
        "## OpInfos with a disagreement or samples not compared",
        "",
        "| OpInfo | compared | agree | missed host | extra host | torch-xla raised | crashed | torch 2.13 raised | unmatched |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for op, pc in result["per_op"].items():
        if pc.get("agree", 0) == pc.get("compared", 0) and set(pc) <= {"agree", "compared", "no_tensor_input"}:
            continue
        unmatched = pc.get("unmatched_static_only", 0) + pc.get("unmatched_xla_only", 0)
        lines.append(
            f"| {op} | {pc.get('compared', 0)} | {pc.get('agree', 0)} | {pc.get(HOST_MISSED, 0)} | {pc.get(HOST_EXTRA, 0)} | "
            f"{pc.get('xla_error', 0)} | {pc.get('xla_crashed', 0)} | {pc.get('static_error', 0)} | {unmatched} |"
        )
    lines += [
        "",
        "## Every disagreement",
        "",
        f"`{HOST_MISSED}`: {DIRECTION_WORDS[HOST_MISSED]} (the dangerous direction); `{HOST_EXTRA}`: {DIRECTION_WORDS[HOST_EXTRA]}.",
        "",
        "| OpInfo | dtype | sample | direction | static (host ops) | torch-xla (CPU fallbacks) | reason it stays |",
        "|---|---|---:|---|---|---|---|",
    ]
    for d in result["disagreements"]:
        lines.append(f"| {d['op']} | {d['dtype']} | {d['index']} | {d['direction']} | {'; '.join(d['static'])} | {', '.join(d['torch_xla'])} | {d['reason']} |")
    lines += ["", "## torch-xla CPU fallbacks the static side called lowered, decomposed or compile_error", ""]
    lines += [f"- {d['op']} {d['dtype']} #{d['index']}: {', '.join(d['fallbacks'])}" for d in result["fallbacks_called_lowered"]] or ["none"]
    return "\n".join(lines) + "\n"


def write_tables(result: dict[str, Any], seconds: dict[str, float], max_samples: int, out_dir: Path = HERE) -> tuple[Path, Path]:
    """Write ``opinfo_agreement.json`` and ``.md`` into ``out_dir`` (the committed ones by default)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    table_json, table_md = out_dir / TABLE_JSON.name, out_dir / TABLE_MD.name
    table_json.write_text(json.dumps({**result, "seconds": seconds, "max_samples": max_samples}, indent=1) + "\n")
    table_md.write_text(render_markdown(result, seconds, max_samples))
    return table_json, table_md


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK, help="folder for the raw per-sample records")
    parser.add_argument("--max-samples", type=int, default=MAX_SAMPLES, help="samples per OpInfo and dtype")
    parser.add_argument("--xla-only", action="store_true", help="only run torch-xla's side")
    parser.add_argument("--static-only", action="store_true", help="only run the static side (after a rule change)")
    parser.add_argument("--compare-only", action="store_true", help="reuse both sides' records in --work")
    parser.add_argument("--ops", default="", help="comma-separated OpInfo labels, module:NAME.train|eval (default: all)")
    parser.add_argument("--tables", type=Path, default=HERE, help="folder for opinfo_agreement.md/.json (default: the committed ones)")
    args = parser.parse_args()
    times_file = args.work / "seconds.json"
    seconds = json.loads(times_file.read_text()) if times_file.exists() else {}
    if not args.compare_only:
        if not args.static_only:
            t = time.perf_counter()
            run_xla_side(args.work, args.max_samples, args.ops)
            seconds["xla"] = seconds.get("xla", 0.0) + time.perf_counter() - t
            times_file.write_text(json.dumps(seconds))
            if args.xla_only:
                return 0
        t = time.perf_counter()
        run_static_side(args.work, args.max_samples, args.ops)
        seconds["static"] = time.perf_counter() - t
        times_file.write_text(json.dumps({**(json.loads(times_file.read_text()) if times_file.exists() else {}), "static": seconds["static"]}))
        if args.static_only:
            print(f"static side: {seconds['static']:.0f} s", file=sys.stderr)
            return 0
    result = compare(args.work)
    _, table_md = write_tables(result, seconds, args.max_samples, args.tables)
    s = result["summary"]
    print(
        f"agreement {s['agreement_percent']}% of {s['compared']} samples; {s['disagreements']} disagreements "
        f"({s[HOST_MISSED]} {HOST_MISSED}, {s[HOST_EXTRA]} {HOST_EXTRA}); table in {table_md}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
