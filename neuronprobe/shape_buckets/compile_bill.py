"""The compile bill of a vLLM Neuron ladder: graphs, wall time on the node's workers, host RAM (issue 37.3).

No constant stands in for a compile time. Per-graph seconds (and host GiB when given) come from
the user's own measurements:

- a scrape of vLLM Neuron's ``/metrics``: ``vllm_neuron:compilation_time_seconds{bucket_name=...}``
  (a gauge per bucket; "Includes compile cache hits", ``design/vllm/metrics.md``: scrape a cold
  start on an empty cache, or the figures are cache loads);
- a CSV ``graph,seconds[,host_gib]`` with one row per compiled graph named like vLLM Neuron's
  ``bucket_name`` (``prefill_s1024``, ``decode_b8``, ``decode_b8_ctx4096``), e.g. written from a
  ``neuron_parallel_compile`` log or a previous run.

Seconds are fitted per graph kind as ``a + b x size`` (least squares; size = prefill tokens, or
batch x context for decode; a constant with one distinct size), so a planned graph of another
size is priced from the user's own graphs. Without measurements the bill counts graphs and says
it is uncalibrated and how to calibrate.

Wall time: vLLM Neuron compiles each unique graph once per node, several at once
(``NEURON_LIBTORCH_PARALLEL_COMPILE_WORKERS``, default 8, ``design/compilation/cpu_compilation.md``;
one compile per graph under a file lock, ``compilation_cache.md``). The order the workers take
graphs in is not documented; the bill uses longest-first list scheduling (an assumption), and the
host RAM is the largest sum over graphs compiling at the same time.
"""

from __future__ import annotations

import heapq
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from neuronprobe.errors import InputError
from neuronprobe.report.schema.serving import CompileBill, GraphCost

DEFAULT_COMPILE_WORKERS = 8  # cpu_compilation.md "Parallel Compilation Workers"
BUCKET_NAME = re.compile(r"^(?:prefill_s(?P<s>\d+)|decode_b(?P<b>\d+)(?:_ctx(?P<c>\d+))?)(?P<fam>_spec|_draft)?$")
HOW_TO_CALIBRATE = (
    "uncalibrated: no compile times were measured. Calibrate with a /metrics scrape taken after a cold start "
    "(curl -s localhost:8000/metrics > scrape.txt; --metrics scrape.txt reads vllm_neuron:compilation_time_seconds) "
    "or --compile-times FILE: a CSV graph,seconds[,host_gib] (graph as vLLM Neuron's bucket_name, e.g. prefill_s1024), "
    "torch_neuronx.get_dynamo_metrics() saved as JSON, a neuron_parallel_compile log, a torch-xla metrics_report() text, "
    "or a previous neuronprobe --json run"
)
MAX_COMPILE_SECONDS = 7 * 24 * 3600.0
UNSIZED = "graph"  # a measured graph whose bucket (size) is unknown: get_dynamo_metrics, neuron_parallel_compile, torch-xla
HOST_UNCALIBRATED = (
    "host RAM per parallel compile: uncalibrated (none of the measurements carries it); "
    "record the peak RSS of one compile (e.g. /usr/bin/time -v) per graph into a CSV graph,seconds,host_gib"
)
MAX_HOST_GIB = 1 << 20
MAX_COMPILE_ROWS = 100_000  # compiled graphs in one --compile-times file (a deployment has tens)
MAX_GRAPH_SIZE = 2**24  # each number in a bucket name (limits.MAX_BUCKET_LENGTH)


@dataclass(frozen=True)
class Sample:
    name: str
    kind: str
    size: int
    seconds: float
    host_gib: float | None = None


def parse_bucket_name(name: str, max_model_len: int) -> tuple[str, int] | None:
    """(kind, size) of a vLLM Neuron bucket_name; decode without ``_ctx`` runs at max_model_len."""
    m = BUCKET_NAME.match(name)
    if m is None:
        return None
    if m["s"] is not None:
        return "prefill", int(m["s"])
    ctx = int(m["c"]) if m["c"] is not None else max_model_len
    return "decode", int(m["b"]) * ctx


def check_seconds(value: float, where: str) -> float:
    if not (math.isfinite(value) and 0 <= value <= MAX_COMPILE_SECONDS):
        raise InputError(f"{where}: compile seconds {value!r} is not a number between 0 and {MAX_COMPILE_SECONDS:g}")
    return float(value)


