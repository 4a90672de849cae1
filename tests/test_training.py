"""--train: one training step analysed by phase (forward, backward, optimizer, loop).

Each model under tests/models/train_*.py is one behaviour; its ``# EXPECT verdict op``
marker is the line where the finding must be. The verdicts are facts measured on
torch-xla 2.9 CPU (scripts/measure_training_xla.py; provenance in
neuronprobe/support/data/training_rules.json).
"""

from __future__ import annotations

import json

import pytest
from helpers import BROKEN, MODELS, expectations, marker_line
from typer.testing import CliRunner

import neuronprobe
from neuronprobe.cli import app
from neuronprobe.report.model import SCHEMA_VERSION, Report, load_report
from neuronprobe.vocabulary import Phase

MARKED = {
    "train_glu_backward.py": "backward",
    "train_fused_optimizer.py": "optimizer",
    "train_item_logging.py": "loop",
    "train_branch_metric.py": "loop",
    "train_host_reads.py": "loop",
    "train_step_forward_branch.py": "forward",  # train_step() calls the model: its forward is exported as usual
}
CLEAN = ["train_foreach_optimizer.py", "train_grad_clip.py"]
OTHERS = ["train_grad_scaler.py"]


@pytest.fixture(scope="module")
def reports():
    return {name: neuronprobe.analyze(str(MODELS / name), backend="static", train=True) for name in [*MARKED, *CLEAN, *OTHERS]}


@pytest.mark.parametrize("name", list(MARKED))
def test_each_training_finding_is_at_its_line_in_its_phase(reports, name):
    report = reports[name]
    for line, verdict, op in expectations(MODELS / name):
        at_line = [f for f in report.findings if f.line == line and f.file and f.file.endswith(name)]
        assert at_line, f"no finding at {name}:{line}; got {[(f.phase, f.verdict, f.file, f.line) for f in report.findings]}"
        assert {f.phase for f in at_line} == {MARKED[name]}
        assert verdict in {f.verdict for f in at_line}
        if op:
            assert op in {f.op for f in at_line}
        for f in at_line:
            assert f.fix and f.rule and f.source_line and "EXPECT" in f.source_line


def test_backward_op_is_placed_at_the_forward_line_that_produced_it(reports):
    report = reports["train_glu_backward.py"]
    (finding,) = report.findings
    assert (finding.op, finding.phase, finding.verdict) == ("aten::glu_backward", "backward", "cpu_fallback")
    assert "torch.sigmoid" in finding.fix  # the alternative whose gradient lowers
    # The forward of the same line lowers: only its gradient is a problem.
    assert not [f for f in report.findings if f.phase == "forward"]
    assert any(r.op == "aten::glu" and r.phase == "forward" and r.verdict == "lowered" for r in report.ops)
    # Backward ops carry the module path of the forward call they differentiate.
    assert any(r.phase == "backward" and r.op == "aten::mm" and "up" in r.modules for r in report.ops)
    # The fallback cuts the step: forward+backward before it, the rest after.
    assert report.train.graphs_per_step == 2
    assert report.summary.phases["backward"].support_percentage < 100


def test_fused_optimizer_is_found_where_the_optimizer_is_built(reports):
    report = reports["train_fused_optimizer.py"]
    (finding,) = report.findings
    assert finding.rule == "fused-optimizer" and finding.line == marker_line(MODELS / "train_fused_optimizer.py")
    assert "syncfree" in finding.fix and "foreach" in finding.fix
    assert report.train.optimizer == "torch.AdamW (fused)"
    assert report.verdict == "will_not_compile"


