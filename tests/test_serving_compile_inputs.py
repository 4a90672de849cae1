"""The compile bill from the user's own measurements (issue 37.3, 37.4): get_dynamo_metrics JSON,
neuron_parallel_compile log, torch-xla metrics report, a previous neuronprobe run; fixtures cited in
tests/data/serving/SOURCES.md."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuronprobe.errors import InputError
from neuronprobe.shape_buckets.compile_bill import HOST_UNCALIBRATED, UNSIZED, compile_bill
from neuronprobe.shape_buckets.compile_inputs import parse_xla_metrics_report, read_compile_measurements, xla_duration_seconds
from neuronprobe.shape_buckets.serving import propose_serving_plan
from neuronprobe.shape_buckets.serving_plan import graph_names
from neuronprobe.shape_buckets.vllm_neuron import SchedulerConfig
from neuronprobe.shape_buckets.vllm_neuron_rules import Deployment

DATA = Path(__file__).parent / "data" / "serving"
TRACE = ([300, 100, 50, 700], [3, 2, 4, 5], [0.0, 0.0, 0.5, 1.0])
ENGINE = dict(max_num_batched_tokens=1024, max_num_seqs=8, max_model_len=4096)


def test_dynamo_metrics_json_ties_graphs_to_buckets_and_sums_phases() -> None:
    m = read_compile_measurements(DATA / "dynamo_metrics.json", 4096)
    assert m.format == "dynamo-metrics"
    by = {s.name: s for s in m.samples}
    assert set(by) == {"prefill_s1024", "prefill_s4096", "decode_b8"}  # the untimed entry (compile_us 0) left out
    assert by["prefill_s1024"].seconds == pytest.approx(1.5 + 8.5 + 150.0)
    assert by["decode_b8"].kind == "decode" and by["decode_b8"].size == 8 * 4096  # from its bucket_name key
    assert all(s.host_gib is None for s in m.samples)
    dep = Deployment(SchedulerConfig(4096, 8, 4096))
    bill = compile_bill(graph_names(dep, [1024, 2048, 4096], [8], []), m.samples, 8, 64.0, "dynamo")
    assert bill.calibrated and {g.name: g.seconds for g in bill.graphs}["prefill_s2048"] == pytest.approx(160 + (400 - 160) / 3)
    assert bill.host_peak_gib is None and HOST_UNCALIBRATED in bill.notes


def test_neuron_parallel_compile_log_gives_unsized_graphs() -> None:
    m = read_compile_measurements(DATA / "neuron_parallel_compile.log", 4096)
    assert m.format == "neuron-parallel-compile"
    assert sorted(s.seconds for s in m.samples) == [9.8, 192.9]  # the failed graph left out
    assert all(s.kind == UNSIZED for s in m.samples)
    assert any("1 failed compile" in n for n in m.notes)
    dep = Deployment(SchedulerConfig(1024, 8, 4096))
    bill = compile_bill(graph_names(dep, [512, 1024], [4, 8], []), m.samples, 2, None, "npc")
    assert bill.calibrated and all(g.seconds == pytest.approx((9.8 + 192.9) / 2) for g in bill.graphs)
    assert bill.wall_seconds == pytest.approx(2 * (9.8 + 192.9) / 2)  # 4 equal graphs on 2 workers
    assert any("unknown size" in n for n in bill.notes)


def test_neuron_parallel_compile_log_without_times_is_refused(tmp_path: Path) -> None:
    # The documented example (pytorch-neuron-parallel-compile.rst) has status and retry only.
    text = (DATA / "neuron_parallel_compile.log").read_text()
    lines = [ln for ln in text.splitlines() if '"compile_time"' not in ln and '"start_time"' not in ln]
    lines = [ln.replace('"retry": 0,', '"retry": 0') for ln in lines]
    f = tmp_path / "npc.log"
    f.write_text("\n".join(lines))
    with pytest.raises(InputError, match=r"has no per-graph compile_time \(2 graph\(s\) untimed, 1 failed\)"):
        read_compile_measurements(f, 4096)
    f.write_text(text.split("INFO: 2026-11-30 10:05:20.000895:  4121  INFO ||NEURON_PARALLEL_COMPILE||: {")[0])
    with pytest.raises(InputError, match="without its final compilation_report summary"):
        read_compile_measurements(f, 4096)


def test_torch_xla_metrics_report_recorded_on_cpu() -> None:
    text = (DATA / "xla_metrics_report.txt").read_text()
    st = parse_xla_metrics_report(text, "r")
    assert st is not None and st.compiles == 3 and st.uncached == 3 and st.cached == 3
    assert st.total_seconds == pytest.approx(0.855328806)
    assert st.percentiles["50%"] == pytest.approx(0.274625780)
    assert xla_duration_seconds("01s458ms736.973us") == pytest.approx(1.458736973)
    assert xla_duration_seconds("02m03s") == pytest.approx(123.0)
    with pytest.raises(ValueError):
        xla_duration_seconds("12 parsecs")
    m = read_compile_measurements(DATA / "xla_metrics_report.txt", 4096)
    assert m.format == "torch-xla-metrics" and len(m.samples) == 1
    assert m.samples[0].seconds == pytest.approx(0.855328806 / 3)
    assert "no shapes" in m.notes[0] and "not a traffic distribution" in m.notes[0]


def test_the_plan_states_the_source_and_resolution() -> None:
    plan = propose_serving_plan(TRACE, **ENGINE, compile_times=DATA / "xla_metrics_report.txt")
    assert plan.compile_bill.calibrated and "(torch-xla-metrics)" in plan.compile_bill.source
    assert any("resolution: process totals only" in n for n in plan.notes)
    assert plan.proposed is not None
    assert f"the measured torch-xla run compiled 3 distinct graph(s) (UncachedCompile); this plan compiles {plan.proposed.graphs}" in plan.notes[-1]
    assert HOST_UNCALIBRATED in plan.compile_bill.notes


def test_previous_run_reuses_only_measured_graphs(tmp_path: Path) -> None:
    import dataclasses

    first = propose_serving_plan(TRACE, **ENGINE, compile_times=DATA / "compile_times.csv")
    measured = {g.name for g in first.compile_bill.graphs if g.measured}
    assert measured and len(measured) < len(first.compile_bill.graphs)
    f = tmp_path / "report.json"
    f.write_text(json.dumps({"schema_version": 6, "serving": dataclasses.asdict(first)}))
    m = read_compile_measurements(f, 4096)
    assert m.format == "neuronprobe" and {s.name for s in m.samples} == measured
    again = propose_serving_plan(TRACE, **ENGINE, compile_times=f)
    assert again.compile_bill.calibrated
    assert {g.name: g.seconds for g in again.compile_bill.graphs if g.measured} == {g.name: g.seconds for g in first.compile_bill.graphs if g.measured}
    plan_only = tmp_path / "plan.json"
    plan_only.write_text(json.dumps(dataclasses.asdict(propose_serving_plan(TRACE, **ENGINE))))
    with pytest.raises(InputError, match="has no measured graph"):
        read_compile_measurements(plan_only, 4096)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[1, 2]", "neither a neuronprobe report"),
        ('[{"graph_id": "x", "torch_neuronx_compile_us": -5}]', "entry 0 torch_neuronx_compile_us -5"),
        ('[{"graph_id": "x", "torch_neuronx_compile_us": 0}]', "no entry with torch_neuronx_compile_us > 0"),
        ("{not json", "line 1: not valid JSON"),
        ('[{"graph_id": "x", "bucket_name": "decode_8", "torch_neuronx_compile_us": 5}]', "entry 0 bucket_name 'decode_8' is not a vLLM Neuron bucket name"),
        ("Metric: CompileTime\n  TotalSamples: 2\n  Accumulator: lots\n", "line 3: CompileTime Accumulator 'lots'"),
    ],
)
def test_bad_measurements_one_sentence(tmp_path: Path, content: str, message: str) -> None:
    f = tmp_path / "m.txt"
    f.write_text(content)
    with pytest.raises(InputError, match=message):
        read_compile_measurements(f, 4096)


def test_a_torch_xla_report_given_as_traffic_says_what_it_can_do() -> None:
    with pytest.raises(InputError, match=r"a torch-xla metrics_report\(\), not a /metrics scrape: .* give it with --compile-times"):
        propose_serving_plan(None, **ENGINE, metrics=[DATA / "xla_metrics_report.txt"])


@pytest.mark.parametrize(("fixture", "fmt"), [("dynamo_metrics.json", "dynamo-metrics"), ("neuron_parallel_compile.log", "neuron-parallel-compile")])
def test_cli_compile_times_sniffs_the_format(tmp_path: Path, fixture: str, fmt: str) -> None:
    from typer.testing import CliRunner

    from neuronprobe.cli import app

    trace = tmp_path / "t.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n0,300,3\n0,100,2\n0.5,700,4\n1.0,50,5\n")
    out = tmp_path / "plan.json"
    args = ["buckets", str(trace), "--decode", "--runtime", "vllm-neuron", "--max-num-batched-tokens", "1024", "--max-num-seqs", "8"]
    args += ["--max-model-len", "4096", "--compile-times", str(DATA / fixture), "--compile-budget", "30", "--json", str(out)]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    assert f"({fmt})" in r.output and "note: host RAM per parallel compile: uncalibrated" in r.output
    plan = json.loads(out.read_text())
    assert plan["compile_bill"]["calibrated"] and plan["proposed"]["compile_seconds"] <= 30 * 60
