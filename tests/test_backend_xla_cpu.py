"""The xla-cpu backend, for real: torch-xla 2.9 on the host CPU, in the environment `make test` creates.

These tests run real models through the real worker. They FAIL (never skip) with
the reason when the environment is not there (the ``xla_env`` fixture in conftest).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from helpers import MODELS, CliRun, cli_in_process, expectations

from neuronprobe.analysis import AnalyzeOptions, analyze_spec
from neuronprobe.backends import resolve_backend
from neuronprobe.backends.xla_env import MARKER, find_env, inspect_managed, setup_env
from neuronprobe.errors import BackendUnavailable, InputError, ModelLoadError


def _observed(report, verdict=None):
    return [f for f in report.findings if f.origin == "observed" and (verdict is None or f.verdict == verdict)]


def _analyze(name: str, **options) -> object:
    return analyze_spec(str(MODELS / name), AnalyzeOptions(backend="xla-cpu", **options))


def _cli(*args: str, **env: str) -> CliRun:
    """`neuronprobe ARGS` with ``env`` set, in this process (helpers.cli_in_process): these tests are about what the
    command answers (its exit code, its error line, the report it writes), not about its process, and a new
    interpreter cost each of them a torch import. The analysis still runs in its forked worker, the observation
    in the xla-cpu worker."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in {"COLUMNS": "200", **env}.items():  # rich wraps at the terminal width
            patch.setenv(name, value)
        return cli_in_process(*args)


def test_a_conditional_fallback_is_observed_at_the_users_line(xla_env):
    # adaptive_avg_pool with output 3 over an input of 8 falls back; the even pool (4) lowers.
    report = _analyze("xla_adaptive_pool.py")
    ((line, verdict, op),) = expectations(MODELS / "xla_adaptive_pool.py")
    (finding,) = _observed(report)
    assert (finding.op, finding.verdict, finding.file, finding.line) == (op, verdict, "tests/models/xla_adaptive_pool.py", line)
    assert finding.count == 1 and finding.rule == "observed-fallback"
    # its input (2, 4, 1, 8) and output (2, 4, 1, 3) in float32 cross to the host and back
    assert finding.bytes_per_call == (2 * 4 * 8 + 2 * 4 * 3) * 4
    assert report.backend.name == "xla-cpu" and report.backend.versions["xla-cpu torch-xla"] == "2.9.0"
    # the conditional rule (output size does not divide the input) predicts the same fallback
    # at the same line, so prediction and observation agree
    # (issue 33: one finding per line and problem, with both origins)
    assert [f for f in report.findings if f.line == line] == [finding] and finding.origins == ["predicted", "observed"]
    assert "_adaptive_avg_pool2d" in finding.message  # same op, same verdict: nothing to add about the prediction
    assert report.prediction_diff.predicted_ok_observed_failing == []
    assert report.prediction_diff.predicted_failing_observed_ok == []


def test_a_boolean_mask_read_falls_back_to_nonzero(xla_env):
    report = _analyze("xla_bool_mask.py")
    ((line, verdict, op),) = expectations(MODELS / "xla_bool_mask.py")
    (finding,) = _observed(report)
    assert (finding.op, finding.verdict, finding.line) == (op, verdict, line)
    assert "EXPECT" in (finding.source_line or "")
    # predicted dynamic_shape, observed on the CPU: both call it a problem, so no disagreement
    assert report.prediction_diff.predicted_ok_observed_failing == []
    assert report.prediction_diff.predicted_failing_observed_ok == []


def test_an_int64_matmul_is_a_compile_error_seen_in_the_hlo(xla_env):
    report = _analyze("xla_int64_matmul.py")
    ((line, verdict, op),) = expectations(MODELS / "xla_int64_matmul.py")
    (finding,) = _observed(report)
    assert (finding.op, finding.verdict, finding.line, finding.ncc_code) == (op, verdict, line, "NCC_EVRF035")
    assert finding.rule == "hlo-dot-int64" and "s64" in finding.message
    assert not _observed(report, "cpu_fallback"), "the matmul lowers: only the HLO shows the problem"
    # the static dtype rule (integer dot) predicts the same code at the same line: no disagreement
    # (issue 33: one finding per line and problem, with both origins)
    assert [f for f in report.findings if f.line == line] == [finding] and finding.origins == ["predicted", "observed"]
    assert report.prediction_diff.predicted_ok_observed_failing == []


