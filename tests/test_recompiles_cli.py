"""`neuronprobe analyze ... --shapes/--lengths`: the recompiles section, its console summary and the gates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from neuronprobe.cli import app
from neuronprobe.report.model import Report

TESTS = Path(__file__).parent
MODELS = TESTS / "models"
DATA = TESTS / "data"
STATIC = str(MODELS / "recompile_static.py")
SHAPES = str(DATA / "recompile_static_shapes.jsonl")  # 5 distinct signatures

runner = CliRunner()


def analyze(tmp_path: Path, *args: str) -> tuple[int, str, Path]:
    out = tmp_path / "report.json"
    result = runner.invoke(app, ["analyze", *args, "--json", str(out), "--no-html"])
    return result.exit_code, result.output, out


def test_the_report_carries_predicted_observed_and_causes(tmp_path: Path) -> None:
    code, output, out = analyze(tmp_path, STATIC, "--shapes", SHAPES, "--buckets", "16,64,128", "--compile-seconds", "120")
    assert code == 0, output
    data = json.loads(out.read_text())["recompiles"]
    assert data["predicted"]["static"]["graphs"] == 5
    assert data["predicted"]["static"]["compile_seconds"] == 600.0
    assert data["predicted"]["static"]["first_seen"] == [0, 1, 3, 5, 6]
    assert data["predicted"]["bucketed"]["graphs"] == 4
    assert data["observed"]["compiles"] == 5 and len(data["observed"]["graph_hashes"]) == 5
    assert data["observed"]["matches_static"] is True
    cause = data["causes"][0]
    assert {"reason", "count", "file", "line", "graph_changes_with_shape"} <= set(cause)
    assert data["compile_seconds_source"] == "--compile-seconds"
    # the JSON reads back into the same objects
    report = Report.from_json(out.read_text())
    assert report.recompiles is not None and report.recompiles.predicted["static"].graphs == 5
    # the console summary
    assert "recompiles: 8 calls, 5 distinct input signatures" in output
    assert "5 compile(s) for 5 shape(s) = static prediction" in output
    assert "tensor 'input_ids' size mismatch at index 1" in output


@pytest.mark.parametrize(("limit", "exit_code"), [("4", 1), ("5", 0)])
def test_fail_on_recompiles_gates_on_the_static_policy(tmp_path: Path, limit: str, exit_code: int) -> None:
    code, output, out = analyze(tmp_path, STATIC, "--shapes", SHAPES, "--max-compiles", "0", "--fail-on-recompiles", limit)
    assert code == exit_code, output
    assert out.exists()  # the report is written before the gate decides
    if exit_code:
        assert "gate failed: the static policy needs 5 graphs (limit 4)" in output


def test_fail_on_recompiles_without_traffic_is_unusable_input(tmp_path: Path) -> None:
    code, output, _ = analyze(tmp_path, STATIC, "--fail-on-recompiles", "3")
    assert code == 2
    assert "--fail-on-recompiles needs traffic" in output
    assert "Traceback" not in output


def test_the_branch_model_names_its_line_on_the_console(tmp_path: Path) -> None:
    model = MODELS / "recompile_branch.py"
    code, output, out = analyze(tmp_path, str(model), "--shapes", str(DATA / "recompile_branch_shapes.jsonl"))
    assert code == 0, output
    line = next(i for i, t in enumerate(model.read_text().splitlines(), 1) if "# RECOMPILE branch" in t)
    assert f"recompile_branch.py:{line}" in output
    assert "graph changes with shape" in output
    causes = json.loads(out.read_text())["recompiles"]["causes"]
    assert causes[0]["graph_changes_with_shape"] is True and causes[0]["line"] == line


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--shapes", str(DATA / "recompile_bad_shapes.jsonl")], "recompile_bad_shapes.jsonl line 3:"),
        (["--shapes", SHAPES, "--lengths", str(DATA / "recompile_lengths.txt")], "give either --shapes or --lengths"),
        (["--lengths", str(DATA / "recompile_lengths.txt"), "--batch-sizes", "1,x"], "--batch-sizes '1,x'"),
        (["--shapes", SHAPES, "--batch-sizes", "1,4"], "--batch-sizes applies to --lengths"),
        (["--shapes", SHAPES, "--buckets", "64,16"], "edges must be sorted"),
        (["--shapes", SHAPES, "--fail-on-recompiles", "-1"], "--fail-on-recompiles -1"),
        (["--shapes", str(DATA / "no_such_file.jsonl")], "no_such_file.jsonl: no such shapes file"),
    ],
)
def test_unusable_traffic_input_exits_2_with_one_sentence(tmp_path: Path, args: list[str], message: str) -> None:
    code, output, _ = analyze(tmp_path, STATIC, "--max-compiles", "0", *args)
    assert code == 2, output
    assert message in output
    assert "Traceback" not in output


def test_lengths_without_make_inputs_exit_2(tmp_path: Path) -> None:
    code, output, _ = analyze(tmp_path, str(MODELS / "data_branch.py"), "--lengths", str(DATA / "recompile_lengths.txt"))
    assert code == 2
    assert "--lengths needs make_inputs" in output


def test_console_summary_lists_policies_observed_and_causes() -> None:
    from rich.console import Console

    from neuronprobe.report.console_recompiles import render_recompiles
    from neuronprobe.report.model import ObservedCompiles, PolicyPrediction, RecompileCause, RecompileSection

    section = RecompileSection(
        calls=100_000,
        distinct_signatures=37,
        predicted={
            "static": PolicyPrediction(graphs=37, compile_seconds=37 * 95.0, first_seen=list(range(0, 3700, 100))),
            "bucketed": PolicyPrediction(graphs=4, compile_seconds=380.0, first_seen=[0, 1, 5, 22], note="edges 128, 256, 384, 512"),
        },
        observed=ObservedCompiles(compiles=16, source="dynamo-cpu", shapes_run=16, matches_static=True),
        causes=[
            RecompileCause(
                reason="x.shape[1] is specialised here",
                count=36,
                file="model.py",
                line=30,
                graph_changes_with_shape=True,
                source_line="for i in range(x.shape[1]):",
                kind="specialization",
                fix="use tensor ops",
            )
        ],
        compile_seconds_per_graph=95.0,
        compile_seconds_source="--compile-seconds",
    )
    console = Console(record=True, width=120)
    console.print(render_recompiles(section))
    text = console.export_text()
    assert "recompiles: 100,000 calls, 37 distinct input signatures" in text
    assert "static" in text and "58.6 min" in text  # 37 x 95 s
    assert "0, 100, 200, 300, 400, 500, ... (+31)" in text
    assert "bucketed: edges 128, 256, 384, 512" in text
    assert "observed (dynamo-cpu): 16 compile(s) for 16 shape(s) = static prediction" in text
    assert "graph changes with shape" in text and "model.py:30" in text
    assert "for i in range(x.shape[1]):" in text


def test_the_neuron_live_backend_counts_compiles_for_the_traffic_against_the_fake_sdk(tmp_path: Path) -> None:
    # A fresh process, as a CI job runs it: the fake SDK (tests/fake_backend) compiles one graph
    # per distinct input shape, like torch-xla, in forked workers.
    import os
    import subprocess
    import sys

    fixture = tmp_path / "fixture.json"
    fixture.write_text("{}")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEURONPROBE_", "FAKE_NEURON_"))}
    env.update(PYTHONPATH=str(TESTS / "fake_backend"), NEURONPROBE_ALLOW_FAKE_SDK="1", FAKE_NEURON_FIXTURE=str(fixture))
    out = tmp_path / "report.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "neuronprobe.cli",
            "analyze",
            STATIC,
            "--backend",
            "neuron",
            "--shapes",
            SHAPES,
            "--json",
            str(out),
            "--no-html",
            "--fail-on-recompiles",
            "5",
        ],
        cwd=TESTS.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    section = json.loads(out.read_text())["recompiles"]
    assert section["observed"]["source"] == "torch_xla"
    assert (section["observed"]["compiles"], section["observed"]["shapes_run"]) == (5, 5)
    assert section["observed"]["matches_static"] is True
    assert "test fake" in section["observed"]["note"]
    assert section["cpu_evidence"]["source"] == "dynamo-cpu" and section["cpu_evidence"]["compiles"] == 5
