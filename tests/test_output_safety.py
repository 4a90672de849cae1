"""Outputs never destroy inputs: refused before any work (exit 2), inputs byte-identical, no temp files left."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from diff_fixtures import make_report
from helpers import MODELS, one_model_shard, refused
from typer.testing import CliRunner

from neuronprobe.cli import app
from neuronprobe.errors import InputError
from neuronprobe.files import check_outputs, write_atomic

runner = CliRunner()


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_analyze_refuses_to_write_over_its_model_file(tmp_path):
    model = tmp_path / "m.py"
    model.write_bytes((MODELS / "mlp.py").read_bytes())
    line = refused(["analyze", str(model), "--json", str(model)], model)
    assert line == f"error: --json {model} is an input of this command ({model}); write the output elsewhere"
    assert _leftovers(tmp_path) == []


def test_analyze_refuses_a_json_path_that_is_also_the_html_report(tmp_path):
    model = MODELS / "mlp.py"
    out = tmp_path / "x.html"
    line = refused(["analyze", str(model), "--json", str(out)], model)
    assert line == f"error: the HTML report {out} is also the --json output; give each output its own file"
    assert not out.exists()


def test_buckets_refuses_to_write_over_its_lengths(tmp_path):
    lengths = tmp_path / "L.txt"
    lengths.write_text("5\n9\n12\n")
    line = refused(["buckets", str(lengths), "--json", str(lengths)], lengths)
    assert line.startswith(f"error: --json {lengths} is an input of this command")


@pytest.mark.parametrize("flag", ["--json", "--html"])
def test_diff_refuses_to_write_over_either_report(tmp_path, flag):
    base, new = tmp_path / "base.json", tmp_path / "new.json"
    base.write_text(make_report([]).to_json())
    new.write_text(make_report([]).to_json())
    for target in (base, new):
        line = refused(["diff", str(base), str(new), flag, str(target)], base, new)
        assert line.startswith(f"error: {flag} {target} is an input of this command")
    assert _leftovers(tmp_path) == []


def test_a_device_or_a_folder_is_never_a_target(tmp_path):
    run = tmp_path / "run.json"
    run.write_text(make_report([]).to_json())
    line = refused(["report", str(run), "-o", os.devnull], run)
    assert line == f"error: --output {os.devnull} exists and is a device; give a file path"
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)
    folder = tmp_path / "folder.html"
    folder.mkdir()
    line = refused(["report", str(run), "-o", str(folder)], run)
    assert line == f"error: --output {folder} exists and is a folder; give a file path"
    assert folder.is_dir() and _leftovers(tmp_path) == []


def test_another_spelling_of_an_input_is_the_same_input(tmp_path):
    lengths = tmp_path / "L.txt"
    lengths.write_text("5\n")
    (tmp_path / "link.txt").symlink_to(lengths)
    with pytest.raises(InputError, match="is an input of this command"):
        check_outputs([("--json", tmp_path / "." / "link.txt")], [lengths])


def test_the_atomic_write_never_renames_over_a_non_regular_file_and_leaves_no_temp_file(tmp_path):
    folder = tmp_path / "out.json"
    folder.mkdir()
    with pytest.raises(OSError, match="is a folder, not overwritten"):
        write_atomic(folder, "{}")
    assert folder.is_dir() and _leftovers(tmp_path) == []


def test_an_interrupted_write_removes_its_temp_file_and_keeps_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "report.json"
    target.write_text("old")

    def interrupted(fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(target, "new")
    assert target.read_text() == "old" and _leftovers(tmp_path) == []


# --- one guard on every command: each output option, found by introspecting the CLI ------------

# Every parameter of every command that names a file or folder, and which way it goes. A new
# Path option that is not listed here fails test_every_file_option_is_classified; a new output
# that has no refusal case in OUTPUT_CASES fails test_every_output_option_has_a_refusal_case.
FILE_PARAMS: dict[tuple[str, str], str] = {
    ("analyze", "model"): "input",
    ("analyze", "rules"): "input",
    ("rules", "rules"): "input",
    ("analyze", "shapes"): "input",
    ("analyze", "lengths"): "input",
    ("analyze", "decode_trace"): "input",
    ("analyze", "audit_path"): "input",
    ("analyze", "json_path"): "output",
    ("analyze", "output_dir"): "output",
    ("audit", "paths"): "input",
    ("audit", "baseline"): "input",
    ("audit", "json_path"): "output",
    ("audit", "sarif_path"): "output",
    ("report", "run"): "input",
    ("report", "output"): "output",
    ("diff", "base"): "input",
    ("diff", "new"): "input",
    ("diff", "json_path"): "output",
    ("diff", "html_path"): "output",
    ("nightly", "config"): "input",
    ("nightly", "output_dir"): "output",
    ("nightly", "shard_dirs"): "input",
    ("nightly", "history"): "output",
    ("nightly", "cache_dir"): "output",
    ("buckets", "lengths"): "input",
    ("buckets", "step_times"): "input",
    ("buckets", "model"): "input",  # --decode --model model.py (or hf:<type>, which names no file)
    ("buckets", "json_path"): "output",
    ("setup", "path"): "output",
    ("parity", "model"): "input",
    ("parity", "reference"): "input",
    ("parity", "json_path"): "output",
    ("parity", "output_dir"): "output",
    ("parity", "save_reference"): "output",
    # issue 33.2: --path package roots a model file imports from (folders read, never written)
    ("analyze", "import_path"): "input",
    ("parity", "import_path"): "input",
    ("buckets", "import_path"): "input",
    # issue 36: a release's compatibility table; a recorded PrivateUse1 registrations dump
    ("analyze", "support_table"): "input",
    ("setup", "from_dump"): "input",
    # issue 37: serving traffic and compile measurements; cache explain's plan and cache folder
    ("analyze", "serving_trace"): "input",
    ("analyze", "compile_times"): "input",
    ("buckets", "metrics"): "input",
    ("buckets", "compile_times"): "input",
    ("cache", "plan"): "input",
    ("cache", "cache_path"): "input",
}
# Parameters typed str that still name a file (a model file or an hf: spec; audit's paths, so that an empty one is refused).
STR_FILE_PARAMS = {("analyze", "model"), ("audit", "paths"), ("parity", "model"), ("buckets", "model")}
# Every other text parameter, each known not to name a file or folder. A new text option is in neither
# set until someone decides: test_every_text_option_is_a_path_or_known_not_to_be fails meanwhile.
NOT_PATHS = {
    *(("analyze", p) for p in ("set_", "target", "backend", "sdk", "require_backend", "fail_on", "column", "field_", "batch_sizes", "buckets")),
    *(("analyze", p) for p in ("max_memory", "optimizer", "optimizer_impl")),
    *(("parity", p) for p in ("set_", "auto_cast", "auto_cast_type", "dtype", "mpa", "sdk", "precision", "backend", "target", "max_memory", "fail_on")),
    *(("parity", p) for p in ("optimizer", "optimizer_impl")),
    *(("audit", p) for p in ("stack", "target", "fail_on")),
    *(("nightly", p) for p in ("date", "require_backend", "total_memory", "shard")),
    *(
        ("buckets", p)
        for p in ("column", "field_", "cost", "fit", "config", "prompt_column", "output_column", "time_column", "cached_column", "runtime", "set_", "target")
    ),
    ("buckets", "dtype"),
    ("doctor", "require_backend"),
    ("analyze", "serving_engine"),  # KEY=N,... of the engine
    ("cache", "action"),  # explain
    ("setup", "backend"),
    ("analyze", "entry"),  # a method name (issue 33.3)
    *(("analyze", p) for p in ("stack", "compiler_args", "native_mode")),  # issue 36
    ("parity", "stack"),
}


def _commands() -> list[tuple[str, object]]:
    """(command name, callback) of every command; a group's sub-commands (`nightly run`, `nightly merge`) under the group's name."""
    out = []
    for info in app.registered_commands:
        assert info.callback is not None
        out.append((info.name or info.callback.__name__, info.callback))
    for group in app.registered_groups:
        assert group.typer_instance is not None
        for info in group.typer_instance.registered_commands:
            assert info.callback is not None
            out.append((str(group.name), info.callback))
    return out


def _path_params() -> set[tuple[str, str]]:
    import typing

    found = set()
    for name, callback in _commands():
        for param, hint in typing.get_type_hints(callback, include_extras=True).items():
            if "Path" in repr(hint) or (name, param) in STR_FILE_PARAMS:
                found.add((name, param))
    return found


def test_every_file_option_is_classified():
    assert _path_params() == set(FILE_PARAMS)


def _text_params() -> set[tuple[str, str]]:
    """Every parameter of every command whose value is text or a path (str, Path, or lists of them)."""
    import typing

    found = set()
    for name, callback in _commands():
        for param, hint in typing.get_type_hints(callback, include_extras=True).items():
            if param != "return" and ("str" in repr(hint) or "Path" in repr(hint)):
                found.add((name, param))
    return found


def test_every_text_option_is_a_path_or_known_not_to_be():
    """A new option that takes text (``--model`` was one) must be classified before it ships: a file or not."""
    assert _text_params() == set(FILE_PARAMS) | NOT_PATHS
    assert not set(FILE_PARAMS) & NOT_PATHS


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "train.py").write_text("import torch\nmodel = torch.nn.Linear(2, 2).cuda()\n")
    (repo / "Dockerfile").write_text("FROM nvidia/cuda:12.4.0-runtime-ubuntu22.04\n")
    return repo


def _model(tmp_path: Path) -> Path:
    model = tmp_path / "m.py"
    model.write_bytes((MODELS / "mlp.py").read_bytes())
    return model


def _case_analyze_json(tmp_path: Path) -> tuple[list[str], list[Path]]:
    model = _model(tmp_path)
    return ["analyze", str(model), "--json", str(model)], [model]


def _case_analyze_output_dir(tmp_path: Path) -> tuple[list[str], list[Path]]:
    model = _model(tmp_path)
    return ["analyze", str(model), "-o", str(model)], [model]


def _case_audit_json(tmp_path: Path) -> tuple[list[str], list[Path]]:
    repo = _repo(tmp_path)
    return ["audit", str(repo), "--json", str(repo / "train.py")], [repo / "train.py", repo / "Dockerfile"]


def _case_audit_sarif(tmp_path: Path) -> tuple[list[str], list[Path]]:
    repo = _repo(tmp_path)
    return ["audit", str(repo), "--sarif", str(repo / "Dockerfile")], [repo / "train.py", repo / "Dockerfile"]


def _case_report_output(tmp_path: Path) -> tuple[list[str], list[Path]]:
    run = tmp_path / "run.json"
    run.write_text(make_report([]).to_json())
    return ["report", str(run), "-o", str(run)], [run]


def _diff_inputs(tmp_path: Path) -> tuple[Path, Path]:
    base, new = tmp_path / "base.json", tmp_path / "new.json"
    base.write_text(make_report([]).to_json())
    new.write_text(make_report([]).to_json())
    return base, new


def _case_diff_json(tmp_path: Path) -> tuple[list[str], list[Path]]:
    base, new = _diff_inputs(tmp_path)
    return ["diff", str(base), str(new), "--json", str(new)], [base, new]


def _case_diff_html(tmp_path: Path) -> tuple[list[str], list[Path]]:
    base, new = _diff_inputs(tmp_path)
    return ["diff", str(base), str(new), "--html", str(base)], [base, new]


def _case_nightly_output_dir(tmp_path: Path) -> tuple[list[str], list[Path]]:
    model = _model(tmp_path)
    config = tmp_path / "nightly.toml"
    config.write_text(f'[[models]]\nmodel = "{model.name}"\n')
    return ["nightly", str(config), "-o", str(config), "--date", "2026-01-02"], [config, model]


def _case_nightly_history(tmp_path: Path) -> tuple[list[str], list[Path]]:
    """`nightly merge SHARD --history FILE`: the history folder is a shard's own manifest."""
    shard = one_model_shard(tmp_path)
    return ["nightly", "merge", str(shard), "--history", str(shard / "_shard.json")], [shard / "_shard.json"]


