"""Issue 34, points 4 and 6: numbers validated at the edge, and JSON that is JSON.

Every case was exit 3 (an internal error) or a silent wrong result before: each is now exit 2 with
one sentence naming the option or the field, inputs byte-identical, within a time bound. A report
with NaN in it is strict JSON (checked with a parser that refuses the NaN and Infinity constants).
"""

from __future__ import annotations

import errno
import io
import json
import math
import os
from contextlib import redirect_stderr
from pathlib import Path

import pytest
from helpers import MODELS, one_model_shard
from io_cli import IO_MODELS, bounded, refused_here, refused_line, run_cli

from neuronprobe.errors import InputError
from neuronprobe.files import strict_json_text, write_atomic
from neuronprobe.jsonio import dumps, loads_strict, number

TRACE = "prompt_tokens,output_tokens\n100,20\n200,40\n150,30\n"
BIG = "1" + "0" * 26


def _trace(tmp_path: Path, text: str = TRACE, name: str = "trace.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _model(tmp_path: Path, source: Path) -> Path:
    target = tmp_path / "m.py"
    target.write_bytes(source.read_bytes())
    return target


# --- options: int64, finite, and documented ceilings -------------------------------------------


@pytest.mark.parametrize(
    ("extra", "line"),
    [
        (
            ["--speculation-length", BIG],
            "error: --speculation-length 1000000000...000000 (27 digits): use a whole number of at most 9,223,372,036,854,775,807 (a 64-bit integer)",
        ),
        (["--max-len", BIG], "error: --max-len 1000000000...000000 (27 digits): use a whole number of at most 9,223,372,036,854,775,807 (a 64-bit integer)"),
        (["--max-len", str(2**63 - 1)], "error: --max-len 9223372036854775807: use a whole number from 1 to 16,777,216"),
        (["--speculation-length", "300"], "error: --speculation-length 300: use a whole number from 0 to 256"),
        (["--max-batch", "100000", "--tokens-per-second", "10"], "error: --max-batch 100000: use a whole number from 1 to 4,096"),
        (["--tokens-per-second", "nan"], "error: --tokens-per-second nan: use a finite number"),
        (["--holdout", "inf"], "error: --holdout inf: use a finite number"),
    ],
)
def test_a_decode_number_out_of_range_is_one_sentence_naming_the_option(tmp_path, extra, line):
    trace = _trace(tmp_path)
    assert refused_line(["buckets", str(trace), "--decode", *extra], [trace]) == line


@pytest.mark.parametrize(
    ("value", "line"),
    [
        ("1e308", "error: --reserve-gib 1e+308: use a number from 0 to 1,024"),
        ("inf", "error: --reserve-gib inf: use a finite number"),
        ("nan", "error: --reserve-gib nan: use a finite number"),
    ],
)
def test_a_reserve_that_is_no_number_of_gib_is_refused(tmp_path, value, line):
    trace = _trace(tmp_path)
    model = _model(tmp_path, MODELS / "decode_wide_lm.py")
    assert refused_line(["buckets", str(trace), "--decode", "--model", str(model), "--reserve-gib", value], [trace, model]) == line


def test_prefill_buckets_have_the_same_documented_ceiling(tmp_path):
    lengths = _trace(tmp_path, "5\n9\n12\n", "L.txt")
    line = refused_line(["buckets", str(lengths), "--max-len", str(2**63 - 1)], [lengths])
    assert line == "error: --max-len 9223372036854775807: use a whole number from 1 to 16,777,216"
    line = refused_line(["buckets", str(lengths), "--multiple-of", BIG], [lengths])
    assert line.startswith("error: --multiple-of 1000000000...000000 (27 digits): use a whole number of at most")


def test_every_command_checks_its_numbers_at_the_edge(tmp_path):
    """The one check as each command starts: analyze, parity and nightly options too."""
    model = _model(tmp_path, MODELS / "mlp.py")
    line = refused_line(["analyze", str(model), "--max-buckets", BIG, "-o", str(tmp_path / "r")], [model])
    assert line.startswith("error: --max-buckets 1000000000...000000 (27 digits): use a whole number of at most")
    line = refused_line(["parity", str(model), "--seed", BIG, "-o", str(tmp_path / "r")], [model])
    assert line.startswith("error: --seed 1000000000...000000 (27 digits)")
    line = refused_line(["parity", str(model), "--rtol", "nan", "--save-reference", str(tmp_path / "ref"), "-o", str(tmp_path / "r")], [model])
    assert line == "error: --rtol nan: use a finite number"
    assert not (tmp_path / "r").exists() and not (tmp_path / "ref").exists()


def test_a_parity_sdk_release_of_thousands_of_digits_is_one_sentence(tmp_path):
    """Was exit 3: int() of a 5,000-digit part is a ValueError past Python's digit limit; a release reads like the rule files'."""
    model = _model(tmp_path, MODELS / "mlp.py")
    line = refused_here(["parity", str(model), "--sdk", "2." + "9" * 5000, "-o", str(tmp_path / "r")], [model])
    assert line.startswith("error: --sdk '2.999") and line.endswith("': expected a Neuron SDK release such as 2.26 or 2.27.0"), line[-200:]
    assert not (tmp_path / "r").exists()


SERVING = ["--decode", "--runtime", "vllm-neuron", "--max-num-batched-tokens", "1024", "--max-num-seqs", "8", "--max-model-len", "4096"]
SERVING_TRACE = "TIMESTAMP,ContextTokens,GeneratedTokens\n0,300,3\n0,100,2\n0.5,700,4\n1.0,50,5\n"


@pytest.mark.parametrize(
    ("extra", "line"),
    [
        # finite but past any real value: an overflow to infinity (exit 3), or an objective of inf for every k (k = 1 by accident)
        (["--cost", "1e308,1e308"], "error: cost model A=1e+308, B=1e+308: A and B must be at most 1e+12 (rescale the unit)"),
        (["--compile-seconds", str(2**63)], "error: --compile-seconds 9.22337e+18: use a number from 0 to 604,800"),
        (["--compile-seconds", "10", "--compile-weight", "1e308"], "error: --compile-weight 1e+308: use a number from 0 to 1e+12"),
    ],
)
def test_a_prefill_cost_past_its_ceiling_is_refused(tmp_path, extra, line):
    lengths = _trace(tmp_path, "5\n9\n12\n40\n33\n", "L.txt")
    assert refused_line(["buckets", str(lengths), *extra], [lengths]) == line


@pytest.mark.parametrize(
    ("extra", "line"),
    [
        (["--decode-step-seconds", "1e308"], "error: --decode-step-seconds 1e+308: use a number from 0 to 604,800"),  # was +nan% modelled time
        (["--prefill-tokens-per-second", "1e308"], "error: --prefill-tokens-per-second 1e+308: use a number from 0 to 1e+09"),
        (["--host-memory-gib", "1e308"], "error: --host-memory-gib 1e+308: use a number from 0 to 65,536"),
    ],
)
def test_a_serving_rate_past_its_ceiling_is_refused(tmp_path, extra, line):
    trace = _trace(tmp_path, SERVING_TRACE, "t.csv")
    assert refused_line(["buckets", str(trace), *SERVING, *extra], [trace]) == line


def test_a_compile_budget_past_a_week_is_refused(tmp_path):
    trace = _trace(tmp_path, SERVING_TRACE, "t.csv")
    times = Path(__file__).resolve().parents[1] / "data" / "serving" / "dynamo_metrics.json"
    line = refused_line(["buckets", str(trace), *SERVING, "--compile-times", str(times), "--compile-budget", "1e300"], [trace, times])
    assert line == "error: --compile-budget 1e+300: use a number from 0 to 10,080"


@pytest.mark.parametrize(
    ("edges", "line"),
    [
        # past int64: an OverflowError inside the analysis (exit 3); int64's maximum: a bucket of 9.2e18 tokens, accepted
        ("4," + "9" * 23, "error: --buckets 99999999999999999999999: use a whole number of at most 9,223,372,036,854,775,807 (a 64-bit integer)"),
        (f"4,{2**63 - 1}", "error: --buckets: an edge above 16777216 tokens (neuronprobe's ceiling)"),
    ],
)
def test_analyze_bucket_edges_are_checked_like_buckets_max_len(tmp_path, edges, line):
    model = _model(tmp_path, MODELS / "mlp.py")
    lengths = _trace(tmp_path, "5\n9\n12\n", "L.txt")
    args = ["analyze", str(model), "--backend", "static", "--lengths", str(lengths), "--buckets", edges, "-o", str(tmp_path / "r")]
    assert refused_line(args, [model, lengths]) == line
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    ("options", "flag"),
    [
        ({"max_buckets": 10**30}, "--max-buckets"),
        ({"max_compiles": 10**30}, "--max-compiles"),
        ({"batch_sizes": (1, 10**30)}, "--batch-sizes"),
        ({"buckets": (4, 10**30)}, "--buckets"),
        ({"compile_seconds": math.nan}, "--compile-seconds"),
    ],
)
def test_the_api_door_checks_every_number_as_the_command_line_does(options, flag):
    """neuronprobe.analyze (and %%neuronprobe, a nightly's keys) built the request without the CLI's int64 check."""
    import torch

    import neuronprobe

    with pytest.raises(InputError, match=f"^{flag} "):
        neuronprobe.analyze(torch.nn.Linear(2, 2), (torch.ones(1, 2),), backend="static", **options)


