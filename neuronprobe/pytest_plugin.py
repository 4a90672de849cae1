"""The pytest plugin: on a runner declared to have a Neuron accelerator, a missing
accelerator stops the session and a test skipped for lack of one fails.

A CI job on a Trainium runner declares what it has::

    pytest --require-accelerator neuron          # or NEURONPROBE_REQUIRED_ACCELERATOR=neuron

* At session start the real Neuron SDK must be detected (the same detection as
  ``neuronprobe doctor``: the PyPI placeholder and the test fake never count);
  otherwise the session exits with code 2 before collecting anything.
* A test that skips for lack of an accelerator or of CUDA is reported as failed,
  and the summary names it: on this runner it would have gone green having run
  nothing. A skip counts when its declared reason says an accelerator is missing
  (it names CUDA, a GPU, an accelerator or Neuron *and* says it is absent or
  required: ``skipif(not torch.cuda.is_available())``, ``"requires a GPU"``,
  ``importorskip("torch_neuronx")``), or when the skipped test carries a marker
  named for an accelerator (``@pytest.mark.gpu``). Marks on the test, its class or
  its module (``pytestmark``) count alike. The test's name never counts: a
  ``test_neuron_count`` skipped as "slow" stays a skip, and neither does a marker
  when the reason is the NEURON simulator's (``NEURON not installed``,
  ``importorskip("neuron")``): its projects mark their own tests ``neuron``.
* A whole module skipped at import (``pytest.skip(..., allow_module_level=True)``)
  for lack of an accelerator fails the session (exit 1) and is named in the summary.

Without the declaration the plugin changes nothing, and imports nothing of
neuronprobe but this module (``import neuronprobe`` itself imports nothing heavy
and installs no import hook). Registered through the ``pytest11`` entry point, so
installing neuronprobe is enough.
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
# A skip reason means "no accelerator here" (or "no CUDA here", which on a Neuron runner is the same lie)
# when it names an accelerator and says it is missing or required; either alone is not enough
# ("slow on GPU", "neuron count too large for CI" are other reasons).
# The Neuron SDK's packages count as pip spells them too (torch-neuronx, neuronx-cc, transformers-neuronx,
# neuronx-distributed): "neuronx" is AWS's alone, the NEURON simulator never writes it.
ACCELERATOR_WORDS = re.compile(
    r"\b(cuda|cudnn|nccl|gpus?|accelerators?|nvidia|neuroncores?|trainium|inferentia|trn[123]|inf2|"
    r"torch[-_]xla|torch[-_]neuronx?|neuronx?[-_]?cc|libneuronxla|neuronx(?:[-_]\w+)?|transformers[-_]neuronx)\b",
    re.I,
)
# "neuron" alone is also the NEURON simulator (neuron.yale.edu, `pip install neuron`, written in capitals),
# unrelated to AWS Neuron: the word counts only as "Neuron"/"neuron" (not "NEURON"), not next to "simulat...",
# and a failed import counts only when the module is an accelerator's (below), never `neuron` itself.
NEURON_WORD = re.compile(r"\b(?:Neuron|neuron)\b(?!\s+simulat)")
SIMULATOR_CONTEXT = re.compile(r"\bsimulat|\bhoc\b|\bnrn", re.I)
# A reason that names the NEURON simulator as what is missing ("NEURON" in capitals, its hoc/nrn tools, "neuron
# simulator"): such projects mark those tests `@pytest.mark.neuron`, which then says nothing of an accelerator.
SIMULATOR_NAMED = re.compile(r"\bNEURON\b|\b[Nn]euron\s+simulat|\bhoc\b|\bnrn")
# pytest.importorskip's reasons, and Python's own: the module is then what the reason is about.
IMPORT_FAILURE = re.compile(r"(?:could not import|no module named|cannot import name \S+ from)\s+['\"]?(?P<module>[\w.]+)", re.I)
ACCELERATOR_MODULES = re.compile(
    r"^(torch_neuronx|torch_neuron|neuronxcc|neuronx_cc|libneuronxla|torch_xla|neuronx_distributed\w*|transformers_neuronx|nki|"
    r"cupy\w*|pycuda|pynvml|nvidia\w*|tensorrt|triton|apex|flash_attn\w*|torch\.cuda)(\.|$)"
)
ABSENCE_WORDS = re.compile(
    r"available|\b(no|not|without|requires?|required|needs?|needed|missing|absent|only|cannot|can't|"
    r"could not import|no module named|not found|unavailable|skip(ped)? (on|without))\b",
    re.I,
)
# Markers that declare a test needs an accelerator: skipped, it is skipped for lack of one.
ACCELERATOR_MARKERS = frozenset({"cuda", "gpu", "gpus", "accelerator", "neuron", "trainium", "inferentia", "requires_gpu", "requires_cuda", "requires_neuron"})
SKIP_PREFIX = "Skipped: "
CONVERTED_PREFIX = "neuronprobe: skipped for lack of an accelerator or of CUDA"

_declared_key = pytest.StashKey[str]()
_converted_key = pytest.StashKey[list[str]]()
_modules_key = pytest.StashKey[list[str]]()  # modules skipped whole at import for lack of an accelerator
# The report hooks get no config: the declared sessions' configs, innermost last (a pytester run inside a run).
_sessions: list[pytest.Config] = []


def _declared_session() -> pytest.Config | None:
    return _sessions[-1] if _sessions else None


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
    config.stash[_modules_key] = []
    _sessions.append(config)


def pytest_unconfigure(config: pytest.Config) -> None:
    if config in _sessions:
        _sessions.remove(config)


def _skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    """The skip's declared reason (pytest's ``(file, line, reason)``); nothing else of the report (names, paths)."""
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix(SKIP_PREFIX)
    return ""


def lacks_accelerator(reason: str) -> bool:
    """A declared skip reason that says an accelerator (or CUDA) is missing or required.

    A failed import is judged by its module alone (``No module named 'neuron'`` is the NEURON
    simulator); otherwise an accelerator's name must appear as a word, "neuron" only in the
    sense of AWS Neuron (:data:`NEURON_WORD`), together with a word saying it is absent or required.
    """
    imports = [m.group("module") for m in IMPORT_FAILURE.finditer(reason)]
    if imports:
        return any(ACCELERATOR_MODULES.match(module) for module in imports)
    named = ACCELERATOR_WORDS.search(reason) or (NEURON_WORD.search(reason) and not SIMULATOR_CONTEXT.search(reason))
    return bool(named and ABSENCE_WORDS.search(reason))


def names_neuron_simulator(reason: str) -> bool:
    """A skip reason about the NEURON simulator: ``import neuron`` failed, or it names the simulator or its tools."""
    if any(m.group("module").split(".")[0] == "neuron" for m in IMPORT_FAILURE.finditer(reason)):
        return True
    return bool(SIMULATOR_NAMED.search(reason))


def _accelerator_marker(item: pytest.Item) -> str | None:
    """The first marker of the test (its own, its class's or its module's) named for an accelerator."""
    return next((m.name for m in item.iter_markers() if m.name.lower() in ACCELERATOR_MARKERS), None)


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
    if not lacks_accelerator(reason):
        marker = _accelerator_marker(item)
        # a marker counts unless the reason says the missing thing is the NEURON simulator (a `neuron` marker there is its own)
        if marker is None or names_neuron_simulator(reason):
            return
        reason = f"{reason}; marked {marker}"
    report.outcome = "failed"
    # A skipif mark skips in the setup phase, which pytest would count as an error in a fixture;
    # this is the test's own failure, so it is reported as the test failing.
    report.when = "call"
    report.longrepr = f"{CONVERTED_PREFIX} ({reason}), but this runner is declared to have one ({OPTION} {declared}): on it the test must run"


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Count the converted skips where the summary is written: under pytest-xdist the reports arrive in the
    controller, while the conversion (:func:`pytest_runtest_makereport`) ran in a worker."""
    config = _declared_session()
    if config is None:
        return
    if report.failed and isinstance(report.longrepr, str) and report.longrepr.startswith(CONVERTED_PREFIX):
        converted = config.stash[_converted_key]
        if report.nodeid not in converted:
            converted.append(report.nodeid)


