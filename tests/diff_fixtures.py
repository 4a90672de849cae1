"""Small hand-built Reports for the diff and nightly tests.

Only the fields the diff reads are set: findings, support %, graphs, padding,
backend, target and compiler version. Everything else keeps its default.
"""

from __future__ import annotations

from neuronprobe.report.model import (
    BackendInfo,
    BucketProposal,
    Finding,
    Overhead,
    PolicyPrediction,
    RecompileSection,
    Report,
    RunMetadata,
    Summary,
)

MODEL_FILE = "models/tiny_gpt.py"


def finding(
    op: str = "aten::_unique2",
    verdict: str = "cpu_fallback",
    line: int | None = 40,
    *,
    file: str | None = MODEL_FILE,
    source_line: str | None = None,
) -> Finding:
    return Finding(
        op=op,
        verdict=verdict,
        file=file,
        line=line,
        module="block",
        message=f"{op} is {verdict}",
        fix="rewrite it",
        rule="test-rule",
        source_line=source_line,
    )


def make_report(
    findings: list[Finding] | None = None,
    *,
    model: str = "tiny_gpt",
    backend: str = "static",
    fake: bool = False,
    target: str = "trn1",
    compiler: str | None = None,
    support: float = 100.0,
    device_graphs: int = 1,
    static_graphs: int | None = None,
    padding: float | None = None,
    commit: str | None = "0123456789abcdef",
    time: str = "2025-06-01T02:00:00Z",
) -> Report:
    versions = {"torch": "2.9.0"}
    if compiler is not None:
        versions["neuronx-cc"] = compiler
    recompiles = None
    if static_graphs is not None:
        recompiles = RecompileSection(calls=100, predicted={"static": PolicyPrediction(graphs=static_graphs)})
    buckets = None
    if padding is not None:
        buckets = BucketProposal(edges=[128, 256], k=2, cost_model="tokens", overhead=Overhead(tokens=padding, attention=padding * 2))
    return Report(
        model=model,
        target=target,
        backend=BackendInfo(name=backend, kind="static" if backend == "static" else "xla", versions=versions, fake=fake),
        summary=Summary(ops_total=200, support_percentage=support, device_graphs=device_graphs, findings_total=len(findings or [])),
        findings=list(findings or []),
        metadata=RunMetadata(time=time, git_commit=commit, git_dirty=False, dtype="float32", batch_size=1),
        recompiles=recompiles,
        buckets=buckets,
    )