@pytest.mark.parametrize("jobs", ["0", "257", "100000"])
def test_audit_jobs_has_the_nightly_ceiling(tmp_path, jobs):
    """Under fork, a process pool starts every worker at once: --jobs 100000 forked 100000 processes (exit 0)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "train.py").write_text("import torch\nx = torch.ones(2).cuda()\n")
    assert refused_line(["audit", str(repo), "--jobs", jobs], [repo / "train.py"]) == f"error: --jobs {jobs}: use 1 to 256"


@pytest.mark.parametrize(("command", "flag"), [(["analyze", "M", "--backend", "static"], "--max-memory"), (["nightly", "run", "C"], "--total-memory")])
def test_a_memory_size_past_int64_is_refused(tmp_path, command, flag):
    """99999999999999999999999999G was accepted as a limit of 10^35 bytes."""
    model = _model(tmp_path, MODELS / "mlp.py")
    config = tmp_path / "n.toml"
    config.write_text(f"[[models]]\nmodel = '{model}'\n")
    args = [{"M": str(model), "C": str(config)}.get(a, a) for a in command]
    line = refused_line([*args, flag, "9" * 26 + "G", "-o", str(tmp_path / "r")], [model, config])
    assert line == f"error: {flag} {'9' * 26}G: at most 8 EiB (a 64-bit byte count)"


# --- numbers read from files -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "text", "line"),
    [
        (
            "t.jsonl",
            '{"prompt_tokens": ' + "9" * 40 + ', "output_tokens": 5}\n',
            "line 1: 'prompt_tokens' is not a whole number of tokens between 1 and 16777216",
        ),
        (
            "t.jsonl",
            '{"prompt_tokens": ' + "9" * 5000 + ', "output_tokens": 5}\n',
            "line 1: 'prompt_tokens' is not a whole number of tokens between 1 and 16777216",
        ),
        ("t.jsonl", '{"prompt_tokens": 1e999, "output_tokens": 5}\n', "line 1: 'prompt_tokens' is not a whole number of tokens between 1 and 16777216"),
        ("t.csv", "prompt_tokens,output_tokens\n" + "9" * 40 + ",5\n", "line 2: 'prompt_tokens' is not a whole number of tokens between 1 and 16777216"),
        ("t.csv", "prompt_tokens,output_tokens\n100,inf\n", "line 2: 'output_tokens' is not a whole number of tokens between 1 and 16777216"),
    ],
)
def test_a_huge_or_infinite_number_in_a_trace_is_refused_naming_the_line(tmp_path, name, text, line):
    trace = _trace(tmp_path, text, name)
    assert refused_line(["buckets", str(trace), "--decode"], [trace]) == f"error: {trace} {line}"


def test_a_huge_integer_in_a_lengths_file_is_refused(tmp_path):
    jsonl = _trace(tmp_path, "5\n" + "9" * 5000 + "\n", "L.jsonl")
    assert refused_line(["buckets", str(jsonl)], [jsonl]) == f"error: {jsonl} line 2: too large to be a sequence length"


def test_step_times_must_be_finite(tmp_path):
    trace = _trace(tmp_path)
    steps = _trace(tmp_path, "length,seconds\n100,0.01\n200,inf\n", "steps.csv")
    line = refused_line(["buckets", str(trace), "--decode", "--step-times", str(steps)], [trace, steps])
    assert line == f"error: {steps} line 3: length and seconds must be finite numbers"


def test_step_times_past_a_week_are_refused_naming_the_line(tmp_path):
    """A step of 1e308 s fitted f(x) = 5e305*x with R^2 = nan, used as if measured (exit 0)."""
    lengths = _trace(tmp_path, "5\n9\n12\n", "L.txt")
    steps = _trace(tmp_path, "length,seconds\n100,0.01\n200,1e308\n300,1e308\n", "steps.csv")
    line = refused_line(["buckets", str(lengths), "--step-times", str(steps)], [lengths, steps])
    assert line == f"error: {steps} line 3: a length above 16777216 or a step above 604800 seconds (a week)"


@pytest.mark.parametrize(
    ("model", "field", "value"),
    [("shape_zero_heads.py", "num_attention_heads", 0), ("shape_negative_layers.py", "num_hidden_layers", -4)],
)
def test_a_model_config_with_impossible_counts_is_refused_with_the_field_named(tmp_path, model, field, value):
    path = _model(tmp_path, IO_MODELS / model)
    trace = _trace(tmp_path)
    line = refused_line(["buckets", str(trace), "--decode", "--model", str(path)], [path, trace])
    assert line == f"error: {path}: the config's {field} is {value}; a count of the model must be at least 1"


def _shard(tmp_path: Path, seconds: object) -> Path:
    return one_model_shard(tmp_path, seconds)


@pytest.mark.parametrize(
    ("seconds", "why"),
    [
        # the typed reader (typed_json, issue 35.4) names the field of a wrong type; the range check a number out of range
        ("ten", "manifest.models[0].seconds: expected a number, got str"),
        (True, "manifest.models[0].seconds: expected a number, got bool"),
        ([1], "manifest.models[0].seconds: expected a number, got list"),
        (-1, "shard manifest entry 'm': 'seconds' must be a number of seconds from 0 to 604800"),
        (1e300, "shard manifest entry 'm': 'seconds' must be a number of seconds from 0 to 604800"),
    ],
)
def test_a_merge_manifest_whose_seconds_is_not_a_duration_is_refused(tmp_path, seconds, why):
    shard = _shard(tmp_path, seconds)
    line = refused_line(["nightly", "merge", str(shard), "--history", str(tmp_path / "h")], [shard / "_shard.json"])
    assert line == f"error: {shard / '_shard.json'}: {why}"
    assert not (tmp_path / "h").exists()


def test_a_merge_manifest_with_a_nan_constant_is_not_json(tmp_path):
    shard = _shard(tmp_path, 1.0)
    text = (shard / "_shard.json").read_text().replace('"seconds": 1.0', '"seconds": NaN')
    (shard / "_shard.json").write_text(text)
    line = refused_line(["nightly", "merge", str(shard), "--history", str(tmp_path / "h")], [shard / "_shard.json"])
    assert line == f"error: {shard / '_shard.json'}: not valid JSON (NaN is not JSON)"


def _saved_reference(tmp_path: Path) -> Path:
    """A real reference folder, saved by the command line from a small model."""
    model = _model(tmp_path, MODELS / "parity_reference.py")
    ran = run_cli(["parity", str(model), "--save-reference", "ref", "-o", "r", "--no-html"], cwd=tmp_path)
    assert ran.code == 0, ran.stderr
    return tmp_path / "ref"


@pytest.fixture(scope="module")
def reference_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _saved_reference(tmp_path_factory.mktemp("reference"))


# [1, 2, 3, 4, 5]: whole sizes, but not the stored tensor's (the manifest is not hashed; it was reported as the reference's shape)
@pytest.mark.parametrize("shape", ["2,3", math.inf, [2, "3"], [2, -1], [True, 2], [2**40], [1, 2, 3, 4, 5]])
def test_a_reference_manifest_whose_shape_is_not_whole_sizes_is_refused(tmp_path, reference_folder, shape):
    from neuronprobe.parity.reference import load_reference

    folder = tmp_path / "ref"
    folder.mkdir()
    for f in reference_folder.iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["tensors"][0]["shape"] = shape
    (folder / "manifest.json").write_text(json.dumps(manifest))  # json writes inf as Infinity: a non-JSON constant
    with pytest.raises(InputError) as caught:
        load_reference(folder)
    message = str(caught.value)
    assert message.startswith(str(folder / "manifest.json"))
    assert "tensors[0] 'shape'" in message or "field 'shape'" in message or "not a readable reference manifest" in message


def test_a_model_with_a_sparse_output_saves_and_compares_a_reference(tmp_path):
    model = _model(tmp_path, IO_MODELS / "sparse_output.py")
    saved = run_cli(["parity", str(model), "--save-reference", "ref", "-o", "r", "--no-html"], cwd=tmp_path)
    assert saved.code == 0, saved.stderr
    compared = run_cli(["parity", str(model), "--reference", "ref", "-o", "r2", "--no-html"], cwd=tmp_path)
    assert compared.code == 0, compared.stderr
    assert "4 of 4 position(s) unchanged" in compared.stdout


def test_python_m_neuronprobe_with_an_over_long_path_is_one_sentence(tmp_path):
    long_path = "a/" * 3000 + "m.py"
    for command in (["analyze", long_path], ["parity", long_path], ["buckets", long_path]):
        line = refused_line(command, [])
        assert "(6004 characters)" in line and ("too long for the file system" in line or "File name too long" in line), line


def test_doctor_with_an_unreadable_cache_folder_is_one_sentence(monkeypatch):
    """Root reads any folder, so the unreadable cache is a PermissionError raised where the cache is read."""
    from typer.testing import CliRunner

    from neuronprobe.backends import xla_env
    from neuronprobe.cli import app

    def unreadable(*args: object, **kwargs: object) -> object:
        raise PermissionError(errno.EACCES, "Permission denied", "/home/u/.cache/neuronprobe/xla-cpu")

    monkeypatch.setattr(xla_env, "inspect_managed", unreadable)
    with bounded():
        result = CliRunner().invoke(app, ["doctor"])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert (
        len(lines) == 1
        and lines[0] == "error: /home/u/.cache/neuronprobe/xla-cpu: permission denied (Permission denied); give neuronprobe access or another path"
    )
    assert "Traceback" not in result.output


def test_an_unreadable_environment_folder_is_said_as_unreadable_not_incomplete(tmp_path, monkeypatch):
    """A 000 xla-cpu folder read as "incomplete (no complete.json)": doctor and --backend auto suggested a new set-up.

    Root reads a 000 folder, so the refusal is raised where the marker is read (measured as a user
    without CAP_DAC_OVERRIDE: the same PermissionError, the same sentence).
    """
    from neuronprobe.backends import xla_env

    env = tmp_path / "xla-cpu"
    env.mkdir()
    marker = env / xla_env.MARKER
    marker.write_text("{}")
    access, opened = os.access, os.open

    def refused_open(path: object, *args: object, **kwargs: object) -> int:
        if Path(str(path)) == marker:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return opened(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", refused_open)  # what the bounded reader meets as a user without read access
    monkeypatch.setattr(os, "access", lambda path, mode, *a, **k: False if Path(str(path)) == marker else access(path, mode, *a, **k))
    state = xla_env.inspect_managed(env)
    assert state.state == xla_env.STATE_BROKEN and not state.usable
    assert state.problem == f"the xla-cpu environment at {env} cannot be read (Permission denied); give neuronprobe access to it"


def test_parity_names_a_module_with_markup_as_written(tmp_path):
    """Module names with Rich markup were a MarkupError (exit 3): printed as written, escaped in the HTML, strict JSON."""
    model = _model(tmp_path, IO_MODELS / "markup_module_names.py")
    ran = run_cli(["parity", str(model), "--auto-cast", "all", "-o", "r"], cwd=tmp_path)
    assert ran.code == 0 and ran.stderr == "", ran.stderr
    assert "first past the tolerance: [/bold][red]x<img src=x onerror=alert(1)> (Cancel)" in ran.stdout
    assert "[link=javascript:x]y[/link]" in ran.stdout
    html = (tmp_path / "r" / "m.html").read_text()
    assert "<img src=x" not in html and "[/bold][red]x&lt;img src=x onerror=alert(1)&gt;" in html
    _strict((tmp_path / "r" / "m.json").read_text())


# --- the magics ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shell():
    from IPython.core.interactiveshell import InteractiveShell

    sh = InteractiveShell.instance()
    sh.run_line_magic("load_ext", "neuronprobe")
    yield sh
    sh.run_line_magic("unload_ext", "neuronprobe")


def _magic(shell, text: str) -> str:
    """Run a cell: nothing raised into the notebook (a magic's exit code), within the time bound; what it printed."""
    err = io.StringIO()
    with bounded(), redirect_stderr(err):
        result = shell.run_cell(text)
    assert result.error_in_exec is None and result.error_before_exec is None  # nothing raised into the notebook
    return err.getvalue()


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--json", "{model}"], "error: --json {model} is an input of this command ({model}); write the output elsewhere"),
        (
            ["--max-buckets", BIG],
            "error: --max-buckets 1000000000...000000 (27 digits): use a whole number of at most 9,223,372,036,854,775,807 (a 64-bit integer)",
        ),
    ],
    ids=["json-over-the-model", "max-buckets-past-int64"],
)
def test_a_line_magic_the_command_refuses_is_one_line_and_leaves_the_model_file_alone(shell, tmp_path, extra, words):
    model = _model(tmp_path, MODELS / "mlp.py")
    before = model.read_bytes()
    args = " ".join(a.format(model=model) for a in extra)
    out = _magic(shell, f"%neuronprobe analyze {model} {args} -o {tmp_path / 'r'}")
    assert out.strip().splitlines() == [words.format(model=model)]
    assert model.read_bytes() == before and not (tmp_path / "r").exists()


