"""The pytest plugin (`pytest11` entry point): `--require-accelerator neuron` fails closed at start,
turns skips-for-lack-of-an-accelerator into failures, and changes nothing when nothing is declared."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest

from neuronprobe.backends import detect as detect_module
from neuronprobe.backends.detect import Detection

FAKE_ROOT = Path(__file__).resolve().parent / "fake_backend"

pytest_plugins = ("pytester",)

SUITE = """
import pytest

@pytest.mark.skipif(True, reason="CUDA not available")
def test_needs_cuda():
    pass

def test_needs_gpu_inline():
    pytest.skip("requires a GPU")

@pytest.mark.skip(reason="needs network access")
def test_unrelated_skip():
    pass

def test_plain():
    assert True
"""


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def _detected(monkeypatch: pytest.MonkeyPatch, detection: Detection) -> None:
    monkeypatch.setattr(detect_module, "detect", lambda: detection)


REAL_XLA = Detection(stack="xla", versions={"torch-neuronx": "2.9.0.2.15"})


def test_the_plugin_is_registered_through_pytest11() -> None:
    points = [e for e in importlib.metadata.entry_points(group="pytest11") if e.value == "neuronprobe.pytest_plugin"]
    assert len(points) == 1


def test_without_a_declaration_nothing_changes(suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NEURONPROBE_REQUIRED_ACCELERATOR", raising=False)
    _detected(monkeypatch, REAL_XLA)  # even on a Neuron host: undeclared means unchanged
    with_plugin = suite.runpytest()
    without = suite.runpytest("-p", "no:neuronprobe")
    with_plugin.assert_outcomes(passed=1, skipped=3)
    without.assert_outcomes(passed=1, skipped=3)
    assert with_plugin.ret == without.ret == 0
    assert "accelerator" not in with_plugin.stdout.str()


@pytest.mark.parametrize(
    ("pythonpath", "env", "detected"),
    [
        # no Neuron SDK: hidden even on a host that has one
        (FAKE_ROOT / "hide", {"FAKE_NEURON_HIDE": "torch_neuronx,torch_xla,neuronxcc,libneuronxla"}, "torch-neuronx is not installed"),
        (FAKE_ROOT, {}, "the test fake"),  # the fake SDK never counts as the accelerator
        (FAKE_ROOT / "placeholder", {}, "PyPI placeholder"),
    ],
    ids=["absent", "the-test-fake", "the-pypi-placeholder"],
)
def test_declared_but_missing_exits_2_before_collecting(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, pythonpath: Path, env: dict[str, str], detected: str
) -> None:
    # A separate interpreter: pytest.exit() at configure time is what a CI job sees, and the
    # detection runs on the import path that job would have.
    monkeypatch.setenv("PYTHONPATH", str(pythonpath))
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    result = suite.runpytest_subprocess("--require-accelerator", "neuron")
    assert result.ret == 2
    out = result.stdout.str() + result.stderr.str()
    assert "the real Neuron SDK is not here" in out and detected in out
    assert "collected" not in out and "test_needs_cuda" not in out


def test_declared_by_environment_and_present_fails_accelerator_skips(suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    _detected(monkeypatch, REAL_XLA)
    monkeypatch.setenv("NEURONPROBE_REQUIRED_ACCELERATOR", "neuron")
    result = suite.runpytest()
    result.assert_outcomes(passed=1, failed=2, skipped=1)  # the network skip stays a skip
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "*accelerator skips turned into failures*",
            "2 test(s) skipped for lack of an accelerator on a runner declared to have neuron:",
            "  test_suite.py::test_needs_cuda",
            "  test_suite.py::test_needs_gpu_inline",
        ]
    )


def test_an_undeclarable_accelerator_exits_2(suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEURONPROBE_REQUIRED_ACCELERATOR", "tpu")
    result = suite.runpytest_subprocess()
    assert result.ret == 2
    assert "the only declarable accelerator is neuron" in result.stdout.str() + result.stderr.str()
