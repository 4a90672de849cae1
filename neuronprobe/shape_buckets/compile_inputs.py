"""Compile times from the user's own measurements, whatever tool wrote them (issue 37.3, 37.4).

``--compile-times FILE`` sniffs one of five formats (first match wins):

1. **a previous neuronprobe run**: a report JSON (``analyze --serving-trace ... --json``, its
   ``serving`` section) or a ``buckets ... --runtime vllm-neuron --json`` plan: the graphs of its
   compile bill that were *measured* (``measured: true``) are reused with their bucket names,
   seconds and host GiB; estimated graphs are never fed back as measurements.
2. **TorchNeuron's** ``torch_neuronx.get_dynamo_metrics()`` saved as JSON (a list of objects, or
   ``{"metrics": [...]}``), e.g. ``json.dump([dataclasses.asdict(m) for m in get_dynamo_metrics()], f)``.
   The fields are ``NeuronCompilationMetrics``' (``torch_neuronx/neuron_dynamo_backend/metrics.py``,
   ``parmoham-aws/test-repo-parmoham@5577a2d8``): ``graph_id``, ``graph_name``
   (``{model_name}_{aot_id}_{graph_type}_{nth}``), ``torch_neuronx_fx_passes_us``,
   ``torch_neuronx_lower_us``, ``torch_neuronx_compile_us`` (microseconds). A graph's seconds
   are the sum of the three phases. The graph name carries no shape: an entry is tied to a vLLM
   Neuron bucket only when it has a ``bucket_name`` key, or its graph or model name contains one
   (``prefill_s1024``); the others are graphs of unknown size.
3. **a** ``neuron_parallel_compile`` **log**: its final summary, the JSON object logged after
   ``||NEURON_PARALLEL_COMPILE||:`` with ``compilation_report`` keyed by HLO path
   (``frameworks/torch/torch-neuronx/api-reference-guide/training/pytorch-neuron-parallel-compile.rst``,
   ``aws-neuron/aws-neuron-sdk@81ce03ae``; each continuation line may carry an ``INFO:`` prefix).
   Per-graph seconds are the entries' ``compile_time`` (newer torch-neuronx; the documented
   example has only ``status`` and ``retry``, and then the log gives no times and is refused).
   Graphs are ``MODULE_<hash>`` files: unknown size. Failed compiles (``status`` false) are left out.
4. **torch-xla's** ``torch_xla.debug.metrics.metrics_report()`` text: ``Metric: CompileTime``
   (``TotalSamples``, ``Accumulator``) and the ``UncachedCompile`` / ``CachedCompile`` counters
   (recorded with torch-xla 2.9 on CPU, tests/data/serving/xla_metrics_report.txt). The report
   keeps totals per process, not per graph or shape: it yields one figure, the mean compile
   time of a graph of unknown size, and says so.
5. otherwise a CSV ``graph,seconds[,host_gib]`` (graph as vLLM Neuron's ``bucket_name``).

Graphs of unknown size price every planned graph of a kind that has no sized measurement at
their mean (the bill says so). Host RAM comes only from a CSV or a previous run that carries
``host_gib``; without it the bill states that the host-RAM figure is uncalibrated.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuronprobe.errors import InputError
from neuronprobe.shape_buckets.compile_bill import MAX_COMPILE_SECONDS, MAX_HOST_GIB, UNSIZED, Sample, check_seconds, parse_bucket_name, read_compile_times

MAX_BYTES = 64 * 1024 * 1024
DYNAMO_PHASES = ("torch_neuronx_fx_passes_us", "torch_neuronx_lower_us", "torch_neuronx_compile_us")
_BUCKET_IN_TEXT = re.compile(r"(?:^|[^a-z0-9])((?:prefill_s\d+|decode_b\d+(?:_ctx\d+)?)(?:_spec|_draft)?)(?:$|[^a-z0-9])")
_NPC_START = re.compile(r"\|\|NEURON_PARALLEL_COMPILE\|\|:\s*(\{.*)$")
_NPC_PREFIX = re.compile(r"^\s*INFO:\s?")
_XLA_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|us|ns|d|h|m|s)")
_XLA_UNIT = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


@dataclass
class CompileMeasurements:
    """Samples for the bill and what their source could and could not say."""

    samples: list[Sample]
    format: str  # csv / neuronprobe / dynamo-metrics / neuron-parallel-compile / torch-xla-metrics
    notes: list[str] = field(default_factory=list)
    graphs_compiled: int | None = None  # distinct graphs the measured run compiled, when the source counts them


def _sample(name: str, seconds: float, where: str, max_model_len: int, host_gib: float | None = None) -> Sample:
    check_seconds(seconds, where)
    parsed = parse_bucket_name(name, max_model_len) if name else None
    if parsed is None:
        return Sample(name, UNSIZED, 0, float(seconds), host_gib)
    return Sample(name, parsed[0], parsed[1], float(seconds), host_gib)


def _previous_plan(doc: dict[str, Any], path: Path) -> Any:
    """The serving plan of a previous run, read by the strict typed reader: a report's ``serving`` section or a
    ``buckets --runtime vllm-neuron --json`` plan (versioned; one sentence naming the field for anything else)."""
    from neuronprobe.errors import ReportFormatError
    from neuronprobe.report.model import SCHEMA_VERSION
    from neuronprobe.report.schema.serving import ServingPlan
    from neuronprobe.shape_buckets.documents import SERVING_PLAN_DOCUMENT
    from neuronprobe.typed_json import build_typed

    try:
        if "serving" in doc:  # a report: its serving section is all this reads
            version = doc.get("schema_version")
            if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= SCHEMA_VERSION:
                raise ReportFormatError(f"unsupported report schema_version {version!r} (this neuronprobe reads 1..{SCHEMA_VERSION})")
            plan = build_typed(ServingPlan | None, doc["serving"], "report.serving", strict=True)
        else:
            plan = SERVING_PLAN_DOCUMENT.from_dict(doc)
    except ReportFormatError as exc:
        raise InputError(f"{path}: {exc}") from None
    if plan is None:
        raise InputError(f"{path}: a neuronprobe JSON without a serving compile bill (run with --serving-trace or --runtime vllm-neuron)")
    return plan


def _from_previous_run(doc: dict[str, Any], path: Path, max_model_len: int) -> CompileMeasurements:
    plan = _previous_plan(doc, path)
    out: list[Sample] = []
    for i, g in enumerate(plan.compile_bill.graphs):
        if not g.measured:
            continue
        if g.seconds is None:
            raise InputError(f"{path}: compile_bill.graphs[{i}] has no name or seconds")
        gib = g.host_gib
        if gib is not None and not (math.isfinite(gib) and 0 <= gib <= MAX_HOST_GIB):
            raise InputError(f"{path}: compile_bill.graphs[{i}].host_gib {gib!r} is not a number of GiB")
        s = _sample(g.name, float(g.seconds), f"{path}: compile_bill.graphs[{i}]", max_model_len, gib)
        if s.kind == UNSIZED:
            raise InputError(f"{path}: compile_bill.graphs[{i}] {g.name[:60]!r} is not a vLLM Neuron bucket name")
        out.append(s)
    if not out:
        raise InputError(f"{path}: the previous run's compile bill has no measured graph (it was uncalibrated): nothing to reuse")
    return CompileMeasurements(out, "neuronprobe", [f"{len(out)} measured graph(s) reused from the previous neuronprobe run {path.name}"])


def _from_dynamo(entries: list[Any], path: Path, max_model_len: int) -> CompileMeasurements:
    out: list[Sample] = []
    for i, e in enumerate(entries):
        if not isinstance(e, dict):
            raise InputError(f"{path}: entry {i} is not an object of NeuronCompilationMetrics fields")
        us = []
        for k in DYNAMO_PHASES:
            v = e.get(k, 0)
            if isinstance(v, bool) or not isinstance(v, int | float) or not (math.isfinite(v) and 0 <= v <= MAX_COMPILE_SECONDS * 1e6):
                raise InputError(f"{path}: entry {i} {k} {v!r} is not a number of microseconds")
            us.append(float(v))
        if us[2] == 0:
            continue  # compile_us is filled lazily: 0 means the NEFF compile was not timed (a cache hit or not synchronised)
        given = e.get("bucket_name")
        name: str = given if isinstance(given, str) else ""
        if name and parse_bucket_name(name, max_model_len) is None:
            raise InputError(f"{path}: entry {i} bucket_name {name[:60]!r} is not a vLLM Neuron bucket name (prefill_s<N>, decode_b<B>[_ctx<C>])")
        if not name:
            for text in (e.get("graph_name"), e.get("model_name")):
                m = _BUCKET_IN_TEXT.search(text) if isinstance(text, str) else None
                if m is not None:
                    name = m.group(1)
                    break
        s = _sample(name, sum(us) / 1e6, f"{path}: entry {i}", max_model_len)
        out.append(s if s.kind != UNSIZED else Sample(str(e.get("graph_name") or e.get("graph_id") or f"graph {i}")[:80], UNSIZED, 0, s.seconds))
    if not out:
        raise InputError(f"{path}: no entry with torch_neuronx_compile_us > 0 (call get_dynamo_metrics() after the compiles, on a cold cache)")
    unsized = sum(1 for s in out if s.kind == UNSIZED)
    notes = [f"{len(out)} graph(s) from torch_neuronx.get_dynamo_metrics() (fx passes + lowering + NEFF compile)"]
    if unsized:
        notes.append(f"{unsized} of them name no vLLM Neuron bucket (graph_name carries no shape): graphs of unknown size")
    return CompileMeasurements(out, "dynamo-metrics", notes)


def _from_npc_log(text: str, path: Path) -> CompileMeasurements | None:
    lines = text.splitlines()
    for start, line in enumerate(lines):
        m = _NPC_START.search(line)
        if m is None:
            continue
        buf = [m.group(1)]
        depth = m.group(1).count("{") - m.group(1).count("}")
        j = start
        while depth > 0 and j + 1 < len(lines):
            j += 1
            part = _NPC_PREFIX.sub("", lines[j])
            buf.append(part)
            depth += part.count("{") - part.count("}")
        try:
            doc = json.loads("\n".join(buf))
        except json.JSONDecodeError:
            continue
        report = doc.get("compilation_report") if isinstance(doc, dict) else None
        if not isinstance(report, dict):
            continue
        out: list[Sample] = []
        failed = untimed = 0
        for hlo, entry in report.items():
            if not isinstance(entry, dict) or entry.get("status") is not True:
                failed += 1
                continue
            sec = entry.get("compile_time")
            if isinstance(sec, bool) or not isinstance(sec, int | float):
                untimed += 1
                continue
            check_seconds(float(sec), f"{path} line {start + 1}: {Path(str(hlo)).parent.name[:60]}")
            out.append(Sample(Path(str(hlo)).parent.name[:80] or str(hlo)[:80], UNSIZED, 0, float(sec)))
        if not out:
            raise InputError(
                f"{path}: the neuron_parallel_compile summary (line {start + 1}) has no per-graph compile_time "
                f"({untimed} graph(s) untimed, {failed} failed); use a torch-neuronx that logs compile_time, or a CSV graph,seconds"
            )
        notes = [f"{len(out)} graph(s) timed by neuron_parallel_compile (MODULE_<hash> graphs: unknown size)"]
        if failed:
            notes.append(f"{failed} failed compile(s) in the log left out")
        if untimed:
            notes.append(f"{untimed} graph(s) in the log have no compile_time")
        return CompileMeasurements(out, "neuron-parallel-compile", notes)
    return None


def xla_duration_seconds(text: str) -> float:
    """torch-xla's human-readable duration (``01s458ms736.973us``) in seconds."""
    parts = _XLA_DURATION.findall(text)
    if not parts or "".join(a + b for a, b in parts) != text.strip():
        raise ValueError(text)
    return sum(float(v) * _XLA_UNIT[u] for v, u in parts)


