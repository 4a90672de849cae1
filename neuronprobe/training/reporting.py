"""The training step's parts of the report: its costs (:class:`TrainInfo`), a summary per phase, and the epoch.

Pure: from the capture, the classified ops and the findings to report dataclasses. The costs are
counted as torch-xla counts them (measured on torch-xla 2.9, CPU; see the README): each host read
is one device-to-host transfer and one graph execution, an upload a host-to-device copy that
neither syncs nor executes a graph, each distinct batch size one more compiled step.
"""

from __future__ import annotations

from collections import Counter

from neuronprobe.backends import Observation
from neuronprobe.report.model import Finding, OpSummary, PhaseSummary, PolicyPrediction, RecompileCause, RecompileSection, TrainInfo
from neuronprobe.training.capture import TrainCapture
from neuronprobe.training.options import TrainOptions
from neuronprobe.vocabulary import SUPPORTED_VERDICTS, CauseKind, Phase, Verdict


def phase_summaries(ops: list[OpSummary], findings: list[Finding]) -> dict[Phase, PhaseSummary]:
    """Op calls, support % and findings per phase (only phases that have something)."""
    out: dict[Phase, PhaseSummary] = {}
    for phase in Phase:
        rows = [r for r in ops if r.phase == phase]
        found = [f for f in findings if f.phase == phase]
        if not rows and not found:
            continue
        counts = {v: sum(r.count for r in rows if r.verdict == v) for v in Verdict}
        total = sum(counts.values())
        supported = sum(counts[v] for v in SUPPORTED_VERDICTS)
        out[phase] = PhaseSummary(
            ops_total=total,
            support_percentage=round(100.0 * supported / total, 2) if total else 100.0,
            counts=counts,
            findings=len(found),
        )
    return out


def epoch_batches(options: TrainOptions, batch_sizes: list[int] | None) -> tuple[list[int], str] | None:
    """The batch sizes of one epoch, from --dataset-size/--batch-size or --batch-sizes."""
    if options.dataset_size is not None and options.batch_size is not None:
        full, rest = divmod(options.dataset_size, options.batch_size)
        sizes = [options.batch_size] * full + ([rest] if rest else [])
        return sizes, f"--dataset-size {options.dataset_size} --batch-size {options.batch_size}"
    if batch_sizes:
        return list(batch_sizes), "--batch-sizes " + ",".join(str(b) for b in batch_sizes)
    return None


def epoch_recompiles(sizes: list[int], source: str, seconds: float | None) -> RecompileSection:
    """Each distinct batch size is one more training-step graph; a short last batch is the usual one."""
    seen: dict[int, int] = {}
    for i, b in enumerate(sizes):
        seen.setdefault(b, i)
    full = Counter(sizes).most_common(1)[0][0]
    causes = [
        RecompileCause(
            reason=f"a batch of {b} rows instead of {full}: a new input shape, so torch-xla compiles the whole "
            "training step (forward, backward, optimizer) again",
            count=1,
            kind=CauseKind.PARTIAL_BATCH,
            input="batch",
            dim=0,
            fix=f"drop_last=True in the DataLoader, or pad the last batch to {full} rows and mask the padded rows out of the loss",
        )
        for b in seen
        if b != full
    ]
    graphs = len(seen)
    return RecompileSection(
        calls=len(sizes),
        distinct_signatures=graphs,
        predicted={
            "static": PolicyPrediction(
                graphs=graphs,
                compile_seconds=round(graphs * seconds, 3) if seconds else 0.0,
                first_seen=sorted(seen.values()),
                note="one training-step graph per batch size in the epoch",
            )
        },
        causes=causes,
        source=source,
    )


def train_info(capture: TrainCapture, options: TrainOptions, graphs_without_reads: int) -> TrainInfo:
    """The step's costs as torch-xla counts them (measured on torch-xla 2.9, CPU; see the README): each host read is
    one device-to-host transfer and one graph execution (the pending graph runs first: reading the same value twice
    runs it twice); an upload is a host-to-device copy that neither syncs nor executes a graph."""
    syncs = sum(r.count for r in capture.host_reads)
    return TrainInfo(
        loss=capture.loss,
        optimizer=capture.optimizer,
        train_step=capture.train_step,
        host_syncs_per_step=syncs,
        graphs_per_step=graphs_without_reads + syncs,
        seconds=round(capture.seconds, 3),
        uploads_per_step=sum(u.count for u in capture.uploads),
    )


def observed_train_info(info: TrainInfo, observation: Observation) -> None:
    """What the step did on the XLA device, next to the prediction."""
    extra = observation.extra or {}
    if "graphs" not in extra:
        return
    transfers = extra.get("transfers") or {}  # torch-xla's own counters (xla_observe.transfer_counters)
    info.observed_graphs_per_step = int(transfers.get("executions", extra.get("graphs", 0)))
    info.observed_host_syncs_per_step = int(transfers.get("from_device", extra.get("host_syncs", 0)))
    if "to_device" in transfers:
        info.observed_uploads_per_step = int(transfers["to_device"])
    info.observed_compiles = int((extra.get("compiles") or {}).get("uncached", 0))
