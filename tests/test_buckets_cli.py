"""`neuronprobe buckets`: exit codes, what it prints, and the JSON it writes."""

from __future__ import annotations

import json
import subprocess
import sys

from typer.testing import CliRunner

from neuronprobe.cli import app

runner = CliRunner()


def _lengths(tmp_path, values, name="lengths.txt"):
    path = tmp_path / name
    path.write_text("\n".join(map(str, values)) + "\n", encoding="utf-8")
    return path


def test_buckets_prints_the_proposal_and_writes_json(tmp_path):
    lengths = _lengths(tmp_path, [100] * 50 + [1100] * 30 + [1150] * 20 + [5000] * 5)
    out = tmp_path / "out" / "buckets.json"
    result = runner.invoke(app, ["buckets", str(lengths), "--max-buckets", "3", "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "proposed 3 buckets: 100, 1150, 5000" in result.output
    assert "nxd-inference" in result.output and "quantiles" in result.output
    assert "context_encoding_buckets=[100, 1150, 5000]" in result.output
    data = json.loads(out.read_text())
    assert data["edges"] == [100, 1150, 5000] and data["k"] == 3
    assert data["cost_model"] == "tokens"
    assert set(data["overhead"]) == {"tokens", "attention"}
    assert [p["k"] for p in data["curve"]] == [1, 2, 3]
    assert {"k", "edges", "overhead"} <= set(data["curve"][0])
    assert {"name", "edges", "overhead"} <= set(data["baselines"][0])
    assert data["beyond_last"] == 0
    assert not list(out.parent.glob(".*.tmp"))  # written atomically, no leftovers


def test_csv_column_constraints_holdout_and_all_configs(tmp_path):
    csv = tmp_path / "trace.csv"
    rows = ["TIMESTAMP,ContextTokens"] + [f"2023-11-16 18:{i // 60:02d}:{i % 60:02d},{100 + (i * 37) % 900}" for i in range(200)]
    csv.write_text("\n".join(rows) + "\n", encoding="utf-8")
    out = tmp_path / "b.json"
    result = runner.invoke(
        app,
        [
            "buckets", str(csv), "--column", "ContextTokens", "-k", "4", "--multiple-of", "64",
            "--fit", "strict", "--holdout", "0.25", "--config", "all", "--json", str(out),
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert all(e % 64 == 0 for e in data["edges"])
    assert data["fit"] == "strict"
    assert data["holdout"]["order"] == "time order" and data["holdout"]["test_lengths"] == 50
    assert "held-out check" in result.output
    for name in ("nxd_inference config", "transformers_neuronx config", "vllm_neuron config", "list config"):
        assert name in result.output


def test_k_clamp_is_reported_on_the_console(tmp_path):
    lengths = _lengths(tmp_path, [5, 9, 9])
    result = runner.invoke(app, ["buckets", str(lengths), "-k", "16"])
    assert result.exit_code == 0
    assert "--max-buckets 16 is more than the 2" in result.output


def test_beyond_last_is_reported_not_truncated(tmp_path):
    lengths = _lengths(tmp_path, [10, 20, 30, 900])
    result = runner.invoke(app, ["buckets", str(lengths), "--max-len", "64", "--json", str(tmp_path / "j.json")])
    assert result.exit_code == 0
    assert "1 lengths beyond the last bucket 64" in result.output
    assert json.loads((tmp_path / "j.json").read_text())["beyond_last"] == 1


def test_compile_seconds_chooses_k_and_shows_the_objective(tmp_path):
    lengths = _lengths(tmp_path, [100] * 10 + [200] * 10 + [4000])
    result = runner.invoke(app, ["buckets", str(lengths), "--compile-seconds", "600000", "--json", str(tmp_path / "j.json")])
    assert result.exit_code == 0
    assert "runtime+compile" in result.output
    assert json.loads((tmp_path / "j.json").read_text())["k"] == 1


def test_step_times_fit_the_cost(tmp_path):
    lengths = _lengths(tmp_path, [100, 200, 300, 700])
    steps = tmp_path / "steps.csv"
    steps.write_text("length,seconds\n128,0.011\n256,0.023\n512,0.05\n1024,0.11\n", encoding="utf-8")
    result = runner.invoke(app, ["buckets", str(lengths), "--step-times", str(steps), "--json", str(tmp_path / "j.json")])
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "j.json").read_text())
    assert data["cost_model"] == "measured" and data["cost_params"]["A"] > 0


def _run_err(args):
    result = runner.invoke(app, args)
    return result.exit_code, result.output


def test_unusable_input_exits_2_with_one_sentence_and_no_traceback(tmp_path):
    empty = _lengths(tmp_path, [], "empty.txt")
    empty.write_text("", encoding="utf-8")
    zero = _lengths(tmp_path, [5, 0], "zero.txt")
    words = _lengths(tmp_path, [5, "five"], "words.txt")
    nan = _lengths(tmp_path, [5, "nan"], "nan.txt")
    csv = tmp_path / "t.csv"
    csv.write_text("a,b\n1,2\n", encoding="utf-8")
    good = _lengths(tmp_path, [5, 6], "good.txt")
    cases = [
        (["buckets", str(empty)], "no lengths found"),
        (["buckets", str(zero)], "a length that is not positive"),
        (["buckets", str(words)], "line 2: not an integer length"),
        (["buckets", str(nan)], "not a length (NaN or infinite)"),
        (["buckets", str(csv), "--column", "len"], "has no column 'len'"),
        (["buckets", str(tmp_path / "missing.txt")], "no such file"),
        (["buckets", str(good), "--fit", "nearest"], "--fit 'nearest'"),
        (["buckets", str(good), "--cost", "cubic"], "--cost 'cubic'"),
        (["buckets", str(good), "-k", "0"], "--max-buckets 0"),
        (["buckets", str(good), "--config", "yaml"], "--config 'yaml'"),
        (["buckets", str(good), "--cost", "1,1", "--step-times", str(csv)], "either --cost or --step-times"),
    ]
    for args, message in cases:
        code, output = _run_err(args)
        assert code == 2, (args, output)
        assert message in output, (args, output)
        assert "Traceback" not in output


def test_buckets_help_lists_the_options_without_importing_pandas_or_torch():
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from neuronprobe.cli import app\n"
        "r = CliRunner().invoke(app, ['buckets', '--help'])\n"
        "assert r.exit_code == 0, r.output\n"
        "for opt in ('--max-buckets', '--cost', '--max-len', '--multiple-of', '--min-bucket', '--fit',\n"
        "            '--compile-seconds', '--compile-weight', '--holdout', '--json', '--column', '--field'):\n"
        "    assert opt in r.output, opt\n"
        "heavy = [m for m in ('torch', 'pandas', 'matplotlib') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
