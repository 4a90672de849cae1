"""One analysis request, three doors (issue 35.1): the command line, the Python API and the nightly
build the same AnalyzeRequest and give the same report; a bad field is the same sentence through each."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from helpers import MODELS, ROOT
from typer.testing import CliRunner

import neuronprobe
from neuronprobe.cli import app
from neuronprobe.errors import ConfigError, InputError
from neuronprobe.nightly.run import load_config

runner = CliRunner()
MLP = MODELS / "mlp.py"
ENV_SWITCH = MODELS / "env_switch.py"
AUDIT_REPO = ROOT / "tests" / "data" / "audit_repo"
NIGHT = "2026-01-01"
RULE = {"id": "doors-gelu", "verdict": "cpu_fallback", "message": "gelu on the host", "fix": "none", "ops": ["gelu"], "provenance": "this test"}


@pytest.fixture
def inputs(tmp_path: Path) -> dict[str, Path]:
    """The files the request reads: a rule file, prefill lengths and a decode trace (prompt and output lengths)."""
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"rules": [RULE]}), encoding="utf-8")
    lengths = tmp_path / "lengths.txt"
    lengths.write_text("\n".join(str(20 + i) for i in range(30)) + "\n", encoding="utf-8")
    trace = tmp_path / "trace.csv"
    trace.write_text("ContextTokens,GeneratedTokens\n" + "".join(f"{50 + 7 * i},{5 + i % 11}\n" for i in range(40)), encoding="utf-8")
    return {"rules": rules, "lengths": lengths, "trace": trace}


def _comparable(report: dict[str, Any]) -> dict[str, Any]:
    """The report without what differs between two runs of one request: times, durations and the command line."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if not k.endswith("seconds")}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    out = strip(report)
    for key in ("time", "command_line"):
        out["metadata"].pop(key)
    return out


def _nightly(tmp_path: Path, toml: str) -> tuple[Any, Path]:
    config = tmp_path / "night.toml"
    config.write_text(toml, encoding="utf-8")
    reports = tmp_path / "night"
    result = runner.invoke(app, ["nightly", str(config), "-o", str(reports), "--date", NIGHT, "--no-cache"])
    return result, reports


def test_the_cli_the_api_and_a_one_model_nightly_give_the_same_report(tmp_path: Path, inputs: dict[str, Path]) -> None:
    """Rules, SDK, traffic, decode trace, parity, train and audit: one request, one report, whichever door."""
    out = tmp_path / "cli.json"
    cli = runner.invoke(
        app,
        [
            "analyze", str(MLP), "--backend", "static", "--sdk", "2.31.0", "--rules", str(inputs["rules"]),
            "--lengths", str(inputs["lengths"]), "--max-compiles", "0", "--decode-trace", str(inputs["trace"]),
            "--parity", "--train", "--audit", str(AUDIT_REPO), "--json", str(out), "--no-html",
        ],
    )  # fmt: skip
    assert cli.exit_code == 0, cli.output
    from_cli = json.loads(out.read_text())

    api = neuronprobe.analyze(
        str(MLP),
        backend="static",
        sdk="2.31.0",
        rules=inputs["rules"],
        lengths=inputs["lengths"],
        max_compiles=0,
        decode_trace=inputs["trace"],
        parity=True,
        train=True,
        audit=AUDIT_REPO,
    )
    from_api = json.loads(api.to_json())

    night, reports = _nightly(
        tmp_path,
        f'backend = "static"\nsdk = "2.31.0"\nrules = "{inputs["rules"]}"\n\n'
        f'[[models]]\nmodel = "{MLP}"\nlengths = "{inputs["lengths"]}"\nmax_compiles = 0\n'
        f'decode_trace = "{inputs["trace"]}"\nparity = true\ntrain = true\naudit = "{AUDIT_REPO}"\n',
    )
    assert night.exit_code == 0, night.output
    from_nightly = json.loads((reports / NIGHT / "mlp.json").read_text())

    # Every section the request asks for is there, and the user's rule and the release applied.
    assert from_cli["decode"]["requests"] == 40
    assert from_cli["recompiles"] is not None and from_cli["buckets"] is not None
    assert [r["precision"] for r in from_cli["parity"]["runs"]] and from_cli["train"] is not None
    assert from_cli["audit"]["findings"]
    assert "doors-gelu" in {f["rule"] for f in from_cli["findings"]}
    assert "Neuron SDK 2.31.0" in from_cli["support_table"]["version"]
    assert _comparable(from_api) == _comparable(from_cli)
    assert _comparable(from_nightly) == _comparable(from_cli)