def test_the_traffic_compile_count_is_observed_exactly(xla_env):
    # sample_inputs(): lengths 4, 8, 16, 8, 32: four distinct shapes, one graph each.
    report = _analyze("xla_traffic.py")
    observed = report.recompiles.observed
    assert (observed.source, observed.compiles, observed.shapes_run, observed.matches_static) == (
        "torch_xla-cpu",
        4,
        4,
        True,
    )
    assert report.recompiles.predicted["static"].graphs == 4
    assert "UncachedCompile=4" in observed.note
    assert report.recompiles.cpu_evidence is not None and report.recompiles.cpu_evidence.compiles == 4


def test_a_model_that_hangs_on_the_device_is_stopped_and_the_report_kept(xla_env):
    # --op-timeout counts from the start of the observation (the import and the build are not in it), so 3 s
    # is as sure a hang as 10 s was, and 7 s shorter (test_xla_env_limits stops the same model at 3 s)
    report = _analyze("xla_hang.py", op_timeout=3)
    (limit,) = [x for x in report.not_analysed if x.what.startswith("xla-cpu backend")]
    assert limit.what == "xla-cpu backend: observe" and "--op-timeout 3 s" in limit.why
    assert [r.op for r in report.ops] == ["aten::mul.Tensor"], "the static analysis is intact"
    assert report.backend.steps["observe"].status == "timeout"


def test_a_model_that_only_runs_under_torch_213_is_one_clear_error_exit_2(xla_env):
    # The static backend analyses it (torch 2.13 has F.linear_cross_entropy); torch 2.9 does not.
    with pytest.raises(ModelLoadError) as raised:
        _analyze("xla_torch213_only.py")
    message = str(raised.value)
    assert raised.value.exit_code == 2 and "\n" not in message
    assert message.startswith("tests/models/xla_torch213_only.py:14: the model does not run under torch 2.9")
    assert "has no attribute 'linear_cross_entropy'" in message


def test_auto_picks_xla_cpu_when_it_is_set_up_and_says_so(xla_env):
    resolved = resolve_backend("auto")
    assert resolved.info.name == "xla-cpu" and resolved.info.detail.startswith("auto: no Neuron SDK")


def test_setup_reuses_a_complete_environment(xla_python, tmp_path):
    env = find_env({"NEURONPROBE_XLA_PYTHON": xla_python})
    managed = Path(xla_python).parents[2]
    assert env.usable
    if (managed / MARKER).exists():  # the managed environment `make xla-env` made: set-up is idempotent
        again = setup_env(managed, progress=lambda line: pytest.fail(f"a complete environment was rebuilt: {line}"))
        assert again.reused and again.usable


# --- without an environment: fast, no worker ------------------------------------------------


def test_no_environment_is_one_line_exit_2_and_auto_falls_back(tmp_path):
    missing = tmp_path / "none"
    done = _cli("analyze", str(MODELS / "mlp.py"), "--backend", "xla-cpu", "-o", str(tmp_path / "r"), NEURONPROBE_XLA_ENV=str(missing))
    assert done.returncode == 2
    assert done.stderr.strip() == f"error: --backend xla-cpu: no xla-cpu environment at {missing}; run `neuronprobe setup xla-cpu`"
    done = _cli("analyze", str(MODELS / "mlp.py"), "--require-backend", "xla-cpu", "-o", str(tmp_path / "r"), NEURONPROBE_XLA_ENV=str(missing))
    assert done.returncode == 2 and "--require-backend xla-cpu: no xla-cpu environment" in done.stderr
    resolved = resolve_backend("auto")
    assert resolved.info.name == "static" and "xla-cpu not used: no xla-cpu environment" in resolved.info.detail


def test_a_partial_environment_is_named_and_never_used(tmp_path, monkeypatch):
    (tmp_path / "venv" / "bin").mkdir(parents=True)  # an interrupted set-up: no completeness marker
    assert inspect_managed(tmp_path).state == "partial"
    monkeypatch.setenv("NEURONPROBE_XLA_ENV", str(tmp_path))
    with pytest.raises(BackendUnavailable, match=r"is incomplete .*interrupted or failed set-up"):
        resolve_backend("xla-cpu")
    (tmp_path / MARKER).write_text(json.dumps({"versions": {"torch": "2.9.0"}, "requirements": "other pins"}))
    (tmp_path / "venv" / "bin" / "python").write_text("")
    assert inspect_managed(tmp_path).state == "outdated"


def test_an_interpreter_without_torch_xla_is_named(monkeypatch):
    monkeypatch.setenv("NEURONPROBE_XLA_PYTHON", sys.executable)  # neuronprobe's own: torch 2.13, no torch-xla
    with pytest.raises(BackendUnavailable, match=r"has no torch-xla \(the xla-cpu backend needs torch 2.9"):
        resolve_backend("xla-cpu")


