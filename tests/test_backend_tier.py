"""The declared hardware test tier (tests/conftest.py), checked by running pytest itself.

Declared without the real SDK: exit 2 before collection, one line saying what
was detected. Not declared: hardware tests are deselected, counted, never skipped.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

from conftest import FAKE_HIDE, FAKE_ROOT
from helpers import ROOT

HARDWARE_TESTS = "tests/test_hardware_neuron.py"
ONE_PLAIN_TEST = "tests/test_backend_parsing.py::test_support_percentage_is_read_from_its_string_form"


def _pytest(args: list[str], pythonpath: list, **env: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("NEURONPROBE_", "FAKE_NEURON_"))}
    environment["PYTHONPATH"] = os.pathsep.join(str(p) for p in pythonpath)
    environment.update(env)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _only_line(done: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in (done.stdout + done.stderr).splitlines() if ln.strip()]
    assert len(lines) == 1, lines
    return lines[0]


def test_declared_tier_with_the_fake_stops_before_collecting(tmp_path):
    done = _pytest([HARDWARE_TESTS], [FAKE_ROOT], NEURONPROBE_REQUIRED_BACKEND="neuron")
    assert done.returncode == 2
    line = _only_line(done)
    assert "NEURONPROBE_REQUIRED_BACKEND=neuron but the real Neuron SDK is not here" in line
    assert "test fake" in line and "collected" not in line


def test_declared_tier_without_any_sdk_says_what_is_missing():
    done = _pytest(
        [HARDWARE_TESTS],
        [FAKE_HIDE],
        NEURONPROBE_REQUIRED_BACKEND="neuron",
        FAKE_NEURON_HIDE="torch_neuronx,torch_xla,neuronxcc,libneuronxla",
    )
    assert done.returncode == 2
    assert "detected torch-neuronx is not installed" in _only_line(done)


def test_an_unknown_declared_backend_is_refused():
    done = _pytest([HARDWARE_TESTS], [], NEURONPROBE_REQUIRED_BACKEND="trn1")
    assert done.returncode == 2
    assert "the only declarable backend is 'neuron'" in _only_line(done)


def test_undeclared_hardware_tests_are_deselected_and_counted_not_skipped():
    done = _pytest(["-rA", HARDWARE_TESTS, ONE_PLAIN_TEST], [])
    assert done.returncode == 0, done.stdout + done.stderr
    deselected = re.search(r"(\d+) deselected", done.stdout)
    assert deselected and int(deselected.group(1)) > 0 and "1 passed" in done.stdout
    count = deselected.group(1)
    assert f"neuronprobe: {count} hardware test(s) deselected: they need the real Neuron SDK" in done.stdout
    assert "NEURONPROBE_REQUIRED_BACKEND=neuron pytest -m hardware" in done.stdout
    assert "skipped" not in done.stdout.lower()
