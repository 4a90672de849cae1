"""Frozen references, the library side: what a reference folder holds, what damage is refused, the tolerances.

The round trip through `neuronprobe parity` is in tests/test_parity_reference.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from neuronprobe.errors import InputError
from neuronprobe.parity.reference import (
    MANIFEST_NAME,
    TENSORS_NAME,
    RunIdentity,
    compare_reference,
    inputs_hash,
    load_reference,
    model_hash,
    reference_files,
)
from neuronprobe.vocabulary import ReferenceBackend

IDENTITY = RunIdentity("m.py", "sha256:" + "a" * 64, "the model file m.py", "sha256:" + "b" * 64, ReferenceBackend.CPU_FP32, False, {"torch": "2.13.0"})


def _save(folder: Path, outputs: dict, modules: dict | None = None, **tol: float) -> Path:
    folder.mkdir()
    for name, data in reference_files(outputs, IDENTITY, modules=modules, **tol):
        (folder / name).write_bytes(data)
    return folder


def test_the_manifest_names_backend_hashes_tolerances_and_tensors_in_order(tmp_path):
    ref = _save(tmp_path / "ref", {"output": torch.ones(2, 3)}, {"fc1": torch.zeros(2, 4, dtype=torch.bfloat16), "fc2": torch.ones(2, 3)})
    manifest = json.loads((ref / MANIFEST_NAME).read_text())
    assert manifest["backend"] == "cpu-fp32" and manifest["model"]["hash"] == IDENTITY.model_hash and manifest["inputs"]["hash"] == IDENTITY.inputs_hash
    assert manifest["tolerances"] == {"float32": {"rtol": 1e-5, "atol": 1e-7}, "bfloat16": {"rtol": 1e-2, "atol": 1e-3}}
    assert [(t["kind"], t["name"]) for t in manifest["tensors"]] == [("output", "output"), ("module", "fc1"), ("module", "fc2")]
    assert manifest["per_module"] is True and manifest["versions"] == {"torch": "2.13.0"}


def test_tensors_replaced_without_their_manifest_are_refused(tmp_path):
    ref = _save(tmp_path / "ref", {"output": torch.ones(3)})
    other = reference_files({"output": torch.zeros(3)}, IDENTITY)
    (ref / TENSORS_NAME).write_bytes(other[0][1])
    with pytest.raises(InputError, match="sha256 differs"):
        load_reference(ref)


@pytest.mark.parametrize(
    "damage, words",
    [
        (lambda m: m.update(format="other"), "not a neuronprobe reference manifest"),
        (lambda m: m.update(format_version=99), "format version 99"),
        (lambda m: m.update(backend="gpu"), "unknown backend 'gpu'"),
        (lambda m: m["tolerances"]["float32"].update(rtol=-1), "rtol and atol >= 0"),
        (lambda m: m.pop("inputs"), "field 'inputs' is missing"),
    ],
)
def test_a_damaged_manifest_is_one_sentence(tmp_path, damage, words):
    ref = _save(tmp_path / "ref", {"output": torch.ones(3)})
    manifest = json.loads((ref / MANIFEST_NAME).read_text())
    damage(manifest)
    (ref / MANIFEST_NAME).write_text(json.dumps(manifest))
    with pytest.raises(InputError, match=words):
        load_reference(ref)


@pytest.mark.parametrize(
    "dtype, rtol, atol",
    [(torch.float32, 1e-5, 1e-7), (torch.float16, 1e-3, 1e-5), (torch.bfloat16, 1e-2, 1e-3)],
)
def test_the_per_dtype_tolerance_is_the_boundary(tmp_path, dtype, rtol, atol):
    expected = torch.tensor([4.0, -2.0, 1.0], dtype=torch.float64)
    ref = _save(tmp_path / "ref", {"output": expected.to(dtype)})
    stored = load_reference(ref).tensors["output"].double()
    bound = atol + rtol * stored.abs()
    inside = compare_reference(ref, {"output": stored + 0.9 * bound}, IDENTITY)  # compared in float64: no rounding
    outside = compare_reference(ref, {"output": stored + 1.1 * bound}, IDENTITY)
    assert inside.passed and inside.tensors[0].rtol == rtol and inside.tensors[0].atol == atol
    assert not outside.passed and outside.tensors[0].mismatched == 3 and "Mismatched elements: 3 / 3" in outside.tensors[0].detail


def test_overrides_replace_the_saved_tolerances(tmp_path):
    ref = _save(tmp_path / "ref", {"output": torch.ones(4)}, rtol=0.5)
    assert json.loads((ref / MANIFEST_NAME).read_text())["tolerances"]["float32"] == {"rtol": 0.5, "atol": 1e-7}
    assert compare_reference(ref, {"output": torch.full((4,), 1.4)}, IDENTITY).passed
    assert not compare_reference(ref, {"output": torch.full((4,), 1.4)}, IDENTITY, rtol=0.1).passed


def test_integer_outputs_must_be_equal_and_a_top1_change_fails_within_tolerance(tmp_path):
    ref = _save(tmp_path / "ref", {"output[0]": torch.tensor([[1.0, 1.0 + 2e-6], [0.0, 1.0]]), "output[1]": torch.tensor([3, 4])})
    near_tie = compare_reference(ref, {"output[0]": torch.tensor([[1.0 + 2e-6, 1.0], [0.0, 1.0]]), "output[1]": torch.tensor([3, 4])}, IDENTITY)
    assert all(t.passed for t in near_tie.tensors)  # 2e-6 is inside rtol 1e-5 ...
    assert not near_tie.passed and near_tie.top1[0].changed == 1 and near_tie.top1[0].first_changed == 0  # ... but the arg-max moved
    assert "top-1 changed at 1 of 2 position(s) of output[0]" in near_tie.summary
    ids = compare_reference(ref, {"output[0]": torch.tensor([[1.0, 1.0 + 2e-6], [0.0, 1.0]]), "output[1]": torch.tensor([3, 5])}, IDENTITY)
    assert not ids.passed and ids.first_mismatch == "output[1]" and ids.tensors[1].mismatched == 1


def test_the_inputs_hash_sees_one_element_and_the_dtype():
    x = torch.arange(6.0).reshape(2, 3)
    base = inputs_hash((x,), {})
    assert inputs_hash((x.clone(),), {}) == base
    y = x.clone()
    y[1, 2] += 1
    assert inputs_hash((y,), {}) != base
    assert inputs_hash((x.to(torch.float64),), {}) != base
    assert inputs_hash((), {"x": x}) != base


def test_an_hf_model_is_hashed_by_its_config_without_the_transformers_version():
    from transformers import GPT2Config, GPT2LMHeadModel

    from neuronprobe.loaders.resolve import LoadedModel

    def loaded(**fields: int) -> LoadedModel:
        config = GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=16, n_positions=8, **fields)
        wrapper = torch.nn.Module()
        wrapper.model = GPT2LMHeadModel(config)  # neuronprobe's hf: loader wraps the transformers model
        return LoadedModel(name="gpt2", source="hf:gpt2", module=wrapper)

    one = loaded()
    digest, what = model_hash(one)
    assert what == "the config's canonical JSON"
    one.module.model.config.transformers_version = "0.0.1"
    assert model_hash(one)[0] == digest
    assert model_hash(loaded(n_inner=64))[0] != digest


def test_other_inputs_or_another_backend_are_refused_and_cross_backend_is_reported_not_gated(tmp_path):
    import dataclasses

    ref = _save(tmp_path / "ref", {"output": torch.ones(3)})
    other_inputs = dataclasses.replace(IDENTITY, inputs_hash="sha256:" + "c" * 64)
    with pytest.raises(InputError, match="the inputs changed since the reference was saved"):
        compare_reference(ref, {"output": torch.ones(3)}, other_inputs)
    device = dataclasses.replace(IDENTITY, backend=ReferenceBackend.NEURON)
    with pytest.raises(InputError, match=r"produced on cpu-fp32, this run is on neuron; .* add --cross-backend"):
        compare_reference(ref, {"output": torch.ones(3)}, device)
    crossed = compare_reference(ref, {"output": torch.full((3,), 2.0)}, device, cross_backend=True)
    assert crossed.cross_backend and not crossed.passed and not crossed.gate_fails and "reported, not gated" in crossed.summary


def test_the_parity_gate_fails_a_gated_mismatch_passes_a_cross_backend_one_and_needs_a_reference(tmp_path):
    import dataclasses

    from neuronprobe.gates import Gates, check_gates, evaluate_gates
    from neuronprobe.report.model import ParitySection, Report

    gates = check_gates(Gates(fail_on=("parity",)), lambda: set())  # a gate id: no rule table needed
    ref = _save(tmp_path / "ref", {"output": torch.ones(3)})
    report = Report(model="m.py", target="trn1", parity=ParitySection())
    with pytest.raises(InputError, match="--fail-on parity needs a frozen reference"):
        evaluate_gates(report, gates)
    report.parity.frozen = compare_reference(ref, {"output": torch.ones(3)}, IDENTITY)
    assert evaluate_gates(report, gates) == []
    report.parity.frozen = compare_reference(ref, {"output": torch.zeros(3)}, IDENTITY)
    [failure] = evaluate_gates(report, gates)
    assert failure.message.startswith("parity: differs from the cpu-fp32 reference") and failure.count == 1
    device = dataclasses.replace(IDENTITY, backend=ReferenceBackend.NEURON)
    report.parity.frozen = compare_reference(ref, {"output": torch.zeros(3)}, device, cross_backend=True)
    assert evaluate_gates(report, gates) == []


def test_a_user_rule_may_not_be_called_parity(tmp_path):
    from neuronprobe.support import load_table, with_user_rules

    path = tmp_path / "rules.json"
    path.write_text(json.dumps({"rules": [{"id": "parity", "verdict": "cpu_fallback", "message": "m", "fix": "f", "ops": ["addmm"], "provenance": "p"}]}))
    with pytest.raises(InputError, match=f"{path}: rule 'parity': the id is"):
        with_user_rules(load_table(), path)
