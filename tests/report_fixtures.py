"""Hand-built Reports for the renderer tests: one that fills every section, one that is empty.

They stand in for the analysis pipeline so that the HTML, plots and frames can be
tested on their own. The numbers are made up but consistent (counts add up, the
chosen k is on the curve), so a renderer that recomputes nothing still shows a
report a user could believe.
"""

from __future__ import annotations

from neuronprobe.report.model import (
    BackendInfo,
    Baseline,
    BucketProposal,
    CaptureInfo,
    CurvePoint,
    Finding,
    FindingChange,
    GraphBreak,
    Histogram,
    Holdout,
    Limitation,
    ObservedCompiles,
    OpSummary,
    Overhead,
    PolicyPrediction,
    PredictionDiff,
    PredictionMismatch,
    RecompileCause,
    RecompileSection,
    Report,
    RunDiff,
    RunMetadata,
    Summary,
    SupportTableInfo,
)

MODEL_FILE = "/home/dev/project/models/tiny_encoder.py"


def rich_report() -> Report:
    """A report with every section filled: findings of every problem verdict, traffic, buckets, diffs."""
    ops = [
        OpSummary("aten::addmm", 24, "lowered", "xla-native", "", ["float32"], ["[8, 128]x[128, 512]"], ["encoder.layers.0.ff", "encoder.layers.1.ff"]),
        OpSummary("aten::gelu", 12, "lowered", "xla-native", "", ["float32"], ["[8, 128, 512]"], ["encoder.layers.0.act"]),
        OpSummary("aten::layer_norm", 8, "decomposed", "composite", "native_layer_norm lowers", ["float32"], ["[8, 128, 128]"], ["encoder.norm"]),
        OpSummary("aten::nonzero", 2, "dynamic_shape", "data-dependent-output", "output size depends on the values", ["bool"], ["[8, 128]"], ["encoder.mask"]),
        OpSummary("aten::_unique2", 1, "cpu_fallback", "no-xla-lowering", "no lowering in torch-xla 2.9", ["int64"], ["[1024]"], ["tokenizer_head"]),
        OpSummary("aten::linalg_eigh", 1, "compile_error", "ncc-unsupported", "eigendecomposition is not supported", ["float64"], ["[64, 64]"], ["whitening"]),
        OpSummary("aten::_local_scalar_dense", 1, "control_flow", "item-branch", "branches on x.item()", ["float32"], ["[]"], ["router"]),
    ]
    findings = [
        Finding(
            op="aten::linalg_eigh",
            verdict="compile_error",
            file=MODEL_FILE,
            line=57,
            module="whitening",
            message="float64 eigendecomposition is not supported by neuronx-cc on trn1",
            fix="compute the whitening matrix once on the host and register it as a buffer",
            rule="ncc-unsupported",
            ncc_code="NCC_EVRF007",
            source_line="evals, evecs = torch.linalg.eigh(cov)",
            shapes="[64, 64] float64",
        ),
        Finding(
            op="aten::_local_scalar_dense",
            verdict="control_flow",
            file=MODEL_FILE,
            line=71,
            module="router",
            message="a Python branch on a tensor value; the trace freezes one branch",
            fix="use torch.where or torch.cond instead of `if score.item() > 0.5:`",
            rule="item-branch",
            source_line="if score.item() > 0.5:",
        ),
        Finding(
            op="aten::nonzero",
            verdict="dynamic_shape",
            file=MODEL_FILE,
            line=42,
            module="encoder.mask",
            message="the output shape depends on the mask values",
            fix="keep the mask dense and multiply instead of indexing: x * mask[..., None]",
            rule="data-dependent-output",
            ncc_code="NCC_EXTP004",
            source_line="idx = torch.nonzero(mask)",
            count=2,
            shapes="[8, 128] bool",
        ),
        Finding(
            op="aten::_unique2",
            verdict="cpu_fallback",
            file=MODEL_FILE,
            line=88,
            module="tokenizer_head",
            message="no Neuron lowering: runs on the host between two device graphs",
            fix="precompute the vocabulary outside the model, or use torch.bincount on a fixed range",
            rule="no-xla-lowering",
            source_line="vocab = torch.unique(ids)",
            origin="observed",
            bytes_per_call=8192,
            shapes="[1024] int64",
        ),
    ]
    recompiles = RecompileSection(
        calls=200,
        distinct_signatures=37,
        predicted={
            "static": PolicyPrediction(
                graphs=37,
                compile_seconds=37 * 95.0,
                first_seen=[
                    0,
                    1,
                    2,
                    4,
                    5,
                    7,
                    9,
                    12,
                    15,
                    19,
                    22,
                    26,
                    30,
                    35,
                    41,
                    47,
                    52,
                    60,
                    66,
                    73,
                    80,
                    88,
                    95,
                    101,
                    110,
                    118,
                    125,
                    133,
                    140,
                    149,
                    157,
                    163,
                    171,
                    178,
                    185,
                    192,
                    199,
                ],
                note="one graph per distinct shape",
            ),
            "bucketed": PolicyPrediction(graphs=4, compile_seconds=4 * 95.0, first_seen=[0, 1, 5, 22], note="edges 128, 256, 384, 512"),
        },
        observed=ObservedCompiles(
            compiles=16, graph_hashes=["a1", "b2"], source="dynamo-cpu", shapes_run=16, matches_static=True, note="compiled 16 of 37 shapes on CPU as evidence"
        ),
        causes=[
            RecompileCause(
                reason="sequence length changes the input shape (dim 1 of input_ids)",
                count=36,
                file=MODEL_FILE,
                line=30,
                graph_changes_with_shape=True,
                source_line="def forward(self, input_ids):",
            ),
            RecompileCause(
                reason="guard on a Python int derived from the batch size", count=2, file=MODEL_FILE, line=33, source_line="if input_ids.shape[0] > 4:"
            ),
        ],
        buckets=[128, 256, 384, 512],
        compile_seconds_per_graph=95.0,
    )
    buckets = BucketProposal(
        edges=[96, 192, 320, 512],
        k=4,
        cost_model="attention",
        overhead=Overhead(tokens=11.5, attention=18.25),
        cost=1.1825,
        fit="inclusive",
        max_len=512,
        curve=[
            CurvePoint(1, [512], Overhead(180.0, 610.0), 7.1),
            CurvePoint(2, [192, 512], Overhead(62.0, 120.0), 2.2),
            CurvePoint(3, [128, 256, 512], Overhead(24.0, 41.0), 1.41),
            CurvePoint(4, [96, 192, 320, 512], Overhead(11.5, 18.25), 1.1825),
            CurvePoint(5, [64, 128, 192, 320, 512], Overhead(8.0, 12.0), 1.12),
            CurvePoint(6, [64, 96, 128, 192, 320, 512], Overhead(6.5, 9.0), 1.09),
        ],
        baselines=[
            Baseline("powers of two", [128, 256, 512], Overhead(31.0, 52.0), graphs=3),
            Baseline("nxd default", [128, 512, 1024], Overhead(95.0, 240.0), graphs=3, beyond_last=0),
        ],
        beyond_last=0,
        n_lengths=5000,
        n_distinct=311,
        notes=["lengths above 512 were clipped to the model's max_len"],
        configs={
            "nxd-inference": "context_encoding_buckets=[96, 192, 320, 512]\ntoken_generation_buckets=[96, 192, 320, 512]",
            "python": "from neuronprobe.shape_buckets import pad_to_bucket\nEDGES = [96, 192, 320, 512]",
        },
        histogram=Histogram(values=[20, 40, 64, 90, 120, 150, 190, 250, 300, 400, 510], counts=[50, 300, 700, 900, 800, 600, 500, 400, 300, 200, 250]),
        holdout=Holdout(fraction=0.2, order="time order", fit_lengths=4000, test_lengths=1000, overhead=Overhead(12.1, 20.5)),
    )
    return Report(
        model="tiny_encoder",
        target="trn1",
        backend=BackendInfo(
            name="static",
            kind="static",
            versions={"torch": "2.13.0", "support-table": "2.9.0"},
            detail="no Neuron SDK found; predictions from the bundled support table",
        ),
        summary=Summary(
            ops_total=49,
            distinct_ops=7,
            support_percentage=89.8,
            counts={"lowered": 36, "decomposed": 8, "dynamic_shape": 2, "cpu_fallback": 1, "compile_error": 1, "control_flow": 1},
            findings_total=4,
            device_graphs=2,
            fallback_bytes_per_call=8192,
            graph_breaks=1,
        ),
        ops=ops,
        findings=findings,
        graph_breaks=[GraphBreak(reason="Tensor.item() called on a traced tensor", file=MODEL_FILE, line=71, source_line="if score.item() > 0.5:")],
        capture=CaptureInfo(method="export+dynamo", export_error="torch.export failed: data-dependent branch at tiny_encoder.py:71", seconds=1.25, nodes=49),
        support_table=SupportTableInfo(
            version="2.9.0-1", target="trn1", provenance=["torch-xla 2.9.0 xla_native_functions.yaml", "neuronx-cc 2.21 operator constraints"]
        ),
        metadata=RunMetadata(
            tool_version="0.1.0",
            time="2026-01-15T09:30:00+00:00",
            host="ci-runner-7",
            command_line="neuronprobe analyze models/tiny_encoder.py --lengths traffic.jsonl",
            git_commit="0123456789abcdef0123456789abcdef01234567",
            git_dirty=False,
            python="3.11.9",
            platform="Linux-6.8-x86_64",
            dtype="float32",
            batch_size=8,
            seq_len=128,
            model_source=MODEL_FILE,
        ),
        not_analysed=[Limitation(what="tokenizer_head.forward after the graph break", why="dynamo could not trace past the .item() branch")],
        recompiles=recompiles,
        buckets=buckets,
        prediction_diff=PredictionDiff(
            predicted_ok_observed_failing=[
                PredictionMismatch("aten::_unique2", "lowered", "cpu_fallback", MODEL_FILE, 88, "torch-xla counted aten::_unique2 on the host")
            ],
            predicted_failing_observed_ok=[],
        ),
        baseline_diff=RunDiff(
            base_label="nightly 2026-01-14",
            new_label="nightly 2026-01-15",
            comparable=True,
            new_findings=[FindingChange("aten::_unique2", "cpu_fallback", MODEL_FILE, 88, "no Neuron lowering")],
            removed_findings=[FindingChange("aten::sort", "cpu_fallback", MODEL_FILE, 90, "fixed upstream")],
            support_percentage_change=-1.5,
            graphs_change=1,
            padding_overhead_change=-3.25,
            version_changes={"neuronx-cc": ["2.20", "2.21"]},
            regressions=["new cpu_fallback finding aten::_unique2 at tiny_encoder.py:88"],
        ),
    )


def clean_report() -> Report:
    """A model that runs as is: every op lowers, no traffic, no diffs."""
    return Report(
        model="mlp",
        target="inf2",
        summary=Summary(ops_total=5, distinct_ops=2, support_percentage=100.0, counts={"lowered": 5}),
        ops=[
            OpSummary("aten::addmm", 3, "lowered", "xla-native", "", ["float32"], ["[4, 16]"], ["fc1", "fc2", "fc3"]),
            OpSummary("aten::relu", 2, "lowered", "xla-native", "", ["float32"], ["[4, 16]"], ["act"]),
        ],
        capture=CaptureInfo(method="export", seconds=0.2, nodes=5),
        metadata=RunMetadata(tool_version="0.1.0", time="2026-01-15T09:30:00+00:00", command_line="neuronprobe analyze mlp.py"),
    )


def fallback_only_report() -> Report:
    """A model that runs, but with one op on the host."""
    report = clean_report()
    report.findings = [
        Finding(
            op="aten::_unique2",
            verdict="cpu_fallback",
            file="mlp.py",
            line=12,
            module="head",
            message="no Neuron lowering",
            fix="precompute it",
            rule="no-xla-lowering",
            bytes_per_call=4096,
        )
    ]
    return report