def test_the_env_of_a_request_reaches_the_analysis_and_leaves_the_callers_environment_alone(tmp_path: Path) -> None:
    assert "NEURONPROBE_TEST_SWITCH" not in os.environ
    plain = neuronprobe.analyze(str(ENV_SWITCH), backend="static")
    switched = neuronprobe.analyze(str(ENV_SWITCH), backend="static", env={"NEURONPROBE_TEST_SWITCH": "nonzero"})
    assert "NEURONPROBE_TEST_SWITCH" not in os.environ
    assert "aten::nonzero" not in {f.op for f in plain.findings}
    assert "aten::nonzero" in {f.op for f in switched.findings}

    night, reports = _nightly(tmp_path, f'backend = "static"\n\n[env]\nNEURONPROBE_TEST_SWITCH = "nonzero"\n\n[[models]]\nmodel = "{ENV_SWITCH}"\n')
    assert night.exit_code == 0, night.output
    report = json.loads((reports / NIGHT / "env_switch.json").read_text())
    assert "aten::nonzero" in {f["op"] for f in report["findings"]}


# (what the command line gets, the API's keywords, the nightly's [[models]] lines, the sentence)
BAD_FIELDS = [
    pytest.param(
        ["--dataset-size", "10", "--batch-size", "2"],
        {"dataset_size": 10, "batch_size": 2},
        "dataset_size = 10\nbatch_size = 2\n",
        "--dataset-size and --batch-size describe a training epoch: add --train",
        id="epoch-without-train",
    ),
    pytest.param(
        ["--train", "--optimizer", "lion"],
        {"train": True, "optimizer": "lion"},
        'train = true\noptimizer = "lion"\n',
        "--optimizer 'lion': unknown optimizer; use",
        id="optimizer",
    ),
    pytest.param(
        ["--compile-seconds", "-1"],
        {"compile_seconds": -1.0},
        "compile_seconds = -1.0\n",
        "--compile-seconds -1: use a non-negative number of seconds",
        id="compile-seconds",
    ),
    pytest.param(
        ["--sdk", "9.99"],
        {"sdk": "9.99"},
        'sdk = "9.99"\n',
        "--sdk '9.99': unknown Neuron SDK release; the support table knows",
        id="sdk",
    ),
    pytest.param(
        ["--audit", "/no/such/repository"],
        {"audit": "/no/such/repository"},
        'audit = "/no/such/repository"\n',
        "--audit /no/such/repository: no such file or folder",
        id="audit",
    ),
    pytest.param(
        ["--native-mode", "compile"],
        {"native_mode": "compile"},
        'native_mode = "compile"\n',
        "--native-mode compile describes torch.compile(backend='neuron') on TorchNeuron; use it with --stack native (trn2/trn3)",
        id="native-mode-on-the-xla-stack",
    ),
]


@pytest.mark.parametrize("cli_args,keywords,toml,sentence", BAD_FIELDS)
def test_a_bad_field_is_one_sentence_through_every_door(tmp_path: Path, cli_args: list[str], keywords: dict[str, Any], toml: str, sentence: str) -> None:
    out = tmp_path / "o"
    result = runner.invoke(app, ["analyze", str(MLP), "--backend", "static", *cli_args, "-o", str(out)])
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert not out.exists()  # nothing half-written
    with pytest.raises(InputError) as raised:
        neuronprobe.analyze(str(MLP), backend="static", **keywords)
    config = tmp_path / "night.toml"
    config.write_text(f'backend = "static"\n\n[[models]]\nmodel = "{MLP}"\n{toml}', encoding="utf-8")
    with pytest.raises(ConfigError) as nightly:
        load_config(config)
    night = runner.invoke(app, ["nightly", str(config), "-o", str(tmp_path / "night")])
    assert night.exit_code == 2 and len(night.output.strip().splitlines()) == 1, night.output
    assert lines[0].startswith(f"error: {sentence}")
    assert str(raised.value) == lines[0].removeprefix("error: ")
    assert str(nightly.value) == f"{config}: models[0] (mlp): {raised.value}"


def test_an_unknown_keyword_of_the_api_is_refused_naming_it() -> None:
    with pytest.raises(InputError, match=r"unknown option 'max_memroy'; the options are the command line's"):
        neuronprobe.analyze(str(MLP), max_memroy="8G")


def test_the_library_writes_no_file_and_says_so() -> None:
    with pytest.raises(InputError, match=r"^json: the library writes no file"):
        neuronprobe.analyze(str(MLP), json="r.json")