def test_doctor_shows_the_xla_cpu_environment(tmp_path):
    done = _cli("doctor", NEURONPROBE_XLA_ENV=str(tmp_path / "none"))
    assert done.returncode == 0, done.stderr
    assert "xla-cpu environment" in done.stdout and "run `neuronprobe setup xla-cpu`" in done.stdout


def _fake_interpreter(tmp_path: Path, packages: dict[str, tuple[str, str]]) -> str:
    """An executable that runs this Python with ``packages`` ({import name: (version, __init__ text)}) first on its path."""
    site = tmp_path / "site"
    for module, (version, text) in packages.items():
        (site / module).mkdir(parents=True)
        (site / module / "__init__.py").write_text(text)
        dist = site / f"{module}-{version}.dist-info"
        dist.mkdir()
        name = module.replace("_", "-")
        (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    script = tmp_path / "python"
    script.write_text(f'#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} "$@"\n')
    script.chmod(0o755)
    return str(script)


def test_a_wrong_torch_or_a_placeholder_package_is_named(tmp_path, monkeypatch):
    wrong = _fake_interpreter(tmp_path / "a", {"torch": ("2.13.0", ""), "torch_xla": ("2.9.0", "")})
    monkeypatch.setenv("NEURONPROBE_XLA_PYTHON", wrong)
    with pytest.raises(BackendUnavailable, match=r"torch is 2\.13\.0, not 2\.9\.x \(the trn1 stack\)"):
        resolve_backend("xla-cpu")
    placeholder = _fake_interpreter(
        tmp_path / "b",
        {"torch": ("2.9.0", ""), "torch_xla": ("2.9.0", 'raise ImportError("WRONG PACKAGE. Please install ...")\n')},
    )
    monkeypatch.setenv("NEURONPROBE_XLA_PYTHON", placeholder)
    with pytest.raises(BackendUnavailable, match=r"has the PyPI placeholder torch-xla, whose import raises"):
        resolve_backend("xla-cpu")


def test_a_program_the_dispatch_mode_breaks_is_observed_at_the_function_level(xla_env):
    report = _analyze("xla_mixed_device_inplace.py")
    ((line, _verdict, op),) = expectations(MODELS / "xla_mixed_device_inplace.py")
    fallbacks = _observed(report, "cpu_fallback")
    assert [(f.op, f.line) for f in fallbacks] == [(op, line)]
    assert "called as torch.unique" in fallbacks[0].message
    (limit,) = [x for x in report.not_analysed if x.what == "xla-cpu backend: per-call observation"]
    # the PyTorch internal assert (functionalization) is quieted in the reason, kept whole in the detail (issue 33.8)
    assert "PyTorch failed one of its own internal checks" in limit.why and "INTERNAL ASSERT" not in limit.why
    assert "functional tensor" in limit.detail
    assert not [f for f in report.findings if f.rule == "observed-xla-error"], "not a failure of the model"


def test_inputs_the_capture_had_to_remake_are_the_inputs_torch_xla_runs(xla_env):
    # videomae's pixels need a frames dim the config alone does not give; the worker rebuilds the model
    # under torch 2.9 and must get the same repaired inputs, not fail on the config's guess.
    report = analyze_spec("hf:videomae", AnalyzeOptions(backend="xla-cpu", overrides=["num_hidden_layers=1"]))
    assert report.backend.name == "xla-cpu" and report.capture.strategy == "meta"
    whys = [lim.why for lim in report.not_analysed]
    assert "inputs remade after the forward's own errors: pixel_values as (batch, 16, 3, 224, 224)" in whys
    assert not [w for w in whys if "does not run under torch 2.9" in w]
    assert report.backend.steps  # the observation ran


# --- placement and the prediction diff (issue 23) ---------------------------------------------


def test_a_fallback_reached_through_a_functional_wrapper_is_at_the_users_line_and_agrees(xla_env):
    # torch-xla runs a dilated max pool on the CPU from its autograd kernel, which comes before the
    # Python dispatch key: the aten-level recorder never sees the call, the caller-level one does.
    report = _analyze("xla_maxpool_dilated.py")
    marks = expectations(MODELS / "xla_maxpool_dilated.py")
    fallbacks = _observed(report, "cpu_fallback")
    assert sorted((f.op, f.file, f.line) for f in fallbacks) == [
        ("aten::max_pool2d_with_indices", "tests/models/xla_maxpool_dilated.py", line) for line, _, _ in marks
    ]
    assert all("called as torch.nn.functional.max_pool2d" in f.message and f.count == 1 for f in fallbacks)
    # the table predicted aten::max_pool2d (what the capture names) at the same lines: both sides agree
    # (issue 33: each observed fallback absorbed the prediction at its line, which it names)
    assert [f for f in report.findings if f.verdict == "cpu_fallback"] == fallbacks
    merged = sorted((f.line, *re.search(r"\(predicted: (\w+) for (\S+?): ", f.message).groups()) for f in fallbacks if "predicted" in f.origins)
    assert merged == [(line, verdict, op) for line, verdict, op in marks]
    assert report.prediction_diff.predicted_ok_observed_failing == []
    assert report.prediction_diff.predicted_failing_observed_ok == []


# --- auto never does worse than static (issue 23) ------------------------------------------------


def test_a_model_object_under_auto_gets_the_static_analysis_with_the_reason(xla_env):
    import torch

    import neuronprobe

    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
    report = neuronprobe.analyze(model, (torch.randn(2, 8),))  # the README's first Python example, backend auto
    static = neuronprobe.analyze(model, (torch.randn(2, 8),), backend="static")
    assert report.backend.name == "static"
    assert "auto: xla-cpu not used: a model object lives in this process's torch" in report.backend.detail
    assert [lim.what for lim in report.not_analysed] == ["xla-cpu backend (auto)"]
    assert [(r.op, r.count, r.verdict) for r in report.ops] == [(r.op, r.count, r.verdict) for r in static.ops]
    with pytest.raises(InputError, match="give a model file or an hf: spec, not a model object"):
        neuronprobe.analyze(model, (torch.randn(2, 8),), backend="xla-cpu")  # asked for: an error


def test_an_hf_model_too_large_to_observe_is_observed_shrunken_and_says_so(xla_env):
    # Llama's default widths with 2 layers: 2.5 GiB of weights, held twice by the worker, over 85% of 6 GiB;
    # the shrunken config (hidden 512) fits, and the limitation names what changed.
    options = AnalyzeOptions(backend="auto", overrides=["num_hidden_layers=2"], max_memory=6 * 2**30)
    report = analyze_spec("hf:llama", options)
    assert report.backend.name == "xla-cpu" and "a shrunken copy of the model was observed" in report.backend.detail
    assert report.backend.steps["observe"].status == "ok"
    (limit,) = [lim for lim in report.not_analysed if lim.what == "xla-cpu backend: shrunken copy"]
    assert "over 85% of --max-memory 6GiB" in limit.why and "hidden_size 4096->512" in limit.why
    assert report.capture.strategy == "meta" and report.capture.nodes > 0  # the full-size capture stands


def test_a_model_file_too_large_to_observe_stays_static_with_the_reason(xla_env):
    report = analyze_spec(str(MODELS / "meta_too_large.py"), AnalyzeOptions(backend="auto", max_memory=4 * 2**30))
    assert report.backend.name == "static"
    assert "auto: xla-cpu not used: observing it would need about" in report.backend.detail
    assert "4GiB of weights x2" in report.backend.detail and "a model file is observed as it is" in report.backend.detail
    assert {r.op for r in report.ops} >= {"aten::linear", "aten::relu"}
    assert report.backend.steps == {}  # no worker ran


def test_an_observation_that_crashes_under_auto_keeps_the_static_report(xla_env):
    # Under --backend xla-cpu this model is an error (test above); under auto the static report stands.
    report = analyze_spec(str(MODELS / "xla_torch213_only.py"), AnalyzeOptions(backend="auto"))
    static = analyze_spec(str(MODELS / "xla_torch213_only.py"), AnalyzeOptions(backend="static"))
    assert report.backend.name == "static"
    (limit,) = [lim for lim in report.not_analysed if lim.what == "xla-cpu backend (auto)"]
    assert limit.why.startswith("its observation failed: tests/models/xla_torch213_only.py:14: the model does not run under torch 2.9")
    assert "the static analysis stands" in limit.why
    assert [(f.op, f.verdict, f.line) for f in report.findings] == [(f.op, f.verdict, f.line) for f in static.findings]


def test_a_training_observation_that_crashes_under_auto_keeps_the_static_report(xla_env, tmp_path):
    # --train: the worker's training step fails the same way; the static step analysis stands, exit 0.
    done = _cli("analyze", str(MODELS / "xla_torch213_only.py"), "--train", "-o", str(tmp_path), "--no-html")
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "xla_torch213_only.json").read_text())
    assert report["backend"]["name"] == "static"
    (limit,) = [lim for lim in report["not_analysed"] if lim["what"] == "xla-cpu backend (auto)"]
    assert "the model does not run under torch 2.9" in limit["why"]
    assert report["train"]["optimizer"] and {r["phase"] for r in report["ops"]} == {"forward", "backward", "optimizer"}


