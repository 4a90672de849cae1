"""--train hands train_step(model, optimizer, batch) exactly what get_example_inputs() returned (issue 29, point 7)."""

from __future__ import annotations

import json

import pytest
import torch
from helpers import MODELS
from typer.testing import CliRunner

from neuronprobe.cli import app
from neuronprobe.loaders.resolve import LoadedModel, inputs_form, load_model_file, train_batch

runner = CliRunner()


def test_a_one_element_tuple_reaches_train_step_as_a_tuple(tmp_path):
    model = MODELS / "train_one_input_batch.py"
    result = runner.invoke(app, ["analyze", str(model), "--train", "--backend", "static", "-o", str(tmp_path), "--no-html"])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "train_one_input_batch.json").read_text())
    assert report["train"]["train_step"] is True
    phases = {row["phase"] for row in report["ops"]}
    assert {"forward", "backward", "optimizer"} <= phases  # the step ran through: (x,) = batch unpacked


X, Y = torch.zeros(2), torch.ones(2)


@pytest.mark.parametrize(
    ("returned", "expected"),
    [((X,), (X,)), ((X, Y), (X, Y)), ([X, Y], [X, Y]), ([X], [X]), (X, X), ({"x": X}, {"x": X})],
    ids=["one-tuple", "tuple", "list", "one-list", "tensor", "dict"],
)
def test_the_batch_keeps_the_form_get_example_inputs_returned(returned, expected):
    from neuronprobe.loaders.resolve import split_inputs

    args, kwargs = split_inputs(returned, "here")
    loaded = LoadedModel(name="m", source="m.py", module=None, args=args, kwargs=kwargs, inputs_form=inputs_form(returned))
    batch = train_batch(loaded, args, kwargs)
    assert type(batch) is type(expected)
    if isinstance(expected, dict):
        assert batch.keys() == expected.keys()
    elif isinstance(expected, (tuple, list)):
        assert len(batch) == len(expected) and all(a is b for a, b in zip(batch, expected, strict=True))
    else:
        assert batch is expected


def test_a_model_file_records_the_form_of_its_inputs():
    assert load_model_file(MODELS / "train_one_input_batch.py").inputs_form == "tuple"
