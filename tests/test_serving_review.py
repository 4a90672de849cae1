"""Issue 37 points 3-6 reviewed with fresh eyes: each test pins a gap the review found (the cache key per scheme,
torch-xla's own persistent cache, the compile bill's host-RAM line, the stated resolution of a scrape, the fit's error)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from neuronprobe.cli import app
from neuronprobe.shape_buckets.cache_explain import explain
from neuronprobe.shape_buckets.serving import propose_serving_plan
from neuronprobe.shape_buckets.serving_console import render_serving

DATA = Path(__file__).parent / "data" / "serving"
PLANNED = {
    "model": "m",
    "dtype": "bfloat16",
    "torch_neuronx": "2.14.0",
    "neuronxcc": "2.22.1",
    "nki": "0.6.0",
    "compiler_args": ["-O1", "--lnc=2"],
    "target": "trn2",
    "tensor_parallel_size": 8,
    "graphs": ["prefill_s128", "decode_b8"],
}


def _manifest(path: Path, scheme: str, **kw: object) -> Path:
    path.write_text(json.dumps({"scheme": scheme, **PLANNED, **kw}))
    return path


# --- 5. cache explain: only the components a scheme's key holds decide a miss ---------------------------------


@pytest.mark.parametrize(
    ("scheme", "changed", "verdict"),
    [
        ("vllm-neuron", {"nki": "0.5.0"}, "miss"),  # compilation_cache.md: the NKI version is in the key
        ("vllm-neuron", {"torch_neuronx": "2.13.0"}, "miss"),
        ("torchneuron", {"neuronxcc": "2.21.0"}, "unknown"),  # CacheUtils.h: no version in the key, only the HLO
        ("torchneuron", {"torch_neuronx": "2.13.0", "nki": "0.5.0"}, "unknown"),
        ("torchneuron", {"target": "trn1"}, "miss"),  # KernelExecution.cpp: the platform target is in the key
        ("xla", {"torch_neuronx": "2.13.0"}, "unknown"),  # HLO hash + flags hash, the compiler version in the path
        ("xla", {"neuronxcc": "2.21.0"}, "miss"),
        ("xla", {"tensor_parallel_size": 4}, "miss"),  # other replica groups: another graph
    ],
)
def test_cache_explain_misses_only_on_a_component_of_the_schemes_key(tmp_path: Path, scheme: str, changed: dict, verdict: str) -> None:
    e = explain(_manifest(tmp_path / "plan.json", scheme), _manifest(tmp_path / "cache.json", scheme, **changed))
    assert [g.verdict for g in e.graphs] == [verdict, verdict]
    key = next(iter(changed))
    assert any(w.startswith(key) and ": planned" in w for w in e.graphs[0].why), e.graphs[0].why
    if key == "tensor_parallel_size":  # named as the docs name the key component it stands for
        assert e.graphs[0].why == ["tensor_parallel_size (collective replica groups): planned 8, cache 4"]
    if verdict == "unknown":
        assert all(f"not in the {scheme} key" in w for w in e.graphs[0].why)
    same = explain(_manifest(tmp_path / "plan.json", scheme), _manifest(tmp_path / "same.json", scheme))
    assert [g.verdict for g in same.graphs] == ["hit", "hit"] and same.graphs[0].why == []


def test_cache_explain_recognises_torch_xlas_own_persistent_cache(tmp_path: Path) -> None:
    # The layout measured with torch-xla 2.9 on CPU (xr.initialize_cache, Linear at batch 8 and 16): a flat
    # folder of one file per graph named by its decimal graph hash.
    root = tmp_path / "xla-persistent"
    root.mkdir()
    for name in ("161075353149320556668792959754265637534", "18567119582475117017656861077386049660"):
        (root / name).write_bytes(b"\x00" * 16)
    e = explain(_manifest(tmp_path / "plan.json", "xla"), root)
    assert e.entries == 2 and [g.verdict for g in e.graphs] == ["unknown", "unknown"]
    assert "torch-xla persistent cache" in e.graphs[0].why[0]
    r = CliRunner().invoke(app, ["cache", "explain", "--plan", str(tmp_path / "plan.json"), "--cache", str(root)])
    assert r.exit_code == 0 and "0 hit, 0 miss, 2 unknown" in r.output


# --- 3./6. the compile bill's line when host RAM was not measured ---------------------------------------------


def test_bill_line_without_host_ram_says_so_next_to_the_instance_memory() -> None:
    plan = propose_serving_plan(
        ([300, 100, 50], [3, 2, 4], [0.0, 0.0, 0.5]),
        max_num_batched_tokens=512,
        max_num_seqs=4,
        max_model_len=4096,
        compile_times=DATA / "dynamo_metrics.json",
        host_memory_gib=32,
    )
    line = next(x for x in render_serving(plan) if x.startswith("compile bill:"))
    assert line.endswith("(dynamo-metrics); host RAM peak uncalibrated, the instance has 32 GiB"), line
    from neuronprobe.report.html import render_html
    from neuronprobe.report.model import Report

    page = render_html(Report(model="m", target="trn2", serving=plan))
    assert "host RAM peak uncalibrated, the instance has 32 GiB" in page and "(dynamo-metrics) of 32" not in page


# --- 3. the fit's error on the user's own measurements ---------------------------------------------------------


def test_the_fit_states_its_error_on_the_measurements(tmp_path: Path) -> None:
    csv = tmp_path / "times.csv"
    csv.write_text("graph,seconds\nprefill_s128,40\nprefill_s512,100\nprefill_s1024,170\ndecode_b4,200\n")
    plan = propose_serving_plan(
        ([300, 100, 50], [3, 2, 4], [0.0, 0.0, 0.5]), max_num_batched_tokens=1024, max_num_seqs=4, max_model_len=4096, compile_times=csv
    )
    a, b, n = plan.compile_bill.fits["prefill"]
    assert n == 3 and a == pytest.approx(23.108108, abs=1e-5) and b == pytest.approx(0.1446368, abs=1e-6)
    # least squares by hand: residuals 40 - 41.62 = -1.62, 100 - 97.16 = +2.84, 170 - 171.22 = -1.22 -> worst 2.8 s, 2.8% of 100 s
    note = next(n for n in plan.compile_bill.notes if n.startswith("prefill fit"))
    assert note == "prefill fit 23.1 s + 0.145 s x tokens over 3 measured graphs: worst residual 2.8 s (2.8% of that graph's time)", note
    assert not any(n.startswith("decode fit") for n in plan.compile_bill.notes)  # one point: nothing to check


# --- 4. a scrape as traffic: the resolution travels with the histograms ----------------------------------------


def test_metrics_histograms_carry_the_bin_resolution() -> None:
    plan = propose_serving_plan(None, max_num_batched_tokens=512, max_num_seqs=8, max_model_len=4096, metrics=[DATA / f"scrape_{i}.prom" for i in (1, 2, 3)])
    by = {h.name: h for h in plan.histograms}
    assert "known to within 100" in by["prefill tokens per step"].resolution
    assert "known to within 5" in by["decode batch per step"].resolution
    frame = plan.frames()["histograms"]
    assert frame["resolution"].str.contains("known to within").all()


def test_a_scrape_with_created_series_is_read(tmp_path: Path) -> None:
    # prometheus_client writes <counter>_created and <histogram>_created outside multiprocess mode: a timestamp, not a count.
    text = (DATA / "scrape_1.prom").read_text()
    text += 'vllm_neuron:neff_execution_count_created{bucket_name="decode_b8",model_name="m",rank_id="0"} 1.7645e+09\n'
    text += 'vllm_neuron:num_seqs_padding_created{bucket_name="decode_b8",model_name="m",rank_id="0"} 1.7645e+09\n'
    scrape = tmp_path / "created.prom"
    scrape.write_text(text)
    plan = propose_serving_plan(None, max_num_batched_tokens=512, max_num_seqs=8, max_model_len=4096, metrics=[scrape])
    plain = propose_serving_plan(None, max_num_batched_tokens=512, max_num_seqs=8, max_model_len=4096, metrics=[DATA / "scrape_1.prom"])
    assert plan.histograms == plain.histograms and plan.decode_steps == 40
    assert not any("neff_execution_count" in n and "differs" in n for n in plan.notes)


# --- 6. analyze --serving-trace: its bill priced by --compile-times, or saying how to calibrate ----------------------


def test_the_report_bill_of_analyze_names_how_to_calibrate_and_compile_times_prices_it(tmp_path: Path) -> None:
    from neuronprobe.shape_buckets.serving import serving_for_report

    trace = tmp_path / "trace.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n0,300,3\n0,100,2\n0.5,50,4\n")
    engine = {"max_num_batched_tokens": 512, "max_num_seqs": 4, "max_model_len": 4096, "tensor_parallel_size": 2}
    plan = serving_for_report(trace, None, engine)
    how = plan.compile_bill.how_to_calibrate
    assert how.startswith("uncalibrated: no compile times were measured. Price these ladders with analyze --compile-times FILE")
    # a scrape is read by buckets: the bill names that command with this plan's engine
    assert (
        f"neuronprobe buckets {trace} --decode --runtime vllm-neuron --max-num-batched-tokens 512 --max-num-seqs 4 --max-model-len 4096 "
        "--tensor-parallel-size 2 --metrics SCRAPE" in how
    ), how
    priced = serving_for_report(trace, None, engine, DATA / "compile_times.csv")
    assert priced.compile_bill.calibrated and priced.compile_bill.wall_seconds is not None and priced.compile_bill.wall_seconds > 0
    assert [g.name for g in priced.compile_bill.graphs] == [g.name for g in plan.compile_bill.graphs]


def test_analyze_compile_times_prices_the_serving_bill_and_is_an_input(tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n0,300,3\n0,100,2\n0.5,50,4\n")
    times = tmp_path / "times.csv"
    times.write_bytes((DATA / "compile_times.csv").read_bytes())
    out = tmp_path / "r.json"
    engine = ["--max-num-batched-tokens", "512", "--max-num-seqs", "4", "--max-model-len", "4096"]
    args = ["analyze", str(Path(__file__).parent / "models" / "mlp.py"), "--backend", "static", "--serving-trace", str(trace), *engine]
    r = CliRunner().invoke(app, [*args, "--compile-times", str(times), "--json", str(out), "--no-html"])
    assert r.exit_code == 0, r.output
    bill = json.loads(out.read_text())["serving"]["compile_bill"]
    assert bill["calibrated"] is True and bill["wall_seconds"] > 0, bill
    assert "serving compile bill: " in r.output and "uncalibrated" not in r.output.split("serving compile bill: ", 1)[1].split("\n", 1)[0]
    before = times.read_bytes()
    r = CliRunner().invoke(app, [*args, "--compile-times", str(times), "--json", str(times)])
    assert r.exit_code == 2 and times.read_bytes() == before  # an input is never an output
    r = CliRunner().invoke(app, ["analyze", str(Path(__file__).parent / "models" / "mlp.py"), "--compile-times", str(times)])
    assert r.exit_code == 2 and "with --serving-trace" in r.output


# --- 3. the one per-graph constant left (the recompile section's 60 s): every renderer says it is an estimate ---


def test_the_html_recompile_section_says_where_its_compile_time_comes_from() -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from report_fixtures import rich_report

    from neuronprobe.recompiles import DEFAULT_COMPILE_SECONDS
    from neuronprobe.report.html import render_html

    report = rich_report()
    assert report.recompiles is not None
    report.recompiles.compile_seconds_per_graph = DEFAULT_COMPILE_SECONDS
    report.recompiles.compile_seconds_source = "an estimate; give --compile-seconds"
    page = render_html(report)
    assert "(about 60 s each: an estimate; give --compile-seconds)" in page


# --- 3. host RAM against the instance: the worker count that fits, and what it costs in wall time ---------------


def test_too_little_host_ram_names_the_workers_that_fit() -> None:
    from neuronprobe.shape_buckets.compile_bill import Sample, compile_bill

    graphs = [(f"decode_b{b}", "decode", b * 4096) for b in (1, 2, 4, 8)]
    samples = [Sample(n, k, s, 100.0, 10.0) for n, k, s in graphs]  # four graphs of 100 s and 10 GiB each
    bill = compile_bill(graphs, samples, 4, 25.0, "t")
    assert bill.wall_seconds == 100.0 and bill.host_peak_gib == 40.0
    assert bill.notes[-1] == (
        "the 4 parallel compiles need up to 40.0 GiB of host RAM, more than the instance's 25 GiB: "
        "NEURON_LIBTORCH_PARALLEL_COMPILE_WORKERS=2 fits (peak 20.0 GiB, 3.3 min wall instead of 1.7 min)"
    )
    alone = compile_bill(graphs, samples, 4, 8.0, "t")
    assert alone.notes[-1].endswith("one compile alone needs up to 10.0 GiB: a larger compile host (or a remote cache filled elsewhere)")


def test_a_plan_from_metrics_states_how_it_reads_the_padding_histograms() -> None:
    plan = propose_serving_plan(None, max_num_batched_tokens=512, max_num_seqs=8, max_model_len=4096, metrics=[DATA / "scrape_1.prom"])
    said = [a for a in plan.assumptions if "num_seqs_padding" in a]
    assert len(said) == 1 and "bucket minus the real" in said[0] and "metrics.md" in said[0]
    traced = propose_serving_plan(([300], [3], [0.0]), max_num_batched_tokens=512, max_num_seqs=8, max_model_len=4096)
    assert not any("num_seqs_padding" in a for a in traced.assumptions)


# --- 6. the console: analyze --serving-trace prints the plan and its bill, not only the JSON and HTML -------------


def test_analyze_console_shows_the_serving_plan(tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n0,300,3\n0,100,2\n0.5,50,4\n")
    out = tmp_path / "r.json"
    args = ["analyze", str(Path(__file__).parent / "models" / "mlp.py"), "--backend", "static", "--serving-trace", str(trace)]
    r = CliRunner().invoke(
        app, [*args, "--max-num-batched-tokens", "512", "--max-num-seqs", "4", "--max-model-len", "4096", "--max-compiles", "0", "--json", str(out)]
    )
    assert r.exit_code == 0, r.output
    plan = json.loads(out.read_text())["serving"]
    p = plan["proposed"]
    assert f"serving on vLLM Neuron: num_batched_tokens_buckets {p['prefill_buckets']}, num_seqs_buckets {p['batch_buckets']}" in r.output
    assert f"{p['graphs']} graphs (the default ladders: {plan['baselines'][0]['graphs']})" in r.output
    assert "serving compile bill: " + str(len(plan["compile_bill"]["graphs"])) + " graphs; uncalibrated: no compile times were measured." in r.output


def test_the_execution_count_cross_check_needs_the_counter_in_every_scrape(tmp_path: Path) -> None:
    from neuronprobe.shape_buckets.metrics import read_scrape, traffic_from_scrapes

    # scrape_2 and scrape_3 carry no neff_execution_count: its window is unknown, not 0
    mt = traffic_from_scrapes([read_scrape(DATA / f"scrape_{i}.prom") for i in (1, 2, 3)])
    assert not any("neff_execution_count" in n for n in mt.notes), mt.notes
    off = tmp_path / "off.prom"
    off.write_text(
        (DATA / "scrape_1.prom")
        .read_text()
        .replace('bucket_name="decode_b8",model_name="m",rank_id="0"} 40.0', 'bucket_name="decode_b8",model_name="m",rank_id="0"} 41.0')
    )
    mt = traffic_from_scrapes([read_scrape(off)])
    assert "decode_b8: neff_execution_count 41 differs from the padding histogram's 40 executions" in mt.notes