def read_compile_times(path: Path, max_model_len: int) -> list[Sample]:
    """Samples from a CSV ``graph,seconds[,host_gib]``; one sentence naming the line for anything unusable."""
    from neuronprobe.files import read_input_text

    # The bounded reader: regular files only (a FIFO or a device is one sentence, never a hang), 16 MiB at most.
    text = read_input_text(path, "compile-times", cap=16 * 1024 * 1024)
    lines = [ln for ln in text.splitlines()]
    out: list[Sample] = []
    for lineno, raw in enumerate(lines, start=1):
        cells = [c.strip() for c in raw.split(",")]
        if not raw.strip() or (lineno == 1 and cells[0].lower() == "graph"):
            continue
        if len(out) >= MAX_COMPILE_ROWS:
            raise InputError(f"{path} line {lineno}: more than {MAX_COMPILE_ROWS:,} compiled graphs (MAX_COMPILE_ROWS)")
        if len(cells) not in (2, 3):
            raise InputError(f"{path} line {lineno}: expected graph,seconds[,host_gib]")
        sizes = re.findall(r"\d+", cells[0]) if BUCKET_NAME.match(cells[0]) else []
        if any(len(d) > 9 or not 1 <= int(d) <= MAX_GRAPH_SIZE for d in sizes):
            raise InputError(f"{path} line {lineno}: graph {cells[0][:60]!r}: each size in a bucket name must be between 1 and {MAX_GRAPH_SIZE}")
        parsed = parse_bucket_name(cells[0], max_model_len)
        if parsed is None:
            raise InputError(f"{path} line {lineno}: graph {cells[0][:60]!r} is not a vLLM Neuron bucket name (prefill_s<N>, decode_b<B>[_ctx<C>])")
        try:
            sec = float(cells[1])
            gib = float(cells[2]) if len(cells) == 3 and cells[2] else None
        except ValueError:
            raise InputError(f"{path} line {lineno}: seconds and host_gib must be numbers") from None
        check_seconds(sec, f"{path} line {lineno}")
        if gib is not None and not (math.isfinite(gib) and 0 <= gib <= MAX_HOST_GIB):
            raise InputError(f"{path} line {lineno}: host_gib {gib!r} is not a number of GiB between 0 and {MAX_HOST_GIB}")
        out.append(Sample(cells[0], parsed[0], parsed[1], sec, gib))
    if not out:
        raise InputError(f"{path}: no compile times found (expected rows graph,seconds[,host_gib])")
    return out


def _fit(samples: list[Sample], attr: str) -> tuple[float, float] | None:
    xs = np.array([s.size for s in samples], dtype=np.float64)
    ys = np.array([getattr(s, attr) for s in samples], dtype=np.float64)
    if ys.size == 0:
        return None
    if np.unique(xs).size < 2:
        return float(ys.mean()), 0.0
    b, a = np.polyfit(xs, ys, 1)
    if b < 0:  # a compile never gets cheaper with a larger graph: fall back to the mean
        return float(ys.mean()), 0.0
    return float(a), float(b)


def fit_error_words(kind: str, fit: tuple[float, float], samples: list[Sample]) -> str | None:
    """The fit and its worst residual on the measurements it came from, in words; None where a line meets every
    point by construction (fewer than three distinct sizes), so the user can judge a price read off the fit."""
    if len({s.size for s in samples}) < 3:
        return None
    a, b = fit
    worst = max(samples, key=lambda s: abs(s.seconds - (a + b * s.size)))
    residual = abs(worst.seconds - (a + b * worst.size))
    share = f"{100 * residual / worst.seconds:.1f}% of that graph's time" if worst.seconds > 0 else "a graph measured at 0 s"
    unit = "tokens" if kind == "prefill" else "batch x context"
    return f"{kind} fit {a:.1f} s + {b:.3g} s x {unit} over {len(samples)} measured graphs: worst residual {residual:.1f} s ({share})"


