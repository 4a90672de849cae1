"""The pytest plugin reads "neuron" as AWS Neuron only in context (issue 34.9).

A skip for lack of the NEURON simulator (the neuroscience package, ``import neuron``)
failed a run declared ``--require-accelerator neuron``: the word matched.
"""

from __future__ import annotations

import pytest

from neuronprobe.pytest_plugin import lacks_accelerator

pytest_plugins = ("pytester",)


@pytest.mark.parametrize(
    ("reason", "counts"),
    [
        # the NEURON simulator: never an accelerator
        ("could not import 'neuron': No module named 'neuron'", False),
        ("could not import 'neuron.hoc': No module named 'neuron'", False),
        ("requires the NEURON simulator", False),
        ("NEURON not installed", False),
        ("neuron simulator not available", False),
        ("needs NEURON 8.2 with nrnivmodl", False),
        ("neuron model needs hoc files, not found", False),
        # AWS Neuron and CUDA: still counted
        ("could not import 'torch_neuronx': No module named 'torch_neuronx'", True),
        ("could not import 'neuronxcc.nki': No module named 'neuronxcc'", True),
        ("could not import 'cupy': No module named 'cupy'", True),
        ("requires a Neuron device", True),
        ("no Neuron SDK on this host", True),
        ("neuron runtime not available", True),
        ("Trainium only", True),
        ("requires NeuronCores", True),
        # the SDK's packages as pip spells them (with a hyphen), as real suites write their reasons
        ("neuronx-cc is not installed", True),
        ("torch-neuronx not installed", True),
        ("requires torch-neuronx", True),
        ("transformers-neuronx not installed", True),
        ("neuronx-distributed not installed", True),
        ("NeuronX device not found", True),
        # neuroimaging's NKI (the Nathan Kline Institute's data), not the Neuron Kernel Interface
        ("NKI-Rockland sample not available", False),
        # neither
        ("could not import 'pandas': No module named 'pandas'", False),
        ("neuron count too large for CI", False),
    ],
)
def test_neuron_counts_only_as_the_accelerator(reason: str, counts: bool) -> None:
    assert lacks_accelerator(reason) is counts


FAKE_REAL_SDK = """
# The workers are separate processes: each one takes the test's stand-in for a real Neuron SDK from here.
import neuronprobe.backends.detect as detect
from neuronprobe.backends.detect import Detection

detect.detect = lambda: Detection(stack="xla", versions={"torch-neuronx": "2.9.0.2.15"})
"""

SUITE = """
import pytest

@pytest.mark.skipif(True, reason="CUDA not available")
def test_needs_cuda():
    pass

def test_needs_the_neuron_simulator():
    pytest.importorskip("neuron_simulator_that_is_not_here", reason="requires the NEURON simulator")

def test_plain():
    assert True
"""


@pytest.mark.parametrize("workers", [[], ["-p", "xdist", "-n", "2"]], ids=["serial", "xdist"])
def test_the_summary_line_is_there_with_and_without_xdist(pytester: pytest.Pytester, workers: list[str]) -> None:
    """Under xdist the conversions happen in the workers and the summary is written by the controller: with two
    workers each collects every module, and the module skipped at import is still named once."""
    pytester.makeconftest(FAKE_REAL_SDK)
    pytester.makepyfile(test_suite=SUITE, test_gpu_module='import pytest\npytest.skip("no GPU on this machine", allow_module_level=True)\n')
    result = pytester.runpytest_subprocess("--require-accelerator", "neuron", *workers)
    assert result.ret == 1
    result.assert_outcomes(passed=1, failed=1, skipped=2)  # the NEURON simulator skip stays a skip
    result.stdout.fnmatch_lines(
        [
            "*accelerator skips turned into failures*",
            "1 test(s) skipped for lack of an accelerator on a runner declared to have neuron:",
            "  test_suite.py::test_needs_cuda",
            "1 module(s) skipped whole for lack of an accelerator on a runner declared to have neuron:",
            "  test_gpu_module.py (no GPU on this machine)",
        ]
    )


SIMULATOR_PROJECT = """
import importlib.util
import sys

import pytest
import neuronprobe.backends.detect as detect
from neuronprobe.backends.detect import Detection

detect.detect = lambda: Detection(stack="xla", versions={"torch-neuronx": "2.9.0.2.15"})
sys.modules["neuron"] = None  # the NEURON simulator is not installed here, whatever this machine has


def pytest_runtest_setup(item):
    # as neuroscience projects write it: tests marked for the simulator skip where it is absent
    if item.get_closest_marker("neuron") and "cable" in item.name:
        pytest.skip("NEURON not installed (install the 'cable' extra)")
"""

SIMULATOR_TESTS = """
import pytest

pytestmark = pytest.mark.neuron  # the project's marker for its NEURON-simulator tests


def test_cable_equation():
    pass


def test_hoc_section():
    h = pytest.importorskip("neuron").h


@pytest.mark.skip(reason="opt in with --hardware")
def test_marked_and_skipped_for_no_stated_reason():
    pass


def test_on_a_neuron_device():
    pytest.skip("requires a Neuron device")
"""


def test_a_neuron_marker_on_a_simulator_test_skipped_for_the_simulator_stays_a_skip(pytester: pytest.Pytester) -> None:
    """Projects built on the NEURON simulator mark its tests ``@pytest.mark.neuron`` (``pytestmark`` of the module):
    a skip whose reason names the simulator (``NEURON`` in capitals, ``import neuron`` failing) is not a skip for
    lack of an accelerator, marker or not. The marker still counts where the reason says nothing of the simulator."""
    pytester.makeconftest(SIMULATOR_PROJECT)
    pytester.makeini("[pytest]\nmarkers =\n    neuron: needs the NEURON simulator\n")
    pytester.makepyfile(test_sim=SIMULATOR_TESTS)
    result = pytester.runpytest("--require-accelerator", "neuron", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=2, skipped=2)
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "2 test(s) skipped for lack of an accelerator on a runner declared to have neuron:",
            "  test_sim.py::test_marked_and_skipped_for_no_stated_reason",
            "  test_sim.py::test_on_a_neuron_device",
        ]
    )
    assert "test_cable_equation" not in result.stdout.str().split("accelerator skips turned into failures")[1]
