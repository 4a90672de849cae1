"""Hostile option values: time limits that never fire or fire at once, sizes that exhaust memory, odd --sdk values.

Each is one sentence naming the option, exit 2, before any work (no worker, no report).
"""

from __future__ import annotations

import pytest
from helpers import MODELS
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from neuronprobe.cli import app
from neuronprobe.errors import InputError
from neuronprobe.nightly.run import load_config
from neuronprobe.support import load_table, select_sdk

runner = CliRunner()


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--op-timeout", "nan"], "error: --op-timeout nan: use a finite number"),
        (["--op-timeout", "0"], "error: --op-timeout 0: use a positive number of seconds"),
        (["--op-timeout", "-5"], "error: --op-timeout -5: use a positive number of seconds"),
        (["--op-timeout", "1e12"], "error: --op-timeout 1e+12: at most 604800 seconds (a week)"),
        (["--timeout", "inf"], "error: --timeout inf: use a finite number"),
        (["--timeout", "nan"], "error: --timeout nan: use a finite number"),
        (["--compile-seconds", "nan"], "error: --compile-seconds nan: use a finite number"),
        (
            ["--train", "--dataset-size", "1000000000", "--batch-size", "1"],
            "error: --dataset-size 1000000000 --batch-size 1: an epoch of 1,000,000,000 batches; neuronprobe walks at most 10,000,000 (raise --batch-size)",
        ),
        (
            ["--train", "--dataset-size", "1" + "0" * 30, "--batch-size", "8"],
            "error: --dataset-size 1000000000...000000 (31 digits): use a whole number of at most 9,223,372,036,854,775,807 (a 64-bit integer)",
        ),
    ],
)
def test_a_bad_limit_or_size_is_one_line_naming_the_option(tmp_path, args, line):
    out = tmp_path / "out"
    result = runner.invoke(app, ["analyze", str(MODELS / "mlp.py"), "--backend", "static", "-o", str(out), *args])
    assert result.exit_code == 2, result.output
    assert result.output.strip() == line
    assert not out.exists()


@pytest.mark.parametrize(("key", "value"), [("timeout", "nan"), ("op_timeout", "inf"), ("timeout", "0.0"), ("op_timeout", "-1")])
def test_a_nightly_config_limit_that_never_fires_is_refused(tmp_path, key, value):
    (tmp_path / "m.py").write_text("# a model file\n")
    config = tmp_path / "n.toml"
    config.write_text(f'{key} = {value}\n[[models]]\nmodel = "m.py"\n')
    with pytest.raises(InputError, match=f"`{key}` must be positive"):
        load_config(config)


@settings(max_examples=200, deadline=None)
@given(sdk=st.text(max_size=20) | st.from_regex(r"\d{1,3}(\.\d{1,3}){0,4}", fullmatch=True))
def test_fuzz_sdk_is_a_known_release_or_one_sentence(sdk):
    table = load_table()
    try:
        chosen = select_sdk(table, sdk)
    except InputError as exc:
        assert str(exc).startswith("--sdk ") and "unknown Neuron SDK release" in str(exc)
    else:
        assert chosen in table.sdk_releases
