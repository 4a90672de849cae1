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


# --- where the skip is declared, and what counts (issue 29, point 5) -------------------------------

MODULE_MARK = """
import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

def test_in_a_cuda_module():
    pass
"""

CLASS_MARK = """
import pytest

@pytest.mark.skipif("not torch.cuda.is_available()")
class TestOnGpu:
    def test_in_a_cuda_class(self):
        pass
"""

MODULE_SKIP = """
import pytest

pytest.skip("no GPU on this machine", allow_module_level=True)

def test_never_collected():
    pass
"""

NAMES_AND_MARKERS = """
import pytest

@pytest.mark.skip(reason="slow")
def test_neuron_activation_sparsity():
    pass

def test_neuron_count_per_layer():
    pytest.skip("neuron count too large for CI")

@pytest.mark.gpu
def test_marked_for_a_gpu():
    pytest.skip("opt in with --hardware")
"""


def test_module_and_class_marks_count_as_accelerator_skips(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    _detected(monkeypatch, REAL_XLA)
    monkeypatch.setenv("NEURONPROBE_REQUIRED_ACCELERATOR", "neuron")
    pytester.makepyfile(test_module_mark=MODULE_MARK, test_class_mark="import torch\n" + CLASS_MARK)
    result = pytester.runpytest()
    result.assert_outcomes(failed=2)
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*test_class_mark.py::TestOnGpu::test_in_a_cuda_class", "*test_module_mark.py::test_in_a_cuda_module"])


def test_a_module_skipped_at_import_for_lack_of_a_gpu_fails_the_session(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    _detected(monkeypatch, REAL_XLA)
    monkeypatch.setenv("NEURONPROBE_REQUIRED_ACCELERATOR", "neuron")
    pytester.makepyfile(test_gpu_module=MODULE_SKIP, test_other="def test_fine():\n    pass\n")
    result = pytester.runpytest()
    assert result.ret == 1  # not 0 ("1 passed, 1 skipped"), and alone not 5 (no tests collected)
    result.stdout.fnmatch_lines(
        ["1 module(s) skipped whole for lack of an accelerator on a runner declared to have neuron:", "  test_gpu_module.py (no GPU on this machine)"]
    )
    alone = pytester.runpytest("test_gpu_module.py")
    assert alone.ret == 1


def test_a_name_with_neuron_in_it_is_not_a_reason_but_an_accelerator_marker_is(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    _detected(monkeypatch, REAL_XLA)
    monkeypatch.setenv("NEURONPROBE_REQUIRED_ACCELERATOR", "neuron")
    pytester.makeini("[pytest]\nmarkers =\n    gpu: needs a GPU\n")
    pytester.makepyfile(test_names=NAMES_AND_MARKERS)
    result = pytester.runpytest()
    result.assert_outcomes(failed=1, skipped=2)
    result.stdout.fnmatch_lines(["1 test(s) skipped*", "  test_names.py::test_marked_for_a_gpu"])
    assert "opt in with --hardware; marked gpu" in result.stdout.str()


@pytest.mark.parametrize(
    ("reason", "counts"),
    [
        ("condition: not torch.cuda.is_available()", True),
        ("could not import 'torch_neuronx': No module named 'torch_neuronx'", True),
        ("requires a GPU", True),
        ("Neuron device not found", True),
        ("CUDA only", True),
        ("slow on GPU", False),
        ("neuron count too large for CI", False),
        ("needs network access", False),
        ("no device file /dev/ttyUSB0", False),
    ],
)
def test_a_reason_counts_when_it_names_an_accelerator_and_says_it_is_missing(reason: str, counts: bool) -> None:
    from neuronprobe.pytest_plugin import lacks_accelerator

    assert lacks_accelerator(reason) is counts


FOOTPRINT = """
import sys

def test_neuronprobe_left_this_session_alone():
    loaded = sorted(m for m in sys.modules if m == "neuronprobe" or m.startswith("neuronprobe."))
    assert loaded == ["neuronprobe", "neuronprobe.pytest_plugin"], loaded
    hooks = [type(f).__module__ for f in sys.meta_path if type(f).__module__.startswith("neuronprobe")]
    assert hooks == [], hooks
    assert "torch" not in sys.modules
"""


def test_an_undeclared_session_imports_only_the_plugin_and_installs_no_import_hook(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NEURONPROBE_REQUIRED_ACCELERATOR", raising=False)
    pytester.makepyfile(test_footprint=FOOTPRINT)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")  # a fresh interpreter: what another project's session sees
    result.assert_outcomes(passed=1)


def test_the_torchvision_hook_is_in_place_only_while_a_model_is_built() -> None:
    import sys

    from helpers import MODELS

    from neuronprobe.loaders import torchvision_ops
    from neuronprobe.loaders.resolve import load_model_file

    def hooks() -> int:
        return sum(isinstance(f, torchvision_ops._Finder) for f in sys.meta_path)

    assert hooks() == 0
    with torchvision_ops.hooked():
        assert hooks() == (0 if "torchvision" in sys.modules else 1)  # nothing to watch once torchvision is imported
    load_model_file(MODELS / "mlp.py")
    assert hooks() == 0