@dataclass
class XlaCompileStats:
    """What torch-xla's metrics report says about compiles: totals per process, no shapes."""

    compiles: int  # CompileTime TotalSamples
    total_seconds: float  # CompileTime Accumulator
    uncached: int | None
    cached: int | None
    percentiles: dict[str, float]


def parse_xla_metrics_report(text: str, source: str) -> XlaCompileStats | None:
    """The compile figures of a ``metrics_report()`` text; None when it holds no ``Metric: CompileTime``."""
    lines = text.splitlines()
    stats: dict[str, Any] = {}
    counters: dict[str, int] = {}
    for i, line in enumerate(lines):
        if line.startswith("Counter: ") and i + 1 < len(lines) and lines[i + 1].strip().startswith("Value:"):
            try:
                counters[line[len("Counter: ") :].strip()] = int(lines[i + 1].split(":", 1)[1].strip())
            except ValueError:
                raise InputError(f"{source} line {i + 2}: counter value is not a whole number") from None
        if line.strip() != "Metric: CompileTime":
            continue
        for j in range(i + 1, min(i + 7, len(lines))):
            key, _, value = lines[j].strip().partition(":")
            try:
                if key == "TotalSamples":
                    stats["n"] = int(value.strip())
                elif key == "Accumulator":
                    stats["acc"] = xla_duration_seconds(value.strip())
                elif key == "Percentiles":
                    stats["pct"] = {p.split("=")[0].strip(): xla_duration_seconds(p.split("=")[1].strip()) for p in value.split(";") if "=" in p}
            except (ValueError, IndexError):
                raise InputError(f"{source} line {j + 1}: CompileTime {key} {value.strip()[:40]!r} is not a torch-xla duration") from None
    if "n" not in stats:
        return None
    if "acc" not in stats:
        raise InputError(f"{source}: Metric: CompileTime has no Accumulator line")
    return XlaCompileStats(stats["n"], stats["acc"], counters.get("UncachedCompile"), counters.get("CachedCompile"), stats.get("pct", {}))


