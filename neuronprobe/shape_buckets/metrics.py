"""Traffic and compile times from vLLM Neuron's own Prometheus metrics (issue 37.3, 37.4).

Format: the Prometheus text exposition format (``# HELP``, ``# TYPE``, then
``name{label="value",...} number [timestamp]``; histograms as ``_bucket{le=...}`` cumulative
counts, ``_sum`` and ``_count``). The metric names and labels are vLLM Neuron's
(``aws-neuron-sdk@81ce03ae:vllm-neuron/docs/design/vllm/metrics.md``):

- ``vllm_neuron:num_batched_tokens_padding`` (histogram, per ``bucket_name`` such as
  ``prefill_s1024``): padded tokens of each prefill execution, so the real chunk is bucket - padding;
- ``vllm_neuron:num_seqs_padding`` (histogram, per ``bucket_name`` such as ``decode_b8``): padded
  batch lines of each decode execution, so the real batch is bucket - padding;
- ``vllm_neuron:neff_execution_count`` (counter per ``bucket_name``): cross-checks the histogram counts;
- ``vllm_neuron:compilation_time_seconds`` (gauge per ``bucket_name``, ``_ctx{S}`` suffix with
  context buckets): the compile bill's calibration.

Bucket names ``prefill_s<N>`` and ``decode_b<B>`` follow the docs' examples (metrics.md,
``design/accuracy/tensor_capture_design.md``).

Several scrapes (in the order given) are one window: a counter or histogram series counts its
increase between consecutive scrapes, and a value below the previous one is a restart (a reset),
after which the new value counts whole (Prometheus' ``increase`` semantics). One scrape counts
everything since the server started. Ranks: a series with a ``rank_id`` label other than "0" is
left out (every rank observes the same steps; an assumption, the docs do not say where the
histograms are observed).

Resolution: a histogram only says that a padding fell in (le_prev, le]; the real size is put at
the smallest padding of its bin (the largest real size, so a ladder fitted to it never pads a step
beyond a bucket), and the report states every bin's width.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from neuronprobe.errors import InputError

MAX_SCRAPE_BYTES = 64 * 1024 * 1024
MAX_COUNT = 2**53  # a Prometheus counter is a float64: whole numbers are exact up to here
# A vLLM Neuron /metrics page holds a few thousand samples (one per bucket, bin and rank); these
# caps are far above that and keep a hostile file from costing more than a few seconds.
MAX_SAMPLES = 1_000_000  # samples in one scrape
MAX_LABELS = 64  # labels on one sample
MAX_BUCKET_SIZE = 2**24  # the N of prefill_s<N> / B of decode_b<B> (limits.MAX_BUCKET_LENGTH)
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?:\s+(?P<ts>-?\d+))?\s*$")
_LABEL = re.compile(r'\s*(?P<k>[a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"(?P<v>(?:[^"\\]|\\.)*)"\s*(?:,|$)')

PADDING_TOKENS = "vllm_neuron:num_batched_tokens_padding"
PADDING_SEQS = "vllm_neuron:num_seqs_padding"
EXECUTIONS = "vllm_neuron:neff_execution_count"
COMPILE_TIME = "vllm_neuron:compilation_time_seconds"


@dataclass(frozen=True)
class PromSample:
    name: str
    labels: tuple[tuple[str, str], ...]
    value: float
    line: int

    def label(self, key: str) -> str | None:
        return dict(self.labels).get(key)


@dataclass
class Scrape:
    source: str
    samples: list[PromSample]
    types: dict[str, str] = field(default_factory=dict)


def _unescape(v: str) -> str:
    """Label value escapes in one pass (``\\\\n`` is a backslash and an n, not a newline); an unknown escape stays as written."""
    return _ESCAPE.sub(lambda m: {"n": "\n", '"': '"', "\\": "\\"}.get(m[1], m[0]), v)


def parse_prometheus(text: str, source: str) -> Scrape:
    """Samples of a text exposition; one sentence naming the line for a malformed one (never its content)."""
    samples: list[PromSample] = []
    types: dict[str, str] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 4 and parts[1] == "TYPE":
                types[parts[2]] = parts[3].strip()
            continue
        if len(samples) >= MAX_SAMPLES:
            raise InputError(f"{source} line {lineno}: more than {MAX_SAMPLES:,} samples (MAX_SAMPLES), not one server's /metrics scrape")
        m = _SAMPLE.match(line)
        if m is None:
            raise InputError(f"{source} line {lineno}: not a Prometheus sample (name{{labels}} value)")
        labels: list[tuple[str, str]] = []
        body = m["labels"] or ""
        pos = 0
        while pos < len(body):
            lm = _LABEL.match(body, pos)
            if lm is None or lm.end() == pos:
                raise InputError(f"{source} line {lineno}: malformed labels")
            if len(labels) >= MAX_LABELS:
                raise InputError(f"{source} line {lineno}: more than {MAX_LABELS} labels (MAX_LABELS) on one sample")
            if any(k == lm["k"] for k, _ in labels):
                raise InputError(f"{source} line {lineno}: the label {lm['k'][:40]} appears twice")
            labels.append((lm["k"], _unescape(lm["v"])))
            pos = lm.end()
        text_value = m["value"]
        try:
            value = float(text_value)
        except ValueError:
            raise InputError(f"{source} line {lineno}: the value of {m['name'][:80]} is not a number") from None
        samples.append(PromSample(m["name"], tuple(sorted(labels)), value, lineno))
    return Scrape(source, samples, types)


def read_scrape(path: Path) -> Scrape:
    """Read one scrape through the project's bounded reader."""
    from neuronprobe.files import read_input_text

    # The bounded reader: regular files only (a FIFO, /dev/zero or a link to a device is one
    # sentence, never a hang), at most MAX_SCRAPE_BYTES; save a live scrape first
    # (curl -s HOST:PORT/metrics > scrape.txt).
    text = read_input_text(path, "metrics scrape", cap=MAX_SCRAPE_BYTES)
    if text.lstrip().startswith(("Metric: ", "Counter: ")):
        raise InputError(
            f"{path}: a torch-xla metrics_report(), not a /metrics scrape: it keeps process totals (no shapes, no per-shape counts), "
            "so it cannot give a traffic distribution; give it with --compile-times to calibrate the compile time per graph"
        )
    return parse_prometheus(text, str(path))


