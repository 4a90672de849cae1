"""The declared hardware tier, and the fake Neuron SDK's fixtures.

Tests marked ``@pytest.mark.hardware`` need the real Neuron SDK on a Neuron
host. They run only when the job declares it::

    NEURONPROBE_REQUIRED_BACKEND=neuron pytest -m hardware

* Declared, but the real stack is absent (nothing, the PyPI placeholder, a
  partial stack, or the test fake): the session stops before collecting any
  test, with exit code 2 and one line saying what was detected.
* Not declared: hardware tests are deselected (not skipped), and the summary
  says how many and why. No run reports a skip it did not ask for.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from neuronprobe.loaders import torchvision_ops

# Test modules import transformers (and through it torchvision) at collection, outside any model build:
# torchvision is imported once here under neuronprobe's import hook, as a model build would import it
# (the PyPI torchvision beside the CPU torch needs its op schemas defined; loaders/torchvision_ops.py),
# and stays usable after the hook is gone. The hook itself is not left installed (test_pytest_plugin).
with torchvision_ops.hooked():
    import torchvision  # noqa: F401

REQUIRED_ENV = "NEURONPROBE_REQUIRED_BACKEND"
HARDWARE_MARK = "hardware"
TIER_EXIT_CODE = 2

FAKE_ROOT = Path(__file__).resolve().parent / "fake_backend"
FAKE_NATIVE = FAKE_ROOT / "native"
FAKE_PLACEHOLDER = FAKE_ROOT / "placeholder"
FAKE_HIDE = FAKE_ROOT / "hide"
FAKE_MODULES = ("torch_neuronx", "torch_xla", "neuronxcc", "fake_neuron_common")

_deselected_key = pytest.StashKey[int]()


def _declared() -> str | None:
    value = os.environ.get(REQUIRED_ENV, "").strip()
    return value or None


def pytest_configure(config: pytest.Config) -> None:
    declared = _declared()
    if declared is None:
        return
    if declared != "neuron":
        pytest.exit(f"{REQUIRED_ENV}={declared!r}: the only declarable backend is 'neuron'", returncode=TIER_EXIT_CODE)
    from neuronprobe.backends.detect import detect

    detection = detect()
    if not detection.is_real:
        pytest.exit(
            f"{REQUIRED_ENV}=neuron but the real Neuron SDK is not here: detected {detection.summary(with_hint=True)}",
            returncode=TIER_EXIT_CODE,
        )


# `make test` hands whole files to its two workers in collection order (--dist loadfile --no-loadscope-reorder).
# A long file handed out near the end keeps one worker busy after the other has run out of files: the longest
# files (40 s to two minutes each of the two-core run, measured with --durations; every other file takes less)
# are collected first, longest first, and the rest keep pytest's order. A missing name fails test_suite_order.
# Re-measured after the suite's limits were cut (one worker, idle host): test_cli_docs 106 s, test_backend_xla_cpu
# 56 s, test_isolation_cli 47 s, each zoo part about 44 s (tests/data/zoo_tier.json's seconds), test_graph_breaks 28 s.
LONGEST_FILES = (
    "test_cli_docs.py",
    "test_backend_xla_cpu.py",
    "test_isolation_cli.py",
    "test_zoo_tier_2.py",
    "test_zoo_tier_4.py",
    "test_zoo_tier_3.py",
    "test_zoo_tier_1.py",
    "test_graph_breaks.py",
)


def longest_files_first(items: list[pytest.Item]) -> None:
    """Move the items of LONGEST_FILES to the front, in that order; a stable sort keeps every file's own order."""
    rank = {name: i for i, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    longest_files_first(items)
    if _declared() == "neuron":
        return
    hardware = [item for item in items if item.get_closest_marker(HARDWARE_MARK) is not None]
    if not hardware:
        return
    keep = [item for item in items if item.get_closest_marker(HARDWARE_MARK) is None]
    config.hook.pytest_deselected(items=hardware)
    items[:] = keep
    config.stash[_deselected_key] = len(hardware)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config) -> None:
    count = config.stash.get(_deselected_key, 0)
    if count:
        terminalreporter.write_line(
            f"neuronprobe: {count} hardware test(s) deselected: they need the real Neuron SDK on a Neuron host; "
            f"run them there with {REQUIRED_ENV}=neuron pytest -m hardware"
        )


# --- the fake Neuron SDK ---------------------------------------------------------------------