def test_a_line_magic_with_an_unclosed_quote_is_one_line(shell):
    out = _magic(shell, '%neuronprobe analyze "model.py --target trn1')
    assert out.strip().splitlines() == ['neuronprobe: %neuronprobe analyze "model.py --target trn1: No closing quotation (close the quote)']


@pytest.mark.parametrize(
    ("cell", "line", "error"),
    [
        ('x = 1\nraise ValueError("bad shape")\n', 3, "ValueError: bad shape"),
        # an exception whose own __str__ raises: a traceback through neuronprobe's _cell_failure before
        ("class Odd(Exception):\n    def __str__(self):\n        raise RuntimeError('no text')\n\nraise Odd()\n", 6, "Odd"),
        ("def get_model():\n    return 1 / 0\n\ndef get_example_inputs():\n    return ()\n", 3, "ZeroDivisionError: division by zero"),
        ("import sys\nsys.exit(4)\n", 3, "SystemExit: 4"),
    ],
)
def test_a_cell_that_raises_is_one_line_with_its_own_line_and_no_neuronprobe_frames(shell, cell, line, error):
    out = _magic(shell, "%%neuronprobe\n" + cell)
    lines = out.strip().splitlines()
    assert len(lines) == 1, out
    assert lines[0].startswith("neuronprobe: In [") and lines[0].endswith(f"], line {line}: the cell raised {error}"), lines[0]
    assert "Traceback" not in out and "neuronprobe/" not in out