def _key(s: PromSample) -> tuple[str, tuple[tuple[str, str], ...]]:
    return s.name, s.labels


def window(scrapes: list[Scrape], names: tuple[str, ...], exact: bool = False) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Each cumulative series' count over the scrapes: increases between consecutive scrapes, resets counted whole.

    ``names``: prefixes of the series to count, or with ``exact`` the series' names."""
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    last: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for i, sc in enumerate(scrapes):
        for s in sc.samples:
            if not (s.name in names if exact else any(s.name.startswith(n) for n in names)):
                continue
            if not (math.isfinite(s.value) and 0 <= s.value <= MAX_COUNT) and not s.name.endswith("_sum"):
                raise InputError(f"{sc.source} line {s.line}: {s.name} is {s.value!r}; a count must be a number between 0 and 2^53")
            k = _key(s)
            if len(scrapes) == 1:
                out[k] = s.value
                continue
            if k not in last:
                last[k] = s.value
                out.setdefault(k, 0.0)
                if i > 0:  # a series born after the first scrape counts whole
                    out[k] += s.value
                continue
            prev = last[k]
            out[k] = out.get(k, 0.0) + (s.value - prev if s.value >= prev else s.value)
            last[k] = s.value
            if out[k] > MAX_COUNT:
                raise InputError(f"{sc.source} line {s.line}: {s.name} adds up to more than 2^53 over the scrapes; not a count")
    return out


@dataclass
class BucketHistogram:
    """Real sizes recovered from one bucket's padding histogram."""

    bucket: int
    lower: list[int]  # real size range of each bin (inclusive)
    upper: list[int]
    counts: list[int]


@dataclass
class MetricsTraffic:
    prefill: list[BucketHistogram]
    decode: list[BucketHistogram]
    compile_seconds: dict[str, float]  # bucket_name -> seconds
    sources: list[str]
    notes: list[str] = field(default_factory=list)

    def values(self, kind: str) -> tuple[np.ndarray, np.ndarray]:
        """(real size at each bin's top, steps) summed over buckets: the conservative representative (module docstring)."""
        acc: dict[int, int] = {}
        for h in self.prefill if kind == "prefill" else self.decode:
            for hi, c in zip(h.upper, h.counts, strict=True):
                if c:
                    acc[hi] = acc.get(hi, 0) + c
        keys = sorted(acc)
        return np.asarray(keys, dtype=np.int64), np.asarray([acc[k] for k in keys], dtype=np.int64)


_PREFILL = re.compile(r"^prefill_s(\d+)$")
_DECODE = re.compile(r"^decode_b(\d+)$")


