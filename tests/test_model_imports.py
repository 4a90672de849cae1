"""Model files import as ``python model.py`` runs them (issue 33.2).

The model's folder comes first on ``sys.path`` (``from helper import WIDTH`` with helper.py
beside it), ``--path DIR`` (repeatable) and ``PYTHONPATH`` name package roots elsewhere, from
any working directory, through the API, ``analyze``, ``parity``, ``nightly`` (and its cache key)
and the xla-cpu worker; a notebook's ``sys.path`` and ``sys.modules`` are left as they were.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
from helpers import MODELS
from typer.testing import CliRunner

import neuronprobe
from neuronprobe.cli import app
from neuronprobe.errors import InputError, ModelLoadError
from neuronprobe.nightly.cache import cache_inputs, cache_key, local_imports
from neuronprobe.nightly.run import SUMMARY_FILE, load_config
from neuronprobe.report.model import load_report

SPLIT = MODELS / "split_model"
MODEL = SPLIT / "model.py"  # from helper import WIDTH, Block
USES_PACKAGE = SPLIT / "uses_package.py"  # also from splitlib.layers import Scale (a root elsewhere)
PKGROOT = MODELS / "split_pkgroot"
runner = CliRunner()


def _own_modules() -> set[str]:
    """Modules loaded from the test model folders (none may be left behind)."""
    out = set()
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if isinstance(file, str) and not name.startswith("neuronprobe_model_") and Path(file).resolve().is_relative_to(MODELS):
            out.add(name)
    return out


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run from a folder that is neither the model's nor the repository's."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_api_imports_the_models_own_files_and_leaves_sys_path_and_modules_as_they_were(elsewhere: Path) -> None:
    before = _own_modules()  # another test file in this worker may have imported a test model as a module
    users_helper = types.ModuleType("helper")  # a notebook's own module called helper, from elsewhere
    users_helper.__file__ = str(elsewhere / "helper.py")
    sys.modules["helper"] = users_helper
    path_before = list(sys.path)
    try:
        report = neuronprobe.analyze(str(MODEL))
        assert report.summary.ops_total >= 3  # linear, relu, linear: the model really ran
        assert report.verdict == "runs"
        assert sys.path == path_before
        assert sys.modules["helper"] is users_helper  # the model used its own helper.py; the user's is back
        assert _own_modules() <= before
    finally:
        del sys.modules["helper"]


def test_a_package_root_elsewhere_is_named_with_paths(elsewhere: Path) -> None:
    before = _own_modules()
    with pytest.raises(ModelLoadError, match=r"uses_package\.py:4: importing the model file raised ModuleNotFoundError: No module named 'splitlib'"):
        neuronprobe.analyze(str(USES_PACKAGE))
    report = neuronprobe.analyze(str(USES_PACKAGE), paths=[PKGROOT])
    assert report.summary.ops_total >= 2
    assert "splitlib" not in sys.modules and _own_modules() <= before
    with pytest.raises(InputError, match=r"--path .*nowhere: no such folder"):
        neuronprobe.analyze(str(USES_PACKAGE), paths=[elsewhere / "nowhere"])


def test_analyze_and_parity_from_another_folder_with_repeated_path(elsewhere: Path) -> None:
    out = elsewhere / "out"
    result = runner.invoke(app, ["analyze", str(USES_PACKAGE), "--path", str(PKGROOT), "--path", str(SPLIT), "-o", str(out), "--no-html"])
    assert result.exit_code == 0, result.output
    report = load_report(str(out / "uses_package.json"))
    assert report.summary.ops_total >= 2 and report.verdict == "runs"

    result = runner.invoke(app, ["parity", str(USES_PACKAGE), "--path", str(PKGROOT), "-o", str(out), "--no-html"])
    assert result.exit_code == 0, result.output
    parity = json.loads((out / "uses_package.json").read_text())["parity"]
    assert parity["runs"], parity  # the model ran under every precision

    result = runner.invoke(app, ["parity", str(USES_PACKAGE), "-o", str(out), "--no-html"])
    assert result.exit_code == 2, result.output
    assert "No module named 'splitlib'" in result.output and "Traceback" not in result.output


def test_a_path_that_is_no_folder_is_refused_before_any_work(elsewhere: Path) -> None:
    result = runner.invoke(app, ["analyze", str(MODEL), "--path", str(elsewhere / "nowhere"), "-o", str(elsewhere / "out")])
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [
        f"error: --path {elsewhere / 'nowhere'}: no such folder; give the folder a model's packages are imported from"
    ]
    assert not (elsewhere / "out").exists()


def test_pythonpath_names_a_package_root_for_the_cli(elsewhere: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(PKGROOT), "COLUMNS": "200"}
    done = subprocess.run(
        [sys.executable, "-m", "neuronprobe.cli", "analyze", str(USES_PACKAGE), "-o", str(elsewhere / "out"), "--no-html"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert load_report(str(elsewhere / "out" / "uses_package.json")).summary.ops_total >= 2


def test_the_nightly_config_path_and_its_cache_key(tmp_path: Path) -> None:
    config = tmp_path / "nightly.toml"
    relative = os.path.relpath(PKGROOT, tmp_path)
    config.write_text(f'path = ["{relative}"]\n\n[[models]]\nmodel = "{USES_PACKAGE}"\n')
    parsed = load_config(config)
    (model,) = parsed.models
    assert model.path == [str(PKGROOT)]
    # The key hashes the model, helper.py beside it and the package's files it imports (relative imports too).
    files = {p.relative_to(MODELS).as_posix() for p in local_imports(USES_PACKAGE, [PKGROOT])}
    assert files == {
        "split_model/uses_package.py",
        "split_model/helper.py",
        "split_pkgroot/splitlib/__init__.py",
        "split_pkgroot/splitlib/layers.py",
        "split_pkgroot/splitlib/factors.py",
    }
    inputs = cache_inputs(model, parsed, None, {})
    assert inputs["path"] == [str(PKGROOT)] and str(PKGROOT / "splitlib" / "factors.py") in inputs["files"]

    bad = tmp_path / "bad.toml"
    bad.write_text(f'[[models]]\nmodel = "{USES_PACKAGE}"\npath = ["nowhere"]\n')
    from neuronprobe.errors import ConfigError

    with pytest.raises(ConfigError, match=r"models\[0\] \(uses_package\)\.path: .*nowhere is not a folder"):
        load_config(bad)


def test_a_changed_file_of_the_package_root_changes_the_cache_key(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "lib").mkdir(parents=True)
    (root / "lib" / "__init__.py").write_text("")
    (root / "lib" / "deep.py").write_text("K = 1\n")
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "net.py").write_text("from lib.deep import K\n")
    config = tmp_path / "nightly.toml"
    config.write_text('path = ["root"]\n\n[[models]]\nmodel = "m/net.py"\n')
    parsed = load_config(config)
    before = cache_key(cache_inputs(parsed.models[0], parsed, None, {}))
    (root / "lib" / "deep.py").write_text("K = 2\n")
    assert cache_key(cache_inputs(parsed.models[0], parsed, None, {})) != before


def test_the_nightly_runs_a_split_model_with_a_package_root(tmp_path: Path) -> None:
    config = tmp_path / "nightly.toml"
    config.write_text(f'path = ["{PKGROOT}"]\n\n[[models]]\nmodel = "{USES_PACKAGE}"\n\n[[models]]\nmodel = "{MODEL}"\n')
    reports = tmp_path / "reports"
    result = runner.invoke(app, ["nightly", str(config), "-o", str(reports), "--date", "2025-06-01"])
    assert result.exit_code == 0, result.output
    summary = json.loads((reports / "2025-06-01" / SUMMARY_FILE).read_text())
    assert [(m["name"], m["status"]) for m in summary["models"]] == [("uses_package", "first_run"), ("model", "first_run")]


def test_the_xla_cpu_worker_imports_the_models_folder_path_and_pythonpath(xla_env: str, elsewhere: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from neuronprobe.analysis import AnalyzeOptions, analyze_spec

    report = analyze_spec(str(USES_PACKAGE), AnalyzeOptions(backend="xla-cpu", paths=[PKGROOT]))
    assert report.backend.name == "xla-cpu"
    assert report.backend.steps["observe"].status.value == "ok", report.backend.steps
    # A process started with PYTHONPATH has the root on sys.path; the worker (which starts without the
    # user's PYTHONPATH) gets it after its own torch.
    monkeypatch.setenv("PYTHONPATH", str(PKGROOT))
    monkeypatch.setattr(sys, "path", [*sys.path, str(PKGROOT)])
    try:
        report = analyze_spec(str(USES_PACKAGE), AnalyzeOptions(backend="xla-cpu"))
    finally:  # imported here from the user's own sys.path, as `import splitlib` would be: not ours to keep for later tests
        for name in [n for n in sys.modules if n == "splitlib" or n.startswith("splitlib.")]:
            del sys.modules[name]
    assert report.backend.steps["observe"].status.value == "ok", report.backend.steps


def test_buckets_decode_loads_a_model_file_with_path(elsewhere: Path) -> None:
    trace = elsewhere / "t.csv"
    trace.write_text("ContextTokens,GeneratedTokens\n" + "".join(f"{100 + i},{20 + i}\n" for i in range(30)), encoding="utf-8")
    model = str(SPLIT / "decode_shape.py")
    result = runner.invoke(app, ["buckets", str(trace), "--decode", "--model", model, "--path", str(PKGROOT), "--target", "trn1", "-k", "2"])
    assert result.exit_code == 0, result.output
    assert "smallest TP that fits: 1" in result.output
    result = runner.invoke(app, ["buckets", str(trace), "--decode", "--model", model, "--target", "trn1", "-k", "2"])
    assert result.exit_code == 2 and "No module named 'splitlib'" in result.output
    result = runner.invoke(app, ["buckets", str(trace), "--decode", "--model", "hf:gpt2", "--path", str(PKGROOT)])
    assert result.exit_code == 2 and "--path applies to --model with a model file" in result.output