def test_foreach_optimizer_and_clipping_lower(reports):
    foreach = reports["train_foreach_optimizer.py"]
    assert foreach.findings == [] and foreach.verdict == "runs"
    assert foreach.train.optimizer == "torch.AdamW (foreach)"
    multi = [r for r in foreach.ops if r.op.startswith("aten::_foreach_")]
    assert multi and {(r.phase, r.verdict) for r in multi} == {("optimizer", "decomposed")}

    clip = reports["train_grad_clip.py"]
    assert clip.findings == [] and clip.train.train_step
    assert clip.train.optimizer == "torch.SGD (for-loop)"
    norms = [r for r in clip.ops if r.op == "aten::linalg_vector_norm"]
    assert norms and {r.phase for r in norms} == {"optimizer"}  # clipping runs between backward and step
    assert set(clip.summary.phases) == {"forward", "backward", "optimizer"}
    assert all(p.support_percentage == 100 for p in clip.summary.phases.values())


def test_item_every_step_costs_a_sync_and_a_graph(reports):
    report = reports["train_item_logging.py"]
    (finding,) = report.findings
    assert finding.rule == "host-read" and finding.bytes_per_call == 4
    assert "2 graph executions instead of 1" in finding.message
    assert "add_step_closure" in finding.fix
    assert (report.train.host_syncs_per_step, report.train.graphs_per_step) == (1, 2)
    assert report.summary.device_graphs == 2


def test_each_host_read_counts_as_one_sync_per_step(reports):
    report = reports["train_host_reads.py"]
    assert sorted(f.op for f in report.findings) == ["<print(tensor)>", "<tensor.cpu()>", "<tensor.tolist()>"]
    assert (report.train.host_syncs_per_step, report.train.graphs_per_step) == (3, 4)
    tolist = next(f for f in report.findings if f.op == "<tensor.tolist()>")
    assert tolist.shapes == "int64[8]" and tolist.bytes_per_call == 64


def test_grad_scaler_syncs_every_step_and_its_ops_are_in_the_optimizer_phase(reports):
    report = reports["train_grad_scaler.py"]
    line = marker_line(MODELS / "train_grad_scaler.py")
    (sync,) = [f for f in report.findings if f.phase == "loop"]
    assert (sync.rule, sync.line, sync.op) == ("grad-scaler-sync", line, "aten::_local_scalar_dense")
    assert "bfloat16" in sync.fix and report.train.host_syncs_per_step == 1
    amp = {r.op: (r.phase, r.verdict) for r in report.ops if "_amp_" in r.op}
    assert amp == {
        "aten::_amp_foreach_non_finite_check_and_unscale_": ("optimizer", "lowered"),
        "aten::_amp_update_scale_": ("optimizer", "lowered"),
    }
    # found_inf read as "no inf": the optimizer really stepped, at the scaler.step line.
    assert any(r.op == "aten::addcdiv_" and r.phase == "optimizer" for r in report.ops)


def test_branch_on_a_metric_is_control_flow(reports):
    report = reports["train_branch_metric.py"]
    (finding,) = report.findings
    assert finding.rule == "branch-on-metric" and finding.verdict == "control_flow"
    assert report.train.loss == "train_step()"


def test_report_with_phases_round_trips_and_renders(reports, tmp_path):
    report = reports["train_item_logging.py"]
    again = Report.from_json(report.to_json())
    assert again == report and again.schema_version == SCHEMA_VERSION == 7  # issue 15: schema 3; issue 23: 4; issue 25: 5; issue 33/36/37: 6; issue 36.6: 7
    html = report._repr_html_()
    assert 'class="np-filter-phase"' in html and "<th>phase</th>" in html and "Training step" in html
    assert list(report.findings_df()["phase"]) == ["loop"]
    assert set(report.ops_df()["phase"]) == {"forward", "backward", "optimizer"}


def test_version_1_report_still_loads():
    old = load_report(str(MODELS.parent / "data" / "report_schema_v1.json"))
    # issue 15: a loaded report is upgraded to the current schema (it was kept at 1 before)
    assert old.schema_version == SCHEMA_VERSION and old.train is None
    assert [(f.phase, f.verdict, f.line) for f in old.findings] == [("forward", "dynamic_shape", 7)]
    assert {r.phase for r in old.ops} == {"forward"}
    assert "<th>phase</th>" not in old._repr_html_()  # no training step: no phase column