def traffic_from_scrapes(scrapes: list[Scrape]) -> MetricsTraffic:
    """The prefill-token and decode-batch distributions per bucket, and the compile time per graph."""
    if not scrapes:
        raise InputError("--metrics: give at least one scrape")
    # Exact names: prometheus_client also writes <name>_created (a timestamp, not a count) outside multiprocess mode.
    counts = window(scrapes, (PADDING_TOKENS + "_bucket", PADDING_SEQS + "_bucket", EXECUTIONS, EXECUTIONS + "_total"), exact=True)
    models = {dict(labels).get("model_name") for (_, labels) in counts}
    models.discard(None)
    if len(models) > 1:
        raise InputError(f"--metrics: the scrapes hold {len(models)} models ({', '.join(sorted(m for m in models if m))}); scrape one model's server")
    notes: list[str] = []
    bins: dict[tuple[str, int], dict[float, float]] = {}
    execs: dict[str, float] = {}
    skipped_ranks = 0
    for (name, labels), value in counts.items():
        lab = dict(labels)
        if lab.get("rank_id", "0") != "0":
            skipped_ranks += 1
            continue
        bname = lab.get("bucket_name", "")
        if name == EXECUTIONS or name == EXECUTIONS + "_total":
            execs[bname] = execs.get(bname, 0.0) + value
            continue
        kind = "prefill" if name.startswith(PADDING_TOKENS) else "decode"
        m = (_PREFILL if kind == "prefill" else _DECODE).match(bname)
        if m is None:
            notes.append(f"{name} series with bucket_name {bname[:40]!r} left out: not a {kind} bucket name")
            continue
        le_text = lab.get("le")
        if le_text is None:
            raise InputError(f"--metrics: a {name} series has no le label")
        try:
            le = float(le_text)
        except ValueError:
            raise InputError(f"--metrics: {name} le={le_text[:20]!r} is not a number") from None
        if math.isnan(le) or le < 0:
            raise InputError(f"--metrics: {name} le={le_text[:20]!r}: a padding bound must be >= 0")
        digits = m.group(1)
        if len(digits) > 9 or not 1 <= int(digits) <= MAX_BUCKET_SIZE:
            raise InputError(f"--metrics: {name} bucket_name {bname[:40]!r}: the bucket size must be between 1 and {MAX_BUCKET_SIZE}")
        bins.setdefault((kind, int(digits)), {})
        d = bins[(kind, int(digits))]
        d[le] = d.get(le, 0.0) + value
    if skipped_ranks:
        notes.append(f"{skipped_ranks} series from ranks other than rank_id 0 left out (every rank runs the same steps)")
    # A counter missing from a scrape has an unknown window there (not 0): cross-check only where every scrape has it.
    counted = set.intersection(*({s.label("bucket_name") for s in sc.samples if s.name in (EXECUTIONS, EXECUTIONS + "_total")} for sc in scrapes))
    prefill: list[BucketHistogram] = []
    decode: list[BucketHistogram] = []
    for (kind, bucket), d in sorted(bins.items()):
        les = sorted(d)
        cum = [d[x] for x in les]
        if any(b < a for a, b in itertools.pairwise(cum)):
            raise InputError(f"--metrics: the {kind} bucket {bucket} histogram is not cumulative (a count falls as le grows)")
        lower: list[int] = []
        upper: list[int] = []
        cnt: list[int] = []
        prev_le = -1.0
        prev_c = 0.0
        for le, c in zip(les, cum, strict=True):
            n = round(c - prev_c)
            pad_lo = 0 if prev_le < 0 else math.floor(prev_le) + 1  # smallest whole padding in (prev_le, le]
            pad_hi = bucket if math.isinf(le) else min(bucket, math.floor(le))
            if n and pad_lo <= pad_hi and pad_lo < bucket:
                lower.append(max(1, bucket - pad_hi))
                upper.append(bucket - pad_lo)
                cnt.append(n)
            elif n:
                notes.append(f"{kind} bucket {bucket}: {n} executions with a padding of {bucket} or more left out (no real size)")
            prev_le, prev_c = le, c
        h = BucketHistogram(bucket, lower, upper, cnt)
        (prefill if kind == "prefill" else decode).append(h)
        label = f"{kind}_{'s' if kind == 'prefill' else 'b'}{bucket}"
        if label in execs and label in counted and abs(execs[label] - sum(cnt)) > 0.5:
            notes.append(f"{label}: neff_execution_count {execs[label]:g} differs from the padding histogram's {sum(cnt)} executions")
    compile_seconds: dict[str, float] = {}
    for sc in scrapes:  # a gauge: the latest scrape wins
        for s in sc.samples:
            if s.name == COMPILE_TIME and dict(s.labels).get("rank_id", "0") == "0":
                if not (math.isfinite(s.value) and 0 <= s.value <= 7 * 24 * 3600):
                    raise InputError(f"{sc.source} line {s.line}: {COMPILE_TIME} is {s.value!r}; seconds must be between 0 and a week")
                compile_seconds[dict(s.labels).get("bucket_name", "")] = s.value
    if not prefill and not decode and not compile_seconds:
        raise InputError(f"--metrics: no vllm_neuron:* padding histograms or compile times in {', '.join(s.source for s in scrapes)}")
    return MetricsTraffic(prefill, decode, compile_seconds, [s.source for s in scrapes], notes)


def resolution_words(hists: list[BucketHistogram]) -> str:
    """The widest bin of the recovered distribution, in words."""
    widths = [hi - lo + 1 for h in hists for lo, hi in zip(h.lower, h.upper, strict=True)]
    if not widths:
        return "no executions"
    return f"padding histogram bins: real sizes known to within {max(widths)} (median bin {int(np.median(widths))}); each bin placed at its largest size"