@pytest.fixture
def fake_sdk(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The fake XLA-era Neuron SDK on this process's import path, allowed as a backend.

    Forked SDK workers inherit the path. Any real or earlier fake SDK module is
    dropped from sys.modules first, so the fake is what gets imported.
    """
    yield from _fake_layout(monkeypatch, [FAKE_ROOT])


@pytest.fixture
def fake_native_sdk(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The fake native TorchNeuron (trn2/trn3) first on the import path."""
    yield from _fake_layout(monkeypatch, [FAKE_NATIVE, FAKE_ROOT])


def _fake_layout(monkeypatch: pytest.MonkeyPatch, roots: list[Path]) -> Iterator[Path]:
    for name in list(sys.modules):
        if name.split(".")[0] in FAKE_MODULES:
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "path", [str(r) for r in roots] + sys.path)
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    monkeypatch.setenv("NEURONPROBE_ALLOW_FAKE_SDK", "1")
    monkeypatch.delenv("FAKE_NEURON_FIXTURE", raising=False)
    monkeypatch.delenv("NEURONPROBE_NEURON_CACHE", raising=False)
    monkeypatch.delenv("FAKE_NEURON_HIDE", raising=False)
    yield roots[0]
    for name in list(sys.modules):  # what this test imported; monkeypatch then restores what was there
        if name.split(".")[0] in FAKE_MODULES:
            del sys.modules[name]