def test_a_vision_spec_under_auto_is_analysed_statically_with_the_reason(xla_env, tmp_path):
    done = _cli("analyze", "tv:resnet18", "-o", str(tmp_path), "--no-html")
    assert done.returncode == 0, done.stderr
    assert "auto: xla-cpu not used: tv:resnet18 is built by torchvision/timm" in done.stdout
    assert (tmp_path / "tv_resnet18.json").exists()


class _Observer:
    """A live backend that returns a given observation (what torch-xla would have reported)."""

    def __init__(self, observation):
        self.observation = observation

    def capabilities(self):
        from neuronprobe.backends import Capabilities

        return Capabilities(refine_diff=self.refine_diff)

    def info(self):
        from neuronprobe.report.model import BackendInfo

        return BackendInfo(name="xla-cpu", kind="xla-cpu", detail="a canned observation")

    def observe(self, loaded, target, *, timeout, op_timeout):
        return self.observation

    def refine_diff(self, report, observation, calls):
        from neuronprobe.backends.xla_diff import refine_diff

        refine_diff(report, observation, calls)


def _with_observation(model_file: str, findings, op_verdicts, lines):
    from neuronprobe.analysis import TrafficOptions, _analyze_loaded
    from neuronprobe.backends import Observation, ResolvedBackend
    from neuronprobe.loaders.resolve import load_model

    path = MODELS / model_file
    observation = Observation(findings=findings, op_verdicts=op_verdicts, extra={"lines_seen": [[str(path), n] for n in lines]})
    live = _Observer(observation)
    return _analyze_loaded(load_model(str(path)), AnalyzeOptions(), TrafficOptions(), ResolvedBackend(live.info(), live))