def _case_nightly_cache(tmp_path: Path) -> tuple[list[str], list[Path]]:
    model = _model(tmp_path)
    config = tmp_path / "nightly.toml"
    config.write_text(f'[[models]]\nmodel = "{model.name}"\n')
    return ["nightly", str(config), "-o", str(tmp_path / "reports"), "--cache", str(model), "--date", "2026-01-02"], [config, model]


def _case_buckets_json(tmp_path: Path) -> tuple[list[str], list[Path]]:
    lengths = tmp_path / "L.txt"
    lengths.write_text("5\n9\n")
    steps = tmp_path / "steps.csv"
    steps.write_text("length,seconds\n5,0.1\n9,0.2\n")
    return ["buckets", str(lengths), "--step-times", str(steps), "--json", str(steps)], [lengths, steps]


def _case_setup_path(tmp_path: Path) -> tuple[list[str], list[Path]]:
    someone = tmp_path / "notes.txt"
    someone.write_text("not a folder\n")
    return ["setup", "xla-cpu", "--path", str(someone / "env")], [someone]


def _case_parity_json(tmp_path: Path) -> tuple[list[str], list[Path]]:
    model = _model(tmp_path)
    return ["parity", str(model), "--json", str(model)], [model]


def _case_parity_output_dir(tmp_path: Path) -> tuple[list[str], list[Path]]:
    model = _model(tmp_path)
    return ["parity", str(model), "-o", str(model)], [model]