@pytest.fixture
def hide_modules(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """``hide_modules("torch_xla")``: make packages unfindable in this process (and its forked workers).

    The same finder as tests/fake_backend/hide/sitecustomize.py, which does it for subprocesses.
    """
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    spec = importlib.util.spec_from_file_location("fake_neuron_hide", FAKE_HIDE / "sitecustomize.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.delenv("FAKE_NEURON_HIDE", raising=False)
    spec.loader.exec_module(module)

    def hide(*names: str) -> None:
        for name in list(sys.modules):
            if name.split(".")[0] in names:
                monkeypatch.delitem(sys.modules, name)
        module.install(set(names))

    return hide


# --- the xla-cpu backend's environment (issue 10) ------------------------------------------------
# `make test` creates the real environment once per machine (`make xla-env`). The suite
# itself is hermetic: `--backend auto` must not pick up the machine's xla-cpu environment
# in tests that are about something else, so every test sees an empty NEURONPROBE_XLA_ENV
# and no NEURONPROBE_XLA_PYTHON, except through the `xla_env` fixture below.
_XLA_PYTHON_ENV = "NEURONPROBE_XLA_PYTHON"
_XLA_DIR_ENV = "NEURONPROBE_XLA_ENV"
# pytest-xdist's workers inherit the environment this module changed in the controller: the real values
# travel to them in one variable of their own, set before anything is changed.
_SAVED_REAL_XLA = "NEURONPROBE_TESTS_REAL_XLA"
if _SAVED_REAL_XLA in os.environ:
    _REAL_XLA = json.loads(os.environ[_SAVED_REAL_XLA])
else:
    _REAL_XLA = {k: os.environ.get(k, "") for k in (_XLA_PYTHON_ENV, _XLA_DIR_ENV, "XDG_CACHE_HOME")}
    os.environ[_SAVED_REAL_XLA] = json.dumps(_REAL_XLA)
os.environ[_XLA_DIR_ENV] = str(Path(__file__).resolve().parent / ".no-xla-env")
os.environ.pop(_XLA_PYTHON_ENV, None)
# The nightly result cache's key (issue 34.2): the suite never creates a key file in the user's own
# ~/.config nor uses their NEURONPROBE_CACHE_KEY; tests that need either set it themselves.
if "NEURONPROBE_TESTS_CONFIG_HOME" not in os.environ:
    import tempfile

    os.environ["NEURONPROBE_TESTS_CONFIG_HOME"] = tempfile.mkdtemp(prefix="neuronprobe-tests-config-")
os.environ["XDG_CONFIG_HOME"] = os.environ["NEURONPROBE_TESTS_CONFIG_HOME"]
os.environ.pop("NEURONPROBE_CACHE_KEY", None)


@pytest.fixture(scope="session")
def xla_python() -> str:
    """The xla-cpu interpreter `make xla-env` created; FAILS (never skips) with the reason when it is not usable."""
    from neuronprobe.backends.xla_env import find_env

    real = {k: v for k, v in _REAL_XLA.items() if v}
    environ = {**{k: v for k, v in os.environ.items() if k not in (_XLA_DIR_ENV, _XLA_PYTHON_ENV)}, **real}
    env = find_env(environ)
    if not env.usable:
        pytest.fail(f"the xla-cpu environment is not usable: {env.problem} (make test creates it with `make xla-env`)")
    assert env.python is not None
    return env.python


@pytest.fixture
def xla_env(xla_python: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """This test (and the CLI processes it starts) uses the real xla-cpu environment."""
    monkeypatch.setenv(_XLA_PYTHON_ENV, xla_python)
    return xla_python


# --- a good guest (issue 15) ----------------------------------------------------------------------
# neuronprobe runs inside the user's process (a notebook): no test may leave global state changed.
# Each test's state is compared before and after; a test that leaks fails at teardown, naming what.

_TRANSFORMERS = "transformers"
_HUB_CONSTANTS = "huggingface_hub.constants"
# torch's structured-trace handler removes itself on the first compile of the process (no TORCH_TRACE): torch's doing.
_TRACE_LOGGER = "torch.__trace"
# pytest's own per-test variable, and its log-capturing handlers (attached per test phase)
_PYTEST_LOGGING = "_pytest"
_PYTEST_ENV = "PYTEST_CURRENT_TEST"


def torch_log_settings() -> dict[str, object]:
    """What TORCH_LOGS / set_logs() decide: torch._logging's state and the level, propagation and handlers of torch's loggers."""
    import logging

    from torch._logging import _internal

    loggers = {
        name: (
            logger.level,
            logger.propagate,
            logger.disabled,
            tuple(sorted(type(h).__name__ for h in logger.handlers if not type(h).__module__.startswith(_PYTEST_LOGGING))),
        )
        for name, logger in list(logging.Logger.manager.loggerDict.items())
        if (name == "torch" or name.startswith("torch.")) and isinstance(logger, logging.Logger) and name != _TRACE_LOGGER
    }
    return {
        "log_state.levels": dict(_internal.log_state.log_qname_to_level),
        "log_state.artifacts": set(_internal.log_state.artifact_names),
        "loggers": loggers,
    }


def global_state() -> dict[str, object]:
    """The process-wide settings a library must not change behind the user's back."""
    import torch
    import torch._dynamo
    import torch.fx.experimental._config as fx_config

    state: dict[str, object] = {
        "torch.is_grad_enabled()": torch.is_grad_enabled(),
        "torch.is_inference_mode_enabled()": torch.is_inference_mode_enabled(),
        "torch.get_default_dtype()": torch.get_default_dtype(),
        "torch.get_default_device()": torch.get_default_device(),
        "torch._dynamo.config.recompile_limit": torch._dynamo.config.recompile_limit,
        "torch._dynamo.config.accumulated_recompile_limit": torch._dynamo.config.accumulated_recompile_limit,
        "torch.fx.experimental._config.use_duck_shape": fx_config.use_duck_shape,
        "os.environ": {k: v for k, v in os.environ.items() if k != _PYTEST_ENV},
        "sys.stdout": sys.stdout,
        "sys.stderr": sys.stderr,
        "sys.getprofile()": sys.getprofile(),
        **{f"torch log settings: {k}": v for k, v in torch_log_settings().items()},
    }
    if _TRANSFORMERS in sys.modules:
        state["transformers verbosity"] = sys.modules[_TRANSFORMERS].logging.get_verbosity()
    if _HUB_CONSTANTS in sys.modules:
        state["huggingface_hub.constants.HF_HUB_OFFLINE"] = sys.modules[_HUB_CONSTANTS].HF_HUB_OFFLINE
    return state


def leaks(before: dict[str, object], after: dict[str, object]) -> list[str]:
    """What changed between two states, one line each; entries that only appeared (a logger created by a first import) are no change."""
    out: list[str] = []
    for key, old in before.items():
        new = after.get(key)
        if new == old:
            continue
        if isinstance(old, dict) and isinstance(new, dict):
            changed = sorted(k for k in set(old) & set(new) if old[k] != new[k]) + sorted(set(old) - set(new))
            if key == "os.environ":
                changed += sorted(set(new) - set(old))
            if not changed:
                continue  # only new entries (a logger created by a first import) are no leak
            first = changed[0]
            out.append(f"{key}: {', '.join(map(str, changed[:5]))} (e.g. {first}: {old.get(first)!r} -> {new.get(first)!r})")
        else:
            out.append(f"{key}: {old!r} -> {new!r}")
    return out


@pytest.fixture(scope="session", autouse=True)
def fork_server_preload_imported() -> None:
    """Import, once per test process, what the nightly's fork server imports before its first worker
    (``process/forkserver.PRELOAD``: torch, dynamo, export, onnx, transformers, the pipeline).

    The server is forked from the command, so it imports only what the command has not: in a command that
    runs one night that is the whole list, once, which is the server's point. A test process runs a night
    in dozens of tests, and each new server imported the list again (about 1 s a night: the
    result-cache trust tests took 38.6 s, 28.2 s with the list imported). The servers still start, fork
    and supervise every worker as before; only their repeated imports are gone. Both xdist workers import
    most of the list anyway for the capture tests. Session-scoped, so it runs before any test's global-state
    snapshot (``leaves_no_global_state``)."""
    from neuronprobe.process.forkserver import PRELOAD

    for name in PRELOAD:
        importlib.import_module(name)


@pytest.fixture(autouse=True)
def leaves_no_global_state() -> Iterator[None]:
    """Fail the test that changes torch's grad mode, dtype, dynamo config, log settings, the environment..."""
    before = global_state()
    yield
    changed = leaks(before, global_state())
    if changed:
        pytest.fail("the test leaked global state: " + "; ".join(changed), pytrace=False)


# --- headless Chromium (the browser tests) ----------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """One headless Chromium per test module; FAILS (never skips) with the install command when it is missing."""
    from chromium_cdp import Browser, ChromiumMissing

    try:
        b = Browser()
    except ChromiumMissing as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield b
    finally:
        b.close()