def pytest_collectreport(report: pytest.CollectReport) -> None:
    """A module skipped whole at import (``allow_module_level=True``) for lack of an accelerator is recorded.

    Its report stays a skip (a failed collection would stop the whole session before any test
    ran); the session's exit status becomes 1 instead, and the summary names the module. A
    hook on the report (not on making it), so that under pytest-xdist the controller, which
    writes the summary and the exit status, records what its workers collected (once each).
    """
    config = _declared_session()
    if config is None:
        return
    if report.skipped and lacks_accelerator(_skip_reason(report)):
        entry = f"{report.nodeid} ({_skip_reason(report)})"
        if entry not in config.stash[_modules_key]:
            config.stash[_modules_key].append(entry)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if session.config.stash.get(_modules_key, None) and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    converted = config.stash.get(_converted_key, None)
    modules = config.stash.get(_modules_key, None)
    if not converted and not modules:
        return
    from neuronprobe.console_io import inert  # test ids and paths are shown escaped, never as terminal controls

    declared = config.stash[_declared_key]
    terminalreporter.section("neuronprobe: accelerator skips turned into failures", sep="=", red=True)
    if converted:
        terminalreporter.write_line(f"{len(converted)} test(s) skipped for lack of an accelerator on a runner declared to have {declared}:")
        for nodeid in converted:
            terminalreporter.write_line(f"  {inert(nodeid)}")
    if modules:
        terminalreporter.write_line(f"{len(modules)} module(s) skipped whole for lack of an accelerator on a runner declared to have {declared}:")
        for entry in modules:
            terminalreporter.write_line(f"  {inert(entry)}")