def xla_resolution_words(st: XlaCompileStats) -> str:
    """The resolution a torch-xla metrics report allows, in words (the report repeats it)."""
    p50 = st.percentiles.get("50%")
    return (
        f"torch-xla metrics report: {st.compiles} compile(s) in {st.total_seconds:.3g} s"
        + ("" if st.uncached is None else f", UncachedCompile {st.uncached}")
        + ("" if st.cached is None else f", CachedCompile {st.cached}")
        + ("" if p50 is None else f", median {p50:.3g} s")
        + "; resolution: process totals only (no graph names, no shapes, no per-shape counts), so it gives the mean compile time "
        "of a graph of unknown size and a count of distinct graphs compiled, not a traffic distribution"
    )


def _from_xla(st: XlaCompileStats, path: Path) -> CompileMeasurements:
    if st.compiles < 1 or st.total_seconds <= 0:
        raise InputError(f"{path}: the torch-xla metrics report has no timed compile (CompileTime TotalSamples {st.compiles})")
    mean = st.total_seconds / st.compiles
    check_seconds(mean, str(path))
    graphs = st.uncached if st.uncached is not None else st.compiles
    return CompileMeasurements([Sample("torch-xla CompileTime mean", UNSIZED, 0, mean)], "torch-xla-metrics", [xla_resolution_words(st)], graphs)