# --- point 6: JSON is JSON ------------------------------------------------------------------------


def _strict(text: str) -> object:
    def refuse(name: str) -> object:
        raise AssertionError(f"{name} in a JSON file")

    return json.loads(text, parse_constant=refuse)


def test_a_train_step_with_a_nan_loss_writes_strict_json(tmp_path):
    model = _model(tmp_path, IO_MODELS / "train_nan_loss.py")
    ran = run_cli(["parity", str(model), "--train", "-o", "r", "--no-html"], cwd=tmp_path)
    assert ran.code == 0, ran.stderr
    text = (tmp_path / "r" / "m.json").read_text()
    data = _strict(text)
    assert isinstance(data, dict)
    train = data["parity"]["train"][0]
    assert train["loss_ref"] == "NaN"  # the fact survives, as a string
    from neuronprobe.report.model import load_report

    report = load_report(str(tmp_path / "r" / "m.json"))  # and reads back as a float NaN
    assert report.parity is not None and math.isnan(report.parity.train[0].loss_ref)


def test_the_codec_never_writes_a_non_finite_constant():
    value = {"a": math.nan, "b": [math.inf, -math.inf, 1.5], "c": (math.nan,), "d": {"e": 2}}
    text = dumps(value)
    assert _strict(text) == {"a": "NaN", "b": ["Infinity", "-Infinity", 1.5], "c": ["NaN"], "d": {"e": 2}}
    assert [number(v) for v in ("Infinity", "-Infinity", 1, "x", True)] == [math.inf, -math.inf, 1.0, None, None]
    with pytest.raises(ValueError):
        loads_strict('{"x": NaN}')


def test_the_atomic_writer_re_encodes_a_bare_constant_in_a_json_file(tmp_path):
    target = tmp_path / "x.json"
    write_atomic(target, json.dumps({"loss": math.nan, "ok": 1}))  # an encoder that forgot the codec
    assert _strict(target.read_text()) == {"loss": "NaN", "ok": 1}
    html = tmp_path / "x.html"
    write_atomic(html, "NaN is shown as NaN")  # only .json files are JSON
    assert html.read_text() == "NaN is shown as NaN"
    assert strict_json_text("not json") == "not json"


def test_a_report_round_trips_nan_through_the_codec():
    from diff_fixtures import make_report

    from neuronprobe.report.model import Report

    report = make_report([])
    report.summary.support_percentage = math.nan
    text = report.to_json()
    _strict(text)
    assert math.isnan(Report.from_json(text).summary.support_percentage)