def test_gpt2_from_config_trains_without_false_alarms():
    # Measured on torch-xla 2.9 CPU: a GPT-2 training step (labels, AdamW for-loop) has no
    # fallback in its backward or optimizer (scripts/measure_training_xla.py).
    report = neuronprobe.analyze("hf:gpt2", backend="static", train=True)
    assert report.findings == [], [(f.phase, f.op, f.file, f.line) for f in report.findings]
    assert report.train.loss.startswith("the transformers model's own loss")
    assert report.train.optimizer == "torch.AdamW (for-loop)"
    assert set(report.summary.phases) == {"forward", "backward", "optimizer"}
    for phase in ("backward", "optimizer"):
        assert report.summary.phases[phase].ops_total > 500
        assert report.summary.phases[phase].support_percentage == 100
    assert report.train.graphs_per_step == 1


def _cli(*args: str):
    return CliRunner().invoke(app, ["analyze", *args])


def test_partial_last_batch_is_an_extra_graph(tmp_path):
    model = str(MODELS / "train_partial_batch.py")
    out = tmp_path / "r.json"
    res = _cli(model, "--train", "--dataset-size", "1000", "--batch-size", "64", "--json", str(out), "--no-html", "--fail-on-recompiles", "1")
    assert res.exit_code == 1, res.output  # the gate sees the second graph
    assert "partial last batch" in res.output and "drop_last=True" in res.output
    section = json.loads(out.read_text())["recompiles"]
    assert section["calls"] == 16 and section["predicted"]["static"]["graphs"] == 2
    (cause,) = section["causes"]
    assert cause["kind"] == "partial_batch" and "40 rows instead of 64" in cause["reason"]

    even = _cli(model, "--train", "--batch-sizes", "64,64,64", "--json", str(out), "--no-html", "--fail-on-recompiles", "1")
    assert even.exit_code == 0, even.output
    assert json.loads(out.read_text())["recompiles"]["causes"] == []


@pytest.mark.parametrize(
    "args, message",
    [
        ([str(BROKEN / "train_no_grad.py")], "the model's output (int64[2]) has no gradient path"),
        ([str(BROKEN / "traced_module.py")], "a traced or scripted module is eval-only"),
        ([str(MODELS / "mlp.py"), "--optimizer", "adamx"], "--optimizer 'adamx': unknown optimizer"),
        ([str(MODELS / "mlp.py"), "--optimizer-impl", "fast"], "unknown implementation"),
        ([str(MODELS / "mlp.py"), "--dataset-size", "10"], "--dataset-size and --batch-size go together"),
    ],
)
def test_bad_training_input_is_one_line_exit_2(args, message, tmp_path):
    res = _cli(*args, "--train", "-o", str(tmp_path))
    assert res.exit_code == 2, res.output
    assert message in res.output and len(res.output.strip().splitlines()) == 1
    assert "Traceback" not in res.output and not list(tmp_path.iterdir())  # nothing half-written


def test_train_step_that_raises_names_its_line(tmp_path):
    path = BROKEN / "train_step_raises.py"
    res = _cli(str(path), "--train", "-o", str(tmp_path))
    assert res.exit_code == 2
    assert f"train_step_raises.py:{marker_line(path)}: train_step() raised ValueError" in res.output


def test_every_phase_is_known():
    assert Phase.values() == ("forward", "backward", "optimizer", "loop")


def test_nightly_config_trains_a_model_when_asked(tmp_path):
    from neuronprobe.errors import ConfigError
    from neuronprobe.nightly.run import analyze_model, load_config

    config = tmp_path / "nightly.toml"
    config.write_text(f'[[models]]\nmodel = "{MODELS / "train_item_logging.py"}"\ntrain = true\n')
    settings = load_config(config)
    assert settings.models[0].train is True
    report = analyze_model(settings.models[0], settings, None, "neuronprobe nightly")
    assert report.train is not None and [f.phase for f in report.findings] == ["loop"]

    config.write_text(f'[[models]]\nmodel = "{MODELS / "mlp.py"}"\ntrain = "yes"\n')
    with pytest.raises(ConfigError, match="train"):
        load_config(config)