def test_a_failed_gate_of_the_api_raises_with_the_report() -> None:
    with pytest.raises(neuronprobe.GateFailed) as failed:
        neuronprobe.analyze(str(MODELS / "nonzero.py"), backend="static", fail_on="dynamic_shape")
    assert failed.value.exit_code == 1
    assert failed.value.result.model == "nonzero" and [f.gate for f in failed.value.failures] == ["fail_on"]


def test_the_nightly_refuses_the_commands_outputs_and_a_per_model_limit(tmp_path: Path) -> None:
    config = tmp_path / "night.toml"
    config.write_text(f'[[models]]\nmodel = "{MLP}"\ntimeout = 10\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"unknown key 'timeout' in models\[0\]"):
        load_config(config)
    config.write_text(f'json = "x.json"\n[[models]]\nmodel = "{MLP}"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"unknown key 'json' in the top level"):
        load_config(config)


def test_the_bucket_functions_take_the_commands_files_and_options(tmp_path: Path, inputs: dict[str, Path]) -> None:
    out = tmp_path / "b.json"
    result = runner.invoke(app, ["buckets", str(inputs["lengths"]), "-k", "3", "--multiple-of", "4", "--json", str(out), "--config", "none"])
    assert result.exit_code == 0, result.output
    proposal = neuronprobe.propose_buckets(inputs["lengths"], 3, multiple_of=4)
    assert proposal.edges == json.loads(out.read_text())["edges"]

    decoded = tmp_path / "d.json"
    result = runner.invoke(app, ["buckets", str(inputs["trace"]), "--decode", "-k", "2", "--json", str(decoded), "--config", "none"])
    assert result.exit_code == 0, result.output
    assert neuronprobe.propose_decode_buckets(inputs["trace"], 2).edges == json.loads(decoded.read_text())["edges"]
    with pytest.raises(InputError, match="--column and --field name the lengths in a file"):
        neuronprobe.propose_buckets([3, 5, 8], 2, column="n")


def test_nightly_merge_is_a_sub_command_and_a_config_still_runs_the_night() -> None:
    merge = runner.invoke(app, ["nightly", "merge", "--help"], env={"COLUMNS": "200"})
    assert merge.exit_code == 0 and "--history" in merge.output and "--no-cache" not in merge.output  # the run's options are not merge's
    assert runner.invoke(app, ["nightly", "x.toml", "extra"]).exit_code == 2  # a shard folder is merge's, not the night's
    missing = runner.invoke(app, ["nightly", "--date", NIGHT, "/no/such.toml"])
    assert missing.exit_code == 2 and missing.output.strip() == "error: /no/such.toml: no such config file"
    refused = runner.invoke(app, ["nightly", "merge"])
    assert refused.exit_code == 2 and "give the shard folders and the reports folder" in refused.output


def test_the_commands_are_listed_in_their_order() -> None:
    from neuronprobe.cli.common import COMMANDS

    listed = [
        line.split()[1]
        for line in runner.invoke(app, ["--help"], env={"COLUMNS": "200"}).output.splitlines()
        if line.startswith("│ ") and line.split()[1].isalpha()
    ]
    assert [c for c in listed if c in COMMANDS] == list(COMMANDS)


def test_the_parity_and_audit_functions_give_what_their_commands_write(tmp_path: Path) -> None:
    out = tmp_path / "parity.json"
    cli = runner.invoke(app, ["parity", str(MLP), "--auto-cast", "matmult", "--auto-cast-type", "bf16", "--json", str(out), "--no-html"])
    assert cli.exit_code == 0, cli.output
    api = neuronprobe.parity(MLP, auto_cast="matmult", auto_cast_type="bf16")
    assert _comparable(json.loads(api.to_json())) == _comparable(json.loads(out.read_text()))

    audited = tmp_path / "audit.json"
    cli = runner.invoke(app, ["audit", str(AUDIT_REPO), "--json", str(audited)])
    assert cli.exit_code == 0, cli.output

    from neuronprobe.audit.model import AUDIT_DOCUMENT

    assert json.loads(AUDIT_DOCUMENT.dumps(neuronprobe.audit(AUDIT_REPO))) == json.loads(audited.read_text())  # versioned as the command writes it
    with pytest.raises(neuronprobe.GateFailed, match=r"new finding\(s\) at --fail-on error"):
        neuronprobe.audit(AUDIT_REPO, fail_on="error")
    with pytest.raises(InputError, match=r"^--tolerance 0: give a relative tolerance above 0"):
        neuronprobe.parity(MLP, tolerance=0)
