"""Frozen references through `neuronprobe parity`, with real files: save, compare, refuse, gate.

The model file is copied into the test's folder, so that a checkpoint written beside it
changes its weights without changing the file (and its hash), as a new checkpoint would.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
import torch
from helpers import MODELS, refused
from typer.testing import CliRunner

from neuronprobe.cli import app
from neuronprobe.report.html import render_html
from neuronprobe.report.model import load_report

SOURCE = MODELS / "parity_reference.py"


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "classifier.py"
    shutil.copy(SOURCE, path)
    return path


def _run(*args: str | Path) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["parity", *map(str, args), "--auto-cast", "none", "--no-html"])
    return result.exit_code, " ".join(result.output.split())


def _change_a_weight(model: Path, module: str = "block.0", by: float = 0.05) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("changed_classifier", model)
    assert spec is not None and spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    state = loaded.get_model().state_dict()
    state[f"{module}.weight"] += by
    torch.save(state, model.with_name("parity_reference_weights.pt"))


def test_save_then_compare_clean_then_a_changed_weight_fails_at_its_module(model, tmp_path):
    ref = tmp_path / "ref"
    code, out = _run(model, "--save-reference", ref, "--per-module", "--json", tmp_path / "save.json")
    assert code == 0, out
    manifest = json.loads((ref / "manifest.json").read_text())
    assert manifest["backend"] == "cpu-fp32" and manifest["fake"] is False and manifest["dtype"] == "float32"
    assert manifest["model"]["hash"] == "sha256:" + hashlib.sha256(model.read_bytes()).hexdigest()
    assert [t["name"] for t in manifest["tensors"]] == ["output", "embed", "block.0", "block.1", "block", "head", ""]
    assert manifest["versions"]["torch"] == torch.__version__ and manifest["tolerances"]["float32"] == {"rtol": 1e-5, "atol": 1e-7}
    assert sorted(p.name for p in ref.iterdir()) == ["manifest.json", "outputs.safetensors"]

    code, out = _run(model, "--reference", ref, "--fail-on", "parity", "--json", tmp_path / "clean.json")
    assert code == 0, out
    assert f"matches the cpu-fp32 reference {ref}: 7 tensor(s) within tolerance" in out
    frozen = json.loads((tmp_path / "clean.json").read_text())["parity"]["frozen"]
    assert frozen["passed"] is True and frozen["first_mismatch"] is None

    _change_a_weight(model)
    code, out = _run(model, "--reference", ref, "--fail-on", "parity", "--json", tmp_path / "changed.json")
    assert code == 1, out
    assert f"first module that differs: block.0 ({model}:18)" in out and "gate failed: parity" in out
    frozen = json.loads((tmp_path / "changed.json").read_text())["parity"]["frozen"]
    assert frozen["first_mismatch_module"] == "block.0" and frozen["passed"] is False
    embed = next(t for t in frozen["tensors"] if t["name"] == "embed")
    assert embed["passed"] is True  # before the changed module, everything still matches
    page = render_html(load_report(str(tmp_path / "changed.json")))
    assert "<h3>Frozen reference</h3>" in page and "first module that differs: block.0" in page


def test_a_changed_model_file_is_refused(model, tmp_path):
    ref = tmp_path / "ref"
    assert _run(model, "--save-reference", ref, "--json", tmp_path / "a.json")[0] == 0
    model.write_text(model.read_text() + "# one more line\n")
    line = refused(["parity", str(model), "--reference", str(ref), "--json", str(tmp_path / "b.json")], model, ref / "manifest.json")
    assert "the model changed since the reference was saved (the model file classifier.py:" in line and "never recomputed" in line
    assert not (tmp_path / "b.json").exists()


def test_a_missing_reference_is_exit_2_and_nothing_is_written(model, tmp_path):
    line = refused(["parity", str(model), "--reference", str(tmp_path / "nowhere"), "--json", str(tmp_path / "r.json")], model)
    assert (
        line
        == f"error: --reference {tmp_path / 'nowhere'}: no such folder; a frozen reference is never recomputed: save one first with --save-reference {tmp_path / 'nowhere'}"
    )
    assert not (tmp_path / "r.json").exists() and not (tmp_path / "nowhere").exists()


def test_an_existing_reference_is_not_overwritten(model, tmp_path):
    ref = tmp_path / "ref"
    assert _run(model, "--save-reference", ref, "--json", tmp_path / "a.json")[0] == 0
    before = (ref / "outputs.safetensors").read_bytes()
    _change_a_weight(model)
    line = refused(["parity", str(model), "--save-reference", str(ref), "--json", str(tmp_path / "b.json")], model)
    assert "already holds a reference" in line and (ref / "outputs.safetensors").read_bytes() == before


def test_fail_on_parity_without_a_reference_is_exit_2(model, tmp_path):
    line = refused(["parity", str(model), "--fail-on", "parity", "--json", str(tmp_path / "r.json")], model)
    assert "--fail-on parity needs a frozen reference" in line


def test_the_device_path_saves_and_compares_the_devices_outputs_and_cross_backend_is_reported_not_gated(model, tmp_path, fake_sdk):
    device_ref, cpu_ref = tmp_path / "device-ref", tmp_path / "cpu-ref"
    code, out = _run(model, "--backend", "neuron", "--save-reference", device_ref, "--json", tmp_path / "a.json")
    assert code == 0, out
    manifest = json.loads((device_ref / "manifest.json").read_text())
    assert manifest["backend"] == "neuron" and manifest["fake"] is True and manifest["versions"]["neuronx-cc"].endswith("+fake")
    code, out = _run(model, "--backend", "neuron", "--reference", device_ref, "--fail-on", "parity", "--json", tmp_path / "b.json")
    assert code == 0 and "matches the neuron reference" in out, out

    assert _run(model, "--save-reference", cpu_ref, "--json", tmp_path / "c.json")[0] == 0
    line = refused(["parity", str(model), "--backend", "neuron", "--reference", str(cpu_ref), "--json", str(tmp_path / "d.json")], model)
    assert "produced on cpu-fp32, this run is on neuron (the test fake)" in line and "--cross-backend" in line

    _change_a_weight(model)  # the device now differs from both references
    code, out = _run(model, "--backend", "neuron", "--reference", device_ref, "--fail-on", "parity", "--json", tmp_path / "e.json")
    assert code == 1 and "differs from the neuron reference" in out, out
    code, out = _run(model, "--backend", "neuron", "--reference", cpu_ref, "--cross-backend", "--fail-on", "parity", "--json", tmp_path / "f.json")
    assert code == 0, out
    assert "differs from the cpu-fp32 reference" in out and "reported, not gated" in out
    frozen = json.loads((tmp_path / "f.json").read_text())["parity"]["frozen"]
    assert frozen["cross_backend"] is True and frozen["passed"] is False and frozen["compared_fake"] is True


def test_the_native_torchneuron_device_path_saves_and_compares_too(model, tmp_path, fake_native_sdk):
    ref = tmp_path / "native-ref"
    code, out = _run(model, "--backend", "neuron", "--save-reference", ref, "--json", tmp_path / "a.json")
    assert code == 0, out
    manifest = json.loads((ref / "manifest.json").read_text())
    assert manifest["backend"] == "neuron" and manifest["fake"] is True and [t["name"] for t in manifest["tensors"]] == ["output"]
    code, out = _run(model, "--backend", "neuron", "--reference", ref, "--fail-on", "parity", "--json", tmp_path / "b.json")
    assert code == 0 and "matches the neuron reference" in out, out


def test_per_module_outputs_are_not_asked_of_a_device(model, tmp_path, fake_sdk):
    line = refused(
        ["parity", str(model), "--backend", "neuron", "--save-reference", str(tmp_path / "ref"), "--per-module", "--json", str(tmp_path / "r.json")], model
    )
    assert "--per-module: a Neuron device returns the model's final outputs only" in line