def read_compile_measurements(path: Path, max_model_len: int) -> CompileMeasurements:
    """Sniff and read ``--compile-times FILE`` (module docstring); InputError with one sentence for anything unusable."""
    from neuronprobe.files import read_input_text

    # The project's one bounded reader: regular files only (a FIFO or a device is one sentence, never a hang).
    text = read_input_text(path, "compile-times", cap=MAX_BYTES)
    head = text.lstrip()[:1]
    if head in ("[", "{"):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path} line {exc.lineno}: not valid JSON") from None
        if isinstance(doc, dict) and ("serving" in doc or "compile_bill" in doc):
            return _from_previous_run(doc, path, max_model_len)
        entries = doc.get("metrics") if isinstance(doc, dict) else doc
        if isinstance(entries, list) and entries and all(isinstance(e, dict) and "torch_neuronx_compile_us" in e for e in entries):
            return _from_dynamo(entries, path, max_model_len)
        raise InputError(f"{path}: JSON that is neither a neuronprobe report/plan with a serving compile bill nor a list of get_dynamo_metrics() entries")
    if "||NEURON_PARALLEL_COMPILE||" in text:
        got = _from_npc_log(text, path)
        if got is None:
            raise InputError(f"{path}: a neuron_parallel_compile log without its final compilation_report summary (did the run finish?)")
        return got
    xla = parse_xla_metrics_report(text, str(path))
    if xla is not None:
        return _from_xla(xla, path)
    return CompileMeasurements(read_compile_times(path, max_model_len), "csv")
