"""Serving plan, issue 37.6 and 37.1 follow-ups: ladder edges on the HTML histograms, vLLM's option
names on `analyze`, the docs' Python example, the prefix-cache column, rules the docs settle."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from neuronprobe.cli import app
from neuronprobe.errors import InputError
from neuronprobe.report.schema.serving import DimHistogram
from neuronprobe.report.serving_plots import histogram_svg, serving_svgs
from neuronprobe.shape_buckets.serving import propose_serving_plan
from neuronprobe.shape_buckets.vllm_neuron_rules import documented_default_prefill

MLP = Path(__file__).parent / "models" / "mlp.py"
TRACE = "TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(f"{i * 0.3},{50 + 37 * i},{5 + i % 11}\n" for i in range(40))


def test_histogram_svg_marks_planned_and_default_edges_on_a_value_axis() -> None:
    h = DimHistogram("prefill tokens per step <&>", [100, 200], [100, 299], [3, 1])
    svg = histogram_svg(h, planned=[150, 299], default=[128, 256, 512])
    assert svg is not None
    assert "prefill tokens per step &lt;&amp;&gt; (100-512)" in svg and "<&>" not in svg
    planned = re.findall(r'<line class="np-edge-planned" x1="([\d.]+)"', svg)
    default = re.findall(r'<line class="np-edge-default" x1="([\d.]+)"[^>]*stroke-dasharray', svg)
    # value axis 100..513 over 324 px from x=18: bucket e's edge sits at the right end of value e
    assert [float(v) for v in planned] == [pytest.approx(18 + 324 * (e + 1 - 100) / 413, abs=0.06) for e in (150, 299)]
    assert len(default) == 3 and "<title>default bucket 512</title>" in svg
    assert svg.count("<rect ") == 2 and "<title>200-299: 1 steps</title>" in svg


def test_the_report_histograms_carry_both_ladders() -> None:
    rng = np.random.default_rng(3)
    n = 120
    plan = propose_serving_plan(
        (rng.integers(20, 900, n), rng.integers(2, 60, n), np.sort(rng.uniform(0, 30, n))), max_num_batched_tokens=1024, max_num_seqs=8, max_model_len=2048
    )
    svgs = serving_svgs(plan)
    assert len(svgs) == len(plan.histograms) == 3
    assert plan.proposed is not None
    prefill, batch, ctx = svgs
    assert prefill.count('class="np-edge-planned"') == len(plan.proposed.prefill_buckets)
    assert prefill.count('class="np-edge-default"') == len(plan.baselines[0].prefill_buckets) == 4  # 128..1024
    assert batch.count('class="np-edge-default"') == 4  # 1, 2, 4, 8
    assert ctx.count('class="np-edge-planned"') == len(plan.proposed.context_buckets) + 1  # + the max_model_len graph
    assert "<title>planned bucket 2048</title>" in ctx


def test_analyze_takes_vllm_option_names_and_html_draws_edges(tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text(TRACE)
    out = tmp_path / "r.json"
    args = ["analyze", str(MLP), "--backend", "static", "--serving-trace", str(trace), "--max-num-batched-tokens", "512"]
    args += ["--max-num-seqs", "4", "--max-model-len", "4096", "--max-compiles", "0", "--json", str(out)]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    data = json.loads(out.read_text())
    assert data["serving"]["engine"]["max_num_seqs"] == 4 and data["serving"]["rules"]
    html = out.with_suffix(".html").read_text()
    assert 'class="np-edge-planned"' in html and 'class="np-edge-default"' in html and "rule: design/vllm/neuron-scheduler.md" in html
    clash = CliRunner().invoke(
        app, ["analyze", str(MLP), "--serving-trace", str(trace), "--max-num-seqs", "8", "--serving-engine", "max_num_seqs=4", "-o", str(tmp_path / "o")]
    )
    assert clash.exit_code == 2 and "--max-num-seqs 8 and --serving-engine max_num_seqs=4 disagree" in clash.output
    from neuronprobe.report.html import render_html
    from neuronprobe.report.model import Report

    report = Report.from_json(out.read_text())
    report.serving = propose_serving_plan(
        ([300, 100, 50], [3, 2, 4], [0.0, 0.0, 0.5]),
        max_num_batched_tokens=512,
        max_num_seqs=4,
        max_model_len=4096,
        compile_times=Path(__file__).parent / "data" / "serving" / "xla_metrics_report.txt",
    )
    page = render_html(report)
    assert "host RAM per parallel compile: uncalibrated" in page and "priced at the mean of 1 measured graph(s) of unknown size" in page
    alone = CliRunner().invoke(app, ["analyze", str(MLP), "--max-num-seqs", "8", "-o", str(tmp_path / "o")])
    assert alone.exit_code == 2 and "--max-num-seqs: with --serving-trace TRACE" in alone.output
    assert not (tmp_path / "o").exists()


def test_docs_python_serving_example_runs() -> None:
    import pandas as pd

    import neuronprobe

    page = (Path(__file__).parents[1] / "docs" / "concepts" / "decode-serving.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    example = next(b for b in blocks if "propose_serving_plan(requests" in b)
    scope: dict = {"neuronprobe": neuronprobe, "pd": pd}
    exec(compile(example, "docs/concepts/decode-serving.md", "exec"), scope)
    plan = scope["plan"]
    assert plan.requests == 4 and plan.additional_config["neuron_config"]["num_seqs_buckets"][-1] == 4
    assert plan.frames()["ladders"]["name"].iloc[0] == "proposed"


def test_cached_column_from_the_cli(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens,hits\n0,300,3,100\n0,100,2,\n0.5,50,4,0\n")
    base = ["buckets", str(trace), "--decode", "--runtime", "vllm-neuron", "--max-num-batched-tokens", "256"]
    base += ["--max-num-seqs", "2", "--max-model-len", "1024"]  # block_size 32, vLLM Neuron's default
    r = CliRunner().invoke(app, [*base, "--cached-column", "hits"])
    assert r.exit_code == 0, r.output
    assert "96 prompt tokens served from the prefix cache" in r.output  # 100 rounded down to 3 blocks of 32
    plain = CliRunner().invoke(app, base)
    assert plain.exit_code == 0 and "from the prefix cache" not in plain.output
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens,hits\n0,300,3,-1\n")
    bad = CliRunner().invoke(app, [*base, "--cached-column", "hits"])
    assert bad.exit_code == 2 and "line 2: 'hits' is not a whole number of cached tokens" in bad.output
    missing = CliRunner().invoke(app, [*base, "--cached-column", "nope"])
    assert missing.exit_code == 2 and "has no --cached-column 'nope'" in missing.output


def test_rules_the_docs_settle_are_sourced_not_assumed() -> None:
    assert documented_default_prefill(8192) == [128, 256, 512, 1024, 2048, 4096, 8192]
    assert documented_default_prefill(3000) == [128, 256, 512, 1024, 2048]
    assert documented_default_prefill(100) == []
    plan = propose_serving_plan(([300, 2900], [3, 2], [0.0, 0.0]), max_num_batched_tokens=3000, max_num_seqs=2, max_model_len=4096)
    assert plan.baselines[0].prefill_buckets[-1] == 3000
    assert any("documented default num_batched_tokens_buckets [128, 256, 512, 1024, 2048]" in n for n in plan.notes)
    assert any("on_device_encoder_cache.md" in r for r in plan.rules)
    assert not any("first output token" in a or "first token" in a for a in plan.assumptions)
    power = propose_serving_plan(([300], [3], [0.0]), max_num_batched_tokens=2048, max_num_seqs=2, max_model_len=4096)
    assert not any("documented default" in n for n in power.notes)
    with pytest.raises(InputError, match="--cached-column: give a trace"):
        from neuronprobe.shape_buckets.serving_cli import ServingOptions, run_serving

        run_serving(ServingOptions(None, [Path("x.prom")], 256, 2, 1024, cached_column="hits"))


@pytest.mark.parametrize("cfg", [(512, 8, 1024, 0), (256, 4, 600, 3)])
def test_decode_groups_table_equals_listing_every_step(cfg: tuple[int, int, int, int]) -> None:
    from neuronprobe.shape_buckets.vllm_neuron import Clock, SchedulerConfig, replay_vllm_neuron

    rng = np.random.default_rng(1)
    config = SchedulerConfig(*cfg)
    n = 1500
    r = replay_vllm_neuron(rng.integers(1, config.max_model_len + 50, n), rng.integers(1, 900, n), np.sort(rng.uniform(0, 100, n)), config, Clock(0.02, 8000.0))
    fast, slow = r.decode_groups(), r._decode_groups_by_step()
    assert all(np.array_equal(a, b) for a, b in zip(fast, slow, strict=True))
    assert int(fast[2].sum()) == r.decode_steps
    if config.max_model_len == 600:
        assert (fast[1] == 600).any()  # steps capped at max_model_len are counted there