def test_observed_training_step_on_xla_cpu_matches_the_prediction(xla_env):
    """Point 4: the same step runs on torch-xla 2.9 (the xla-cpu backend) and is reported next to the prediction."""
    glu = neuronprobe.analyze(str(MODELS / "train_glu_backward.py"), backend="xla-cpu", train=True)
    observed = [(f.op, f.phase, f.line) for f in glu.findings if f.origin == "observed"]
    assert observed == [("aten::glu_backward", "backward", marker_line(MODELS / "train_glu_backward.py"))]
    assert glu.train.observed_graphs_per_step == glu.train.graphs_per_step == 2
    assert "observed on the XLA device: 2 graph(s)" in glu._repr_html_()
    diff = glu.prediction_diff
    assert diff is not None and diff.predicted_ok_observed_failing == [] and diff.predicted_failing_observed_ok == []

    logging = neuronprobe.analyze(str(MODELS / "train_item_logging.py"), backend="xla-cpu", train=True)
    observed = [(f.op, f.phase, f.line) for f in logging.findings if f.origin == "observed"]
    assert observed == [("aten::_local_scalar_dense", "loop", marker_line(MODELS / "train_item_logging.py"))]
    assert logging.train.observed_host_syncs_per_step == logging.train.host_syncs_per_step == 1
    assert logging.train.observed_graphs_per_step == logging.train.graphs_per_step == 2


@pytest.mark.browser
def test_phase_filter_works_in_a_browser(reports, tmp_path):
    from chromium_cdp import Browser, ChromiumMissing

    from neuronprobe.report.html import render_html

    report = reports["train_glu_backward.py"]
    page_file = tmp_path / "train.html"
    page_file.write_text(render_html(report), encoding="utf-8")
    try:
        browser = Browser()
    except ChromiumMissing as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        page = browser.load(page_file)
        assert page.errors == [] and page.foreign_requests() == []
        visible = "document.querySelectorAll('table.np-ops tbody tr:not([hidden])').length"
        assert browser.evaluate(visible) == len(report.ops)
        browser.evaluate("(() => { const s = document.querySelector('.np-filter-phase'); s.value = 'backward'; s.dispatchEvent(new Event('change')); })()")
        assert browser.evaluate(visible) == len([r for r in report.ops if r.phase == "backward"])
        shown = browser.evaluate("Array.from(document.querySelectorAll('table.np-ops tbody tr:not([hidden])')).map(r => r.cells[1].textContent)")
        assert set(shown) == {"backward"}
    finally:
        browser.close()


def test_each_op_of_the_step_is_at_the_line_that_ran_it():
    from neuronprobe.loaders.resolve import load_model
    from neuronprobe.training import TrainOptions, capture_training

    path = MODELS / "train_grad_clip.py"
    text = path.read_text().splitlines()

    def line_of(needle: str) -> int:
        return next(i for i, t in enumerate(text, start=1) if needle in t)

    step = capture_training(load_model(str(path)), TrainOptions())
    by_phase: dict[str, set[int | None]] = {}
    for c in step.calls:
        by_phase.setdefault(c.phase, set()).add(c.line)
    loss_line = line_of("F.cross_entropy")
    assert by_phase["forward"] == {loss_line}  # the loss, computed in train_step
    # The gradient ops are at the forward line they differentiate (the model runs on that line too);
    # only the seed gradient and the accumulation into .grad are at the backward() call.
    assert by_phase["backward"] == {loss_line, line_of("loss.backward()")}
    assert {c.line for c in step.calls if c.name in ("mm", "nll_loss_backward", "tanh_backward")} == {loss_line}
    clip, stepped = line_of("clip_grad_norm_"), line_of("optimizer.step()")
    assert by_phase["optimizer"] <= {clip, stepped, line_of("optimizer.zero_grad()")}
    assert {c.line for c in step.calls if c.name == "linalg_vector_norm"} == {clip}
    assert stepped in by_phase["optimizer"]