def _unplaced_fallback(op):
    from neuronprobe.report.model import Finding

    return Finding(op, "cpu_fallback", None, None, None, f"{op} ran on the CPU", "fix", "observed-fallback", origin="observed")


def test_a_correct_prediction_is_never_called_wrong_because_the_observer_lost_the_line():
    # The observer saw max_pool2d_with_indices fall back but could not say where; torch-xla also dispatched
    # aten::max_pool2d (lowered, by name). The table predicted aten::max_pool2d, which decomposes into
    # max_pool2d_with_indices, at both lines: an agreement, not "predicted failing but fine".
    marks = [line for line, _, _ in expectations(MODELS / "xla_maxpool_dilated.py")]
    report = _with_observation(
        "xla_maxpool_dilated.py",
        [_unplaced_fallback("aten::max_pool2d_with_indices")],
        {"aten::max_pool2d_with_indices": "cpu_fallback", "aten::max_pool2d": "lowered", "aten::sum": "lowered"},
        marks,
    )
    assert report.prediction_diff.predicted_failing_observed_ok == []
    assert report.prediction_diff.predicted_ok_observed_failing == []
    (observed,) = _observed(report)
    assert observed.line is None  # two captured lines decompose into it: not guessed


def test_an_unplaced_fallback_takes_the_one_line_whose_op_decomposes_into_it():
    # The capture records adaptive_avg_pool1d and its decomposition into _adaptive_avg_pool2d, the op
    # torch-xla names: a fallback the observer could not place goes to that line, the only one.
    ((line, verdict, op),) = expectations(MODELS / "adaptive_pool1d_once.py")
    report = _with_observation(
        "adaptive_pool1d_once.py",
        [_unplaced_fallback("aten::_adaptive_avg_pool2d")],
        {"aten::_adaptive_avg_pool2d": "cpu_fallback", "aten::sum": "lowered"},
        [line, line + 1],
    )
    (observed,) = _observed(report)
    assert (observed.file, observed.line) == ("tests/models/adaptive_pool1d_once.py", line)
    # (issue 33: the prediction at that line is folded into the observed finding, which names it)
    assert report.findings == [observed] and observed.origins == ["predicted", "observed"]
    assert f"(predicted: {verdict} for {op}:" in observed.message
    assert report.prediction_diff.predicted_failing_observed_ok == []
    assert report.prediction_diff.predicted_ok_observed_failing == []
