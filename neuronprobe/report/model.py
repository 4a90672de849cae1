"""The Report a user holds: the schema's data with the notebook display, and :func:`load_report`.

The data (every section, the JSON schema and its versions) is in :mod:`neuronprobe.report.schema`,
below the renderers; the notebook display (``_repr_html_``, ``_repr_markdown_``, the DataFrames) calls
the renderers, so it sits here, above them: nothing in ``report/`` imports upward, type-only imports
included. This module is also the public front: it re-exports every schema name that other code reads.
"""

from __future__ import annotations

from typing import Any

from neuronprobe.errors import InputError, ReportFormatError
from neuronprobe.report.schema.backend import BackendInfo, BackendStep, CompiledGraph, PredictionDiff, PredictionMismatch, SupportTableInfo
from neuronprobe.report.schema.buckets import (
    Baseline,
    BucketProposal,
    CurvePoint,
    Histogram,
    Holdout,
    HoldoutScore,
    Overhead,
)
from neuronprobe.report.schema.capture import CaptureInfo, StrategyReason
from neuronprobe.report.schema.decode import (
    BatchPlan,
    DecodeHoldout,
    DecodeLadder,
    DecodeProposal,
    DecodeScore,
    DecodeTimeline,
    MemoryFit,
    MemoryRow,
)
from neuronprobe.report.schema.findings import CallFrame, Finding, GraphBreak, Limitation, OpSummary
from neuronprobe.report.schema.metadata import RunMetadata
from neuronprobe.report.schema.parity import (
    ModuleDrift,
    OutputAgreement,
    ParitySection,
    PrecisionInfo,
    PrecisionRun,
    TopKCheck,
)
from neuronprobe.report.schema.recompiles import ObservedCompiles, PolicyPrediction, RecompileCause, RecompileSection
from neuronprobe.report.schema.report import SCHEMA_VERSION, ReportData, place_cells
from neuronprobe.report.schema.run_diff import FindingChange, RunDiff
from neuronprobe.report.schema.summary import PhaseSummary, Summary
from neuronprobe.report.schema.train import TrainInfo
from neuronprobe.typed_json import build_typed  # the one strict reader of every JSON file


class Report(ReportData):
    """A report: :class:`~neuronprobe.report.schema.report.ReportData` (every field, the JSON) with its notebook display."""

    # -- notebooks -------------------------------------------------------------
    def _repr_html_(self) -> str:
        from neuronprobe.report.html import render_html

        return render_html(self, embedded=True)

    def _repr_markdown_(self) -> str:
        """For frontends that draw Markdown but no HTML."""
        from neuronprobe.report.markdown import render_markdown

        return render_markdown(self)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """Plain text for a terminal IPython (``__repr__`` stays one line for logs)."""
        from neuronprobe.report.markdown import render_text

        printer.text(repr(self) if cycle else render_text(self))

    def ops_df(self) -> Any:
        from neuronprobe.report.frames import ops_df

        return ops_df(self)

    def findings_df(self) -> Any:
        from neuronprobe.report.frames import findings_df

        return findings_df(self)

    def recompiles_df(self) -> Any:
        from neuronprobe.report.frames import recompiles_df

        return recompiles_df(self)

    def buckets_df(self) -> Any:
        from neuronprobe.report.frames import buckets_df

        return buckets_df(self)


def load_report(path: str) -> Report:
    """Read a report JSON written by neuronprobe; a clear ReportFormatError otherwise."""
    import os

    if not os.path.exists(path):
        raise ReportFormatError(f"{path}: no such report file")
    from neuronprobe.files import read_input_text

    try:
        text = read_input_text(path, "report")  # bounded: a FIFO is refused, /dev/zero too, at most 1 GiB
    except InputError as exc:
        raise ReportFormatError(str(exc)) from None
    try:
        return Report.from_json(text)
    except ReportFormatError as exc:
        raise ReportFormatError(f"{path}: {exc}") from exc


__all__ = [
    "SCHEMA_VERSION",
    "BackendInfo",
    "BackendStep",
    "Baseline",
    "BatchPlan",
    "BucketProposal",
    "CallFrame",
    "CaptureInfo",
    "CompiledGraph",
    "CurvePoint",
    "DecodeHoldout",
    "DecodeLadder",
    "DecodeProposal",
    "DecodeScore",
    "DecodeTimeline",
    "Finding",
    "FindingChange",
    "GraphBreak",
    "Histogram",
    "Holdout",
    "HoldoutScore",
    "Limitation",
    "MemoryFit",
    "MemoryRow",
    "ModuleDrift",
    "ObservedCompiles",
    "OpSummary",
    "OutputAgreement",
    "Overhead",
    "ParitySection",
    "PhaseSummary",
    "PolicyPrediction",
    "PrecisionInfo",
    "PrecisionRun",
    "PredictionDiff",
    "PredictionMismatch",
    "RecompileCause",
    "RecompileSection",
    "Report",
    "ReportData",
    "RunDiff",
    "RunMetadata",
    "StrategyReason",
    "Summary",
    "SupportTableInfo",
    "TopKCheck",
    "TrainInfo",
    "build_typed",
    "load_report",
    "place_cells",
]
