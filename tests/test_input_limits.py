"""Inputs are validated before any work: one line naming the field or the line (never its content), exit 2."""

from __future__ import annotations

import json

import pytest
from helpers import TESTS, marker_line
from typer.testing import CliRunner
from warm_torch import warm_export  # noqa: F401  (an autouse fixture)

from neuronprobe.cli import app
from neuronprobe.errors import InputError
from neuronprobe.limits import MAX_BATCH_SIZE, MAX_DIM, MAX_MODULE_COUNT, MAX_SEQ_LEN
from neuronprobe.loaders.resolve import build_hf_config

runner = CliRunner()
HOSTILE = TESTS / "hostile"


def _one_line_error(args: list[str]) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert "internal error" not in result.output and "Traceback" not in result.output
    return lines[0]


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("n_layer=abc", "--set n_layer=abc: hf:gpt2's n_layer takes a whole number, e.g. --set n_layer=12"),
        ("n_layer=1e9", "--set n_layer=1e9: hf:gpt2's n_layer takes a whole number"),
        ("n_layer=[1,2]", "--set n_layer=[1,2]: hf:gpt2's n_layer takes a whole number"),
        ("n_layer=2.5", "--set n_layer=2.5: hf:gpt2's n_layer takes a whole number"),
        ("n_layer=NaN", "--set n_layer=NaN: hf:gpt2's n_layer must be a finite number"),
        ("n_layer=-1", "--set n_layer=-1: hf:gpt2's n_layer is a count or a size and must be at least 1"),
        ("vocab_size=0", "--set vocab_size=0: hf:gpt2's vocab_size is a count or a size and must be at least 1"),
        ("n_layer=1000000000", f"n_layer is above neuronprobe's ceiling of {MAX_MODULE_COUNT}"),
        ("use_cache=maybe", "--set use_cache=maybe: hf:gpt2's use_cache takes true or false"),
        ("resid_pdrop=Infinity", "hf:gpt2's resid_pdrop must be a finite number"),
    ],
)
def test_set_values_are_checked_against_the_config_field(override, message):
    with pytest.raises(InputError) as info:
        build_hf_config("gpt2", [override])
    assert message in str(info.value) and str(info.value).startswith(f"--set {override}: ")


def test_valid_set_values_still_apply():
    config = build_hf_config("gpt2", ["n_layer=2", "resid_pdrop=0", "activation_function=relu"])
    assert (config.n_layer, config.resid_pdrop, config.activation_function) == (2, 0.0, "relu")


def test_a_bad_set_value_is_a_user_error_on_the_command_line(tmp_path):
    line = _one_line_error(["analyze", "hf:gpt2", "--set", "n_layer=abc", "-o", str(tmp_path)])
    assert line == "error: --set n_layer=abc: hf:gpt2's n_layer takes a whole number, e.g. --set n_layer=12"


def test_lengths_above_the_models_max_positions_name_the_line_not_its_content(tmp_path):
    lengths = tmp_path / "lengths.txt"
    lengths.write_text("12\n# a comment\n2000\n30\n")
    before = lengths.read_bytes()
    line = _one_line_error(["analyze", "hf:gpt2", "--lengths", str(lengths), "-o", str(tmp_path / "r")])
    assert line == (
        f"error: {lengths} line 3: a length above 1024 (hf:gpt2's config.max_position_embeddings); "
        "drop the longer requests, or analyse a model configured for them"
    )
    assert "2000" not in line and lengths.read_bytes() == before


def test_without_a_config_lengths_are_bounded_by_the_documented_ceiling(tmp_path):
    lengths = tmp_path / "lengths.txt"
    lengths.write_text(f"8\n{MAX_SEQ_LEN + 1}\n")
    line = _one_line_error(["analyze", str(HOSTILE / "no_config.py"), "--lengths", str(lengths), "-o", str(tmp_path / "r")])
    assert line.startswith(f"error: {lengths} line 2: a length above {MAX_SEQ_LEN} (neuronprobe's ceiling)")


def test_a_file_that_is_not_lengths_is_never_quoted(tmp_path):
    secret = tmp_path / "passwd"
    secret.write_text("root:x:0:0:root:/root:/bin/bash\n")
    line = _one_line_error(["buckets", str(secret)])
    assert line == f"error: {secret} line 1: not an integer length"


def test_batch_sizes_and_shapes_are_bounded(tmp_path):
    lengths = tmp_path / "lengths.txt"
    lengths.write_text("8\n")
    model = str(HOSTILE / "no_config.py")
    line = _one_line_error(["analyze", model, "--lengths", str(lengths), "--batch-sizes", f"1,{MAX_BATCH_SIZE + 1}"])
    assert line == f"error: --batch-sizes: a batch size above {MAX_BATCH_SIZE} (neuronprobe's ceiling)"
    shapes = tmp_path / "shapes.jsonl"
    shapes.write_text('{"ids": [1, 8]}\n' + json.dumps({"ids": [1, MAX_DIM + 1]}) + "\n")
    line = _one_line_error(["analyze", model, "--shapes", str(shapes), "-o", str(tmp_path / "r")])
    assert f"{shapes} line 2" in line and f"a size above {MAX_DIM}" in line and str(MAX_DIM + 1) not in line


def test_max_buckets_is_bounded_by_what_the_solver_does_in_the_documented_time(tmp_path):
    lengths = tmp_path / "lengths.txt"
    lengths.write_text("5\n9\n")
    line = _one_line_error(["buckets", str(lengths), "--max-buckets", "1000000"])
    assert line.startswith("error: --max-buckets 1000000: at most 256")


@pytest.mark.parametrize("name", ["returns_none.py", "returns_string.py"])
def test_a_forward_must_return_a_tensor(tmp_path, name):
    model = HOSTILE / name
    line = _one_line_error(["analyze", str(model), "-o", str(tmp_path / "r")])
    assert line.startswith(f"error: {model}:{marker_line(model)}: the model's forward returned no tensor")
    assert not (tmp_path / "r").exists()


def test_json_nested_too_deep_is_a_user_error(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    line = _one_line_error(["report", str(deep), "-o", str(tmp_path / "deep.html")])
    assert line == f"error: {deep}: JSON nested too deep to be a report"
    assert not (tmp_path / "deep.html").exists()
