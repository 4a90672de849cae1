"""The pytest plugin: on a runner declared to have a Neuron accelerator, a missing
accelerator stops the session and a test skipped for lack of one fails.

A CI job on a Trainium runner declares what it has::

    pytest --require-accelerator neuron          # or NEURONPROBE_REQUIRED_ACCELERATOR=neuron

* At session start the real Neuron SDK must be detected (the same detection as
  ``neuronprobe doctor``: the PyPI placeholder and the test fake never count);
  otherwise the session exits with code 2 before collecting anything.
* A test that skips for lack of an accelerator or of CUDA (its skip reason names
  CUDA, a GPU, an accelerator or Neuron, e.g. ``skipif(not
  torch.cuda.is_available())``) is reported as failed, and the summary names it:
  on this runner it would have gone green having run nothing.

Without the declaration the plugin changes nothing. Registered through the
``pytest11`` entry point, so installing neuronprobe is enough.
"""

from __future__ import annotations

import os
import re
from collections.abc import Generator
from typing import Any

import pytest

OPTION = "--require-accelerator"
ENV = "NEURONPROBE_REQUIRED_ACCELERATOR"
ACCELERATORS = ("neuron",)
EXIT_UNUSABLE = 2
# Skip reasons that mean "no accelerator here" (or "no CUDA here", which on a Neuron runner is the same lie).
ACCELERATOR_SKIP = re.compile(r"\b(cuda|gpus?|accelerators?|nvidia|neuron|trainium|inferentia|torch_xla|torch_neuronx|torch\.cuda)\b|no device", re.I)

_declared_key = pytest.StashKey[str]()
_converted_key = pytest.StashKey[list[str]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("neuronprobe")
    group.addoption(
        OPTION,
        action="store",
        default=None,
        metavar="NAME",
        help=f"This runner has this accelerator ({', '.join(ACCELERATORS)}): exit 2 at start when it is missing, and fail "
        f"tests that skip for lack of an accelerator or of CUDA. Also set by {ENV}.",
    )


def _declared(config: pytest.Config) -> str | None:
    value = config.getoption(OPTION) or os.environ.get(ENV, "")
    value = value.strip()
    return value or None


def pytest_configure(config: pytest.Config) -> None:
    declared = _declared(config)
    if declared is None:
        return
    if declared not in ACCELERATORS:
        pytest.exit(
            f"neuronprobe: {OPTION} {declared!r}: the only declarable accelerator is {' or '.join(ACCELERATORS)}",
            returncode=EXIT_UNUSABLE,
        )
    from neuronprobe.backends import detect as detection_module  # looked up at call time: tests replace detect()

    detection = detection_module.detect()
    if not detection.is_real:
        pytest.exit(
            f"neuronprobe: {OPTION} {declared} but the real Neuron SDK is not here: detected {detection.summary(with_hint=True)}",
            returncode=EXIT_UNUSABLE,
        )
    config.stash[_declared_key] = declared
    config.stash[_converted_key] = []


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr or "")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Generator[None, Any, None]:
    outcome = yield
    declared = item.config.stash.get(_declared_key, None)
    if declared is None:
        return
    report: pytest.TestReport = outcome.get_result()
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = _skip_reason(report)
    if not ACCELERATOR_SKIP.search(reason):
        return
    report.outcome = "failed"
    # A skipif mark skips in the setup phase, which pytest would count as an error in a fixture;
    # this is the test's own failure, so it is reported as the test failing.
    report.when = "call"
    report.longrepr = (
        f"neuronprobe: skipped for lack of an accelerator or of CUDA ({reason.removeprefix('Skipped: ')}), but this runner "
        f"is declared to have one ({OPTION} {declared}): on it the test must run"
    )
    item.config.stash[_converted_key].append(item.nodeid)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    converted = config.stash.get(_converted_key, None)
    if not converted:
        return
    declared = config.stash[_declared_key]
    terminalreporter.section("neuronprobe: accelerator skips turned into failures", sep="=", red=True)
    terminalreporter.write_line(f"{len(converted)} test(s) skipped for lack of an accelerator on a runner declared to have {declared}:")
    for nodeid in converted:
        terminalreporter.write_line(f"  {nodeid}")