def compile_bill(graphs: list[tuple[str, str, int]], samples: list[Sample], workers: int, host_memory_gib: float | None, source: str) -> CompileBill:
    """The bill of ``graphs`` ((bucket_name, kind, size)) priced from ``samples``; uncalibrated without any."""
    if workers < 1:
        raise InputError(f"--compile-workers {workers}: use a whole number >= 1")
    bill = CompileBill(workers=workers, source=source, host_memory_gib=host_memory_gib)
    if not samples:
        bill.how_to_calibrate = HOW_TO_CALIBRATE
        bill.graphs = [GraphCost(n, k, s) for n, k, s in graphs]
        return bill
    measured = {s.name: s for s in samples}
    fits: dict[str, tuple[float, float] | None] = {}
    host_fits: dict[str, tuple[float, float] | None] = {}
    for kind in ("prefill", "decode"):
        mine = [s for s in samples if s.kind == kind]
        fits[kind] = _fit(mine, "seconds")
        if fits[kind] is not None:
            f = fits[kind]
            assert f is not None
            bill.fits[kind] = [round(f[0], 6), round(f[1], 9), float(len(mine))]
            error = fit_error_words(kind, f, mine)
            if error:
                bill.notes.append(error)
        with_host = [s for s in mine if s.host_gib is not None]
        host_fits[kind] = _fit(with_host, "host_gib") if with_host else None
    unsized = [s for s in samples if s.kind == UNSIZED]
    unsized_fit = _fit(unsized, "seconds") if unsized else None
    unsized_host = [s for s in unsized if s.host_gib is not None]
    unsized_host_fit = _fit(unsized_host, "host_gib") if unsized_host else None
    if unsized_fit is not None:
        bill.fits[UNSIZED] = [round(unsized_fit[0], 6), 0.0, float(len(unsized))]
        borrowed = sorted({k for _, k, _ in graphs if fits.get(k) is None})
        for k in borrowed:
            fits[k] = unsized_fit
            host_fits[k] = host_fits.get(k) or unsized_host_fit
        if borrowed:
            bill.notes.append(
                f"{' and '.join(borrowed)} graphs priced at the mean of {len(unsized)} measured graph(s) of unknown size "
                f"({unsized_fit[0]:.1f} s): the measurements name no bucket, so no fit by graph size"
            )
    missing = sorted({k for _, k, _ in graphs if fits.get(k) is None})
    costs: list[GraphCost] = []
    for name, kind, size in graphs:
        own = measured.get(name)
        f = fits.get(kind)
        sec = own.seconds if own is not None else (max(0.0, f[0] + f[1] * size) if f is not None else None)
        hf = host_fits.get(kind)
        gib = own.host_gib if own is not None and own.host_gib is not None else (max(0.0, hf[0] + hf[1] * size) if hf is not None else None)
        costs.append(GraphCost(name, kind, size, None if sec is None else round(sec, 3), None if gib is None else round(gib, 3), own is not None))
    bill.graphs = costs
    if missing:
        bill.how_to_calibrate = f"partly uncalibrated: no {' or '.join(missing)} graph was measured; " + HOW_TO_CALIBRATE.split(". ", 1)[1]
        return bill
    bill.calibrated = True
    sizes = {k: [s.size for s in samples if s.kind == k] for k in ("prefill", "decode")}
    if any(g.host_gib is None for g in costs):
        bill.notes.append(HOST_UNCALIBRATED)
    beyond = [g.name for g in costs if not g.measured and sizes[g.kind] and g.size > max(sizes[g.kind])]
    if beyond:
        bill.notes.append(
            f"{len(beyond)} graph(s) are larger than any measured {'/'.join(sorted({g.kind for g in costs if g.name in beyond}))} graph: their times are extrapolated"
        )
    wall, peak = schedule_compiles([g.seconds or 0.0 for g in costs], [g.host_gib for g in costs], workers)
    bill.wall_seconds = round(wall, 3)
    bill.serial_seconds = round(sum(g.seconds or 0.0 for g in costs), 3)
    bill.host_peak_gib = None if peak is None else round(peak, 3)
    if peak is not None and host_memory_gib is not None and peak > host_memory_gib:
        bill.notes.append(
            f"the {workers} parallel compiles need up to {peak:.1f} GiB of host RAM, more than the instance's {host_memory_gib:g} GiB: "
            + _workers_that_fit(costs, workers, host_memory_gib, wall)
        )
    return bill


def _workers_that_fit(costs: list[GraphCost], workers: int, host_memory_gib: float, wall: float) -> str:
    """The most workers whose compiles fit in the host's RAM, with their wall time, in words."""
    seconds = [g.seconds or 0.0 for g in costs]
    host = [g.host_gib for g in costs]
    for w in range(workers - 1, 0, -1):
        w_wall, w_peak = schedule_compiles(seconds, host, w)
        if w_peak is not None and w_peak <= host_memory_gib:
            return f"NEURON_LIBTORCH_PARALLEL_COMPILE_WORKERS={w} fits (peak {w_peak:.1f} GiB, {w_wall / 60:.1f} min wall instead of {wall / 60:.1f} min)"
    biggest = max((h or 0.0) for h in host)
    return f"one compile alone needs up to {biggest:.1f} GiB: a larger compile host (or a remote cache filled elsewhere)"


def schedule_compiles(seconds: list[float], host: list[float | None], workers: int) -> tuple[float, float | None]:
    """Longest-first list scheduling on ``workers``: (wall seconds, peak host GiB of graphs compiling at once, None if unknown)."""
    order = sorted(range(len(seconds)), key=lambda i: -seconds[i])
    free: list[tuple[float, int]] = [(0.0, w) for w in range(workers)]
    spans: list[tuple[float, float, float]] = []
    wall = 0.0
    for i in order:
        start, w = heapq.heappop(free)
        end = start + seconds[i]
        wall = max(wall, end)
        spans.append((start, end, host[i] or 0.0))
        heapq.heappush(free, (end, w))
    if any(h is None for h in host) or not spans:
        return wall, None
    events = sorted([(s, g) for s, _, g in spans] + [(e, -g) for _, e, g in spans], key=lambda x: (x[0], x[1]))
    cur = peak = 0.0
    for _, g in events:
        cur += g
        peak = max(peak, cur)
    return wall, peak
