"""Detection of the Neuron stack, and backend resolution: never mistake a placeholder or the fake for hardware."""

from __future__ import annotations

import sys

import pytest
from conftest import FAKE_NATIVE, FAKE_PLACEHOLDER, FAKE_ROOT

from neuronprobe.backends import resolve_backend
from neuronprobe.backends.detect import detect
from neuronprobe.errors import BackendUnavailable


@pytest.fixture
def clean_path(monkeypatch, hide_modules):
    """No Neuron package findable, whatever this host has installed."""
    monkeypatch.delenv("NEURONPROBE_ALLOW_FAKE_SDK", raising=False)
    hide_modules("torch_neuronx", "torch_xla", "neuronxcc", "libneuronxla")
    return monkeypatch


@pytest.fixture
def only_torch_neuronx_from(monkeypatch, hide_modules):
    """``only_torch_neuronx_from(folder)``: torch_neuronx comes from ``folder``; no other Neuron package is findable."""
    monkeypatch.delenv("NEURONPROBE_ALLOW_FAKE_SDK", raising=False)
    hide_modules("torch_xla", "neuronxcc", "libneuronxla")

    def use(folder):
        for name in list(sys.modules):
            if name.split(".")[0] == "torch_neuronx":
                monkeypatch.delitem(sys.modules, name)
        monkeypatch.setattr(sys, "path", [str(folder), *sys.path])

    return use


def test_nothing_installed(clean_path):
    d = detect()
    assert (d.stack, d.usable, d.is_real) == ("none", False, False)
    assert "torch-neuronx is not installed" in d.problem
    assert "pip.repos.neuron.amazonaws.com" in d.hint
    assert d.versions["torch"]


def test_the_xla_era_fake_is_usable_but_never_real(fake_sdk):
    d = detect()
    assert (d.stack, d.fake, d.usable, d.is_real) == ("xla", True, True, False)
    assert d.versions["torch-neuronx"] == "2.9.0.2.15.0+fake"
    assert d.versions["neuronx-cc"] == "2.26.0.0+fake"
    assert d.versions["torch-xla"] == "2.9.0+fake"
    assert "torch_neuronx" not in sys.modules, "detection must not import the SDK"


def test_the_native_torchneuron_fake(fake_native_sdk):
    d = detect()
    assert (d.stack, d.fake, d.usable) == ("native", True, True)
    assert d.versions["torch-neuronx"] == "2.14.3.0+fake"


def test_the_pypi_placeholder_is_recognised_without_importing_it(only_torch_neuronx_from):
    only_torch_neuronx_from(FAKE_PLACEHOLDER)
    d = detect()
    assert d.stack == "placeholder" and not d.usable
    assert "PyPI placeholder" in d.problem and "WRONG PACKAGE" in d.problem
    assert "pip uninstall torch-neuronx" in d.hint and "pip.repos.neuron.amazonaws.com" in d.hint
    assert d.versions["torch-neuronx"] == "1.0"
    assert "torch_neuronx" not in sys.modules


def test_a_partial_stack_without_torch_xla(fake_sdk, hide_modules):
    hide_modules("torch_xla")
    d = detect()
    assert d.stack == "partial" and not d.usable
    assert d.problem == "the XLA-era torch-neuronx is installed but torch-xla is missing"


def test_a_torch_neuronx_of_unknown_shape_is_reported_not_crashed_on(only_torch_neuronx_from, tmp_path):
    package = tmp_path / "torch_neuronx"
    package.mkdir()
    (package / "__init__.py").write_text("__version__ = '0.0.1'\n")
    only_torch_neuronx_from(tmp_path)
    d = detect()
    assert d.stack == "unknown" and not d.usable
    assert "exports neither trace/analyze" in d.problem


def test_a_finder_that_raises_does_not_crash_detection(clean_path):
    class Broken:
        def find_spec(self, fullname, path=None, target=None):
            if fullname == "neuronxcc":
                raise RuntimeError("corrupt installation")
            return None

    clean_path.setattr(sys, "meta_path", [Broken(), *sys.meta_path])
    d = detect()
    assert d.stack == "none"
    assert any("neuronxcc: could not be located (RuntimeError: corrupt installation)" in n for n in d.notes)


# --- resolution --------------------------------------------------------------------------


def test_require_neuron_refuses_the_fake_even_when_it_is_allowed(fake_sdk):
    with pytest.raises(BackendUnavailable, match=r"test fake .* not hardware"):
        resolve_backend("auto", "neuron")


def test_require_neuron_refuses_the_placeholder_and_says_how_to_install(only_torch_neuronx_from):
    only_torch_neuronx_from(FAKE_PLACEHOLDER)
    with pytest.raises(BackendUnavailable) as info:
        resolve_backend("static", "neuron")
    message = str(info.value)
    assert message.startswith("--require-backend neuron: torch-neuronx is the PyPI placeholder")
    assert "pip.repos.neuron.amazonaws.com" in message and "\n" not in message


def test_require_neuron_refuses_nothing(clean_path):
    with pytest.raises(BackendUnavailable, match=r"^--require-backend neuron: torch-neuronx is not installed"):
        resolve_backend("auto", "neuron")


def test_require_neuron_refuses_a_partial_stack(fake_sdk, hide_modules):
    hide_modules("torch_xla")
    with pytest.raises(BackendUnavailable, match=r"torch-xla is missing"):
        resolve_backend("neuron", "neuron")


def test_auto_uses_the_fake_only_when_tests_allow_it(fake_sdk, monkeypatch):
    resolved = resolve_backend("auto")
    assert resolved.live is not None
    assert (resolved.info.name, resolved.info.kind, resolved.info.fake) == ("neuron", "xla", True)
    assert "not hardware" in resolved.info.detail
    assert resolved.info.versions["neuronx-cc"] == "2.26.0.0+fake"

    monkeypatch.delenv("NEURONPROBE_ALLOW_FAKE_SDK")
    resolved = resolve_backend("auto")
    assert resolved.live is None and resolved.info.name == "static"
    assert "test fake Neuron SDK was found but not used" in resolved.info.detail
    with pytest.raises(BackendUnavailable, match=r"NEURONPROBE_ALLOW_FAKE_SDK=1"):
        resolve_backend("neuron")


def test_auto_falls_back_to_static_and_says_why(clean_path):
    resolved = resolve_backend("auto")
    assert resolved.live is None
    assert resolved.info.detail.startswith("predicted from the bundled support table; no Neuron SDK found; xla-cpu not used: ")
    with pytest.raises(BackendUnavailable, match=r"^--backend neuron: torch-neuronx is not installed"):
        resolve_backend("neuron")


def test_static_is_static_whatever_is_installed(fake_sdk):
    resolved = resolve_backend("static")
    assert resolved.live is None and resolved.info.name == "static"


def test_fake_layouts_exist_where_the_tests_expect_them():
    assert (FAKE_ROOT / "torch_neuronx" / "__init__.py").is_file()
    assert (FAKE_NATIVE / "torch_neuronx" / "__init__.py").is_file()
    assert "WRONG PACKAGE" in (FAKE_PLACEHOLDER / "torch_neuronx" / "__init__.py").read_text()