def _case_parity_save_reference(tmp_path: Path) -> tuple[list[str], list[Path]]:
    """A reference folder named over the model file itself."""
    model = _model(tmp_path)
    return ["parity", str(model), "--save-reference", str(model), "-o", str(tmp_path / "reports")], [model]


OUTPUT_CASES = {
    ("analyze", "json_path"): _case_analyze_json,
    ("analyze", "output_dir"): _case_analyze_output_dir,
    ("audit", "json_path"): _case_audit_json,
    ("audit", "sarif_path"): _case_audit_sarif,
    ("report", "output"): _case_report_output,
    ("diff", "json_path"): _case_diff_json,
    ("diff", "html_path"): _case_diff_html,
    ("nightly", "output_dir"): _case_nightly_output_dir,
    ("nightly", "history"): _case_nightly_history,
    ("nightly", "cache_dir"): _case_nightly_cache,
    ("buckets", "json_path"): _case_buckets_json,
    ("setup", "path"): _case_setup_path,
    ("parity", "json_path"): _case_parity_json,
    ("parity", "output_dir"): _case_parity_output_dir,
    ("parity", "save_reference"): _case_parity_save_reference,
}


def test_every_output_option_has_a_refusal_case():
    assert set(OUTPUT_CASES) == {k for k, way in FILE_PARAMS.items() if way == "output"}


