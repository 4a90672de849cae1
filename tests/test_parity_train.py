"""parity --train: one training step in fp32 and under an emulated precision, the first parameter group that differs named."""

from __future__ import annotations

import json

import pytest
from helpers import MODELS, refused
from typer.testing import CliRunner

from neuronprobe.cli import app
from neuronprobe.loaders.resolve import load_model
from neuronprobe.parity.precision import Precision
from neuronprobe.parity.train import train_parity

MODEL = MODELS / "parity_train_group.py"


def test_bf16_matmul_auto_cast_names_fc2_first_in_backward_order():
    result = train_parity(load_model(str(MODEL)), Precision(auto_cast="matmult", auto_cast_type="bf16"))
    assert [g.group for g in result.groups] == ["head", "fc2", "fc1"]  # the order autograd finished them
    head, fc2, fc1 = result.groups
    assert result.first_exceeding == "fc2" and fc2.exceeds and fc2.grad_rel_error > 0.5
    assert not head.exceeds and not fc1.exceeds and head.grad_rel_error < 1e-3 and fc2.parameters == ["fc2.bias", "fc2.weight"]
    assert result.tolerance == 1e-2 and result.loss_ref == pytest.approx(350.105, abs=1e-3) and result.loss == 350.0
    assert fc2.update_rel_error > 0.5  # AdamW's first step follows the gradient's sign: fc2's weight does not move


def test_without_auto_cast_no_group_differs():
    result = train_parity(load_model(str(MODEL)), Precision())
    assert result.first_exceeding is None and all(g.grad_rel_error == 0.0 and not g.exceeds for g in result.groups)


def test_the_cli_names_the_group_and_writes_it_to_the_report(tmp_path):
    out = tmp_path / "r.json"
    result = CliRunner().invoke(app, ["parity", str(MODEL), "--train", "--auto-cast", "matmult", "--json", str(out), "--no-html"])
    assert result.exit_code == 0, result.output
    assert "first parameter group whose gradient differs: fc2" in " ".join(result.output.split())
    [train] = json.loads(out.read_text())["parity"]["train"]
    assert train["first_exceeding"] == "fc2" and [g["group"] for g in train["groups"]] == ["head", "fc2", "fc1"]


def test_training_options_without_train_are_refused(tmp_path):
    line = refused(["parity", str(MODEL), "--train-tolerance", "0.1", "--json", str(tmp_path / "r.json")], MODEL)
    assert line == "error: --optimizer, --optimizer-impl and --train-tolerance describe the training step: add --train"
