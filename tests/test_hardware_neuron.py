"""The hardware tier: the live backend against the REAL Neuron SDK on a Neuron host.

Run on a trn1 (or inf2) runner with the Neuron DLAMI's PyTorch environment::

    NEURONPROBE_REQUIRED_BACKEND=neuron pytest -m hardware

Without the declaration these tests are deselected (see conftest.py); with it
and no real SDK the session stops with exit code 2 before collecting.
Everything here compiles with neuronx-cc, so each test takes tens of seconds.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
from helpers import MODELS, ROOT

from neuronprobe.analysis import AnalyzeOptions, analyze_spec
from neuronprobe.backends import resolve_backend
from neuronprobe.backends.detect import detect
from neuronprobe.loaders.resolve import load_model
from neuronprobe.vocabulary import PROBLEM_VERDICTS

pytestmark = pytest.mark.hardware

# Real compiles: generous limits, still far below a hung compiler's "forever".
OP_TIMEOUT_S = 900.0
RUN_TIMEOUT_S = 2400.0


@pytest.fixture(scope="module")
def stack():
    detection = detect()
    assert detection.is_real, f"the hardware tier needs the real Neuron SDK; detected {detection.summary()}"
    return detection


def _live(model: str):
    return analyze_spec(
        str(MODELS / model),
        AnalyzeOptions(backend="neuron", require_backend="neuron", op_timeout=OP_TIMEOUT_S, timeout=RUN_TIMEOUT_S),
    )


def test_the_real_stack_is_detected_with_its_versions(stack):
    assert stack.stack in ("xla", "native") and not stack.fake
    assert stack.versions.get("torch-neuronx") and stack.versions.get("torch")
    if stack.stack == "xla":
        assert stack.versions.get("torch-xla") and stack.versions.get("neuronx-cc")


def test_doctor_accepts_the_real_stack(stack):
    done = subprocess.run(
        [sys.executable, "-m", "neuronprobe.cli", "doctor", "--require-backend", "neuron"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert done.returncode == 0, done.stderr
    assert "THE TEST FAKE" not in done.stdout


def test_a_plain_mlp_compiles_and_runs_without_observed_problems(stack):
    report = _live("mlp.py")
    assert (report.backend.name, report.backend.fake) == ("neuron", False)
    assert all(step.status == "ok" for step in report.backend.steps.values()), report.backend.steps
    observed = [f for f in report.findings if f.origin == "observed"]
    assert observed == [], observed
    if stack.stack == "xla":
        assert report.backend.observed_support_percentage == 100.0


def test_an_fft_is_observed_failing_or_falling_back(stack):
    report = _live("fft.py")
    observed = [f for f in report.findings if f.origin == "observed" and "fft" in f.op]
    assert observed and all(f.verdict in PROBLEM_VERDICTS for f in observed), report.findings
    assert report.prediction_diff is not None


@pytest.mark.parametrize("model", ["nonzero.py", "unique.py"])
def test_data_dependent_ops_are_observed_on_the_host(stack, model):
    report = _live(model)
    observed = {f.op for f in report.findings if f.origin == "observed"}
    assert observed, f"expected an observed fallback or failure for {model}; steps {report.backend.steps}"


def test_count_compiles_sees_one_graph_per_shape(stack):
    live = resolve_backend("neuron", "neuron").live
    loaded = load_model(str(MODELS / "mlp.py"))
    same = live.count_compiles(loaded, [(torch.randn(2, 16),), (torch.randn(2, 16),)], timeout=RUN_TIMEOUT_S)
    two = live.count_compiles(loaded, [(torch.randn(2, 16),), (torch.randn(8, 16),)], timeout=RUN_TIMEOUT_S)
    assert same.compiles >= 1 and two.compiles > same.compiles, (same, two)
    assert two.shapes_run == 2