@pytest.mark.parametrize("option", sorted(OUTPUT_CASES), ids=lambda o: f"{o[0]}-{o[1]}")
def test_every_output_option_is_refused_over_an_input(tmp_path, option):
    args, inputs = OUTPUT_CASES[option](tmp_path)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    refused(args, *inputs)
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing written, nothing half-written


# --- and each input the other way round: an output over it is refused -----------------------
# Classifying a path option as an input is not enough: the command must also hand it to the guard.
# (`--path DIR` was classified while a module the model imports from DIR could be overwritten.)
# A new input option without a case here fails test_every_input_option_has_a_protection_case.

VLLM = ["--max-num-batched-tokens", "256", "--max-num-seqs", "4", "--max-model-len", "512"]
# Commands that write no file: nothing of theirs can be overwritten by their own outputs.
NO_OUTPUT_COMMANDS = {"rules", "cache"}


def _file(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _split(tmp_path: Path) -> tuple[Path, Path]:
    """The split model and its package root elsewhere, copied: (model folder, package root)."""
    import shutil

    shutil.copytree(MODELS / "split_model", tmp_path / "split_model")
    shutil.copytree(MODELS / "split_pkgroot", tmp_path / "split_pkgroot")
    return tmp_path / "split_model", tmp_path / "split_pkgroot"


def _analyze_over(option: str, name: str, text: str, *extra: str) -> object:
    def case(tmp_path: Path) -> tuple[list[str], list[Path]]:
        model, target = _model(tmp_path), _file(tmp_path, name, text)
        return ["analyze", str(model), option, str(target), *extra, "--json", str(target)], [model, target]

    return case


def _in_case_audit_path(tmp_path: Path) -> tuple[list[str], list[Path]]:
    model, repo = _model(tmp_path), _repo(tmp_path)
    return ["analyze", str(model), "--audit", str(repo), "--json", str(repo / "train.py")], [model, repo / "train.py"]


def _in_case_import_path(command: str) -> object:
    def case(tmp_path: Path) -> tuple[list[str], list[Path]]:
        folder, root = _split(tmp_path)
        imported = root / "splitlib" / "factors.py"  # reached through a relative import of splitlib.layers
        return [command, str(folder / "uses_package.py"), "--path", str(root), "--json", str(imported)], [imported, folder / "uses_package.py"]

    return case


def _in_case_audit_baseline(tmp_path: Path) -> tuple[list[str], list[Path]]:
    repo = _repo(tmp_path)
    baseline = _file(tmp_path, "baseline.json", '{"findings": []}\n')
    return ["audit", str(repo), "--baseline", str(baseline), "--json", str(baseline)], [baseline, repo / "train.py"]


def _in_case_buckets_lengths(tmp_path: Path) -> tuple[list[str], list[Path]]:
    lengths = _file(tmp_path, "L.txt", "5\n9\n")
    return ["buckets", str(lengths), "--json", str(lengths)], [lengths]


TRACE = "TIMESTAMP,prompt_tokens,output_tokens\n0.0,100,20\n1.0,120,30\n"


def _in_case_buckets_model(tmp_path: Path) -> tuple[list[str], list[Path]]:
    trace, model = _file(tmp_path, "t.csv", TRACE), tmp_path / "d.py"
    model.write_bytes((MODELS / "decode_wide_lm.py").read_bytes())
    return ["buckets", str(trace), "--decode", "--model", str(model), "--json", str(model)], [trace, model]


def _in_case_buckets_import_path(tmp_path: Path) -> tuple[list[str], list[Path]]:
    folder, root = _split(tmp_path)
    trace, shapes = _file(tmp_path, "t.csv", TRACE), root / "splitlib" / "shapes.py"
    return ["buckets", str(trace), "--decode", "--model", str(folder / "decode_shape.py"), "--path", str(root), "--json", str(shapes)], [trace, shapes]


def _in_case_buckets_serving(option: str, name: str, text: str) -> object:
    def case(tmp_path: Path) -> tuple[list[str], list[Path]]:
        trace, target = _file(tmp_path, "t.csv", TRACE), _file(tmp_path, name, text)
        return ["buckets", str(trace), "--decode", "--runtime", "vllm-neuron", *VLLM, option, str(target), "--json", str(target)], [trace, target]

    return case


def _in_case_analyze_compile_times(tmp_path: Path) -> tuple[list[str], list[Path]]:
    model, trace = _model(tmp_path), _file(tmp_path, "t.csv", TRACE)
    times = _file(tmp_path, "times.csv", "graph,seconds\nprefill_s512,100\n")
    return ["analyze", str(model), "--serving-trace", str(trace), *VLLM, "--compile-times", str(times), "--json", str(times)], [model, trace, times]


def _in_case_parity_reference(tmp_path: Path) -> tuple[list[str], list[Path]]:
    model, manifest = _model(tmp_path), _file(tmp_path, "ref/manifest.json", "{}\n")
    return ["parity", str(model), "--reference", str(manifest.parent), "--json", str(manifest)], [model, manifest]


def _in_case_setup_from_dump(tmp_path: Path) -> tuple[list[str], list[Path]]:
    dump = _file(tmp_path, "dump.json", "{}\n")
    return ["setup", "native-table", "--from-dump", str(dump), "--path", str(dump)], [dump]


INPUT_CASES = {
    ("analyze", "model"): _case_analyze_json,
    ("analyze", "rules"): _analyze_over("--rules", "rules.json", '{"rules": []}\n'),
    ("analyze", "shapes"): _analyze_over("--shapes", "s.jsonl", '{"x": [2, 4]}\n'),
    ("analyze", "lengths"): _analyze_over("--lengths", "L.txt", "5\n9\n"),
    ("analyze", "decode_trace"): _analyze_over("--decode-trace", "t.csv", TRACE),
    ("analyze", "serving_trace"): _analyze_over("--serving-trace", "t.csv", TRACE, *VLLM),
    ("analyze", "compile_times"): _in_case_analyze_compile_times,
    ("analyze", "support_table"): _analyze_over("--support-table", "table.json", "{}\n"),
    ("analyze", "audit_path"): _in_case_audit_path,
    ("analyze", "import_path"): _in_case_import_path("analyze"),
    ("audit", "paths"): _case_audit_json,
    ("audit", "baseline"): _in_case_audit_baseline,
    ("report", "run"): _case_report_output,
    ("diff", "base"): _case_diff_html,
    ("diff", "new"): _case_diff_json,
    ("nightly", "config"): _case_nightly_output_dir,
    ("nightly", "shard_dirs"): _case_nightly_history,
    ("buckets", "lengths"): _in_case_buckets_lengths,
    ("buckets", "step_times"): _case_buckets_json,
    ("buckets", "model"): _in_case_buckets_model,
    ("buckets", "import_path"): _in_case_buckets_import_path,
    ("buckets", "metrics"): _in_case_buckets_serving("--metrics", "m.prom", "x 1\n"),
    ("buckets", "compile_times"): _in_case_buckets_serving("--compile-times", "c.csv", "a,b\n"),
    ("parity", "model"): _case_parity_json,
    ("parity", "reference"): _in_case_parity_reference,
    ("parity", "import_path"): _in_case_import_path("parity"),
    ("setup", "from_dump"): _in_case_setup_from_dump,
}


def test_every_input_option_has_a_protection_case():
    inputs = {k for k, way in FILE_PARAMS.items() if way == "input" and k[0] not in NO_OUTPUT_COMMANDS}
    assert set(INPUT_CASES) == inputs


@pytest.mark.parametrize("option", sorted(INPUT_CASES), ids=lambda o: f"{o[0]}-{o[1]}")
def test_every_input_option_is_protected_from_the_commands_outputs(tmp_path, option):
    args, inputs = INPUT_CASES[option](tmp_path)
    line = refused(args, *inputs)
    assert "is an input of this command" in line, line
