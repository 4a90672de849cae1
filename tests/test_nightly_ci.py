"""The CI example of a sharded nightly: valid for GitHub Actions, and its shard/merge steps run here as written."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from helpers import MODELS

from neuronprobe.nightly.run import INDEX_FILE, SUMMARY_FILE, is_named_spec, load_config

REPO = Path(__file__).parent.parent
WORKFLOW = REPO / "examples" / "ci" / "nightly-matrix.yml"
ZOO = REPO / "examples" / "nightly-zoo.toml"
NIGHT = "2025-06-01"


def _schema_check(path: Path) -> subprocess.CompletedProcess[str]:
    """check-jsonschema with SchemaStore's GitHub workflow schema, vendored in the package (no network)."""
    command = [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows", str(path)]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def test_the_matrix_workflow_is_a_valid_github_actions_workflow(tmp_path):
    result = _schema_check(WORKFLOW)
    assert result.returncode == 0, result.stdout + result.stderr
    broken = yaml.safe_load(WORKFLOW.read_text())
    broken["jobs"]["shard"]["strategy"]["fail-fast"] = "sometimes"  # the schema knows this is a boolean
    (tmp_path / "broken.yml").write_text(yaml.safe_dump(broken))
    assert _schema_check(tmp_path / "broken.yml").returncode == 1


def _steps(job: dict) -> dict[str, dict]:
    return {s.get("name", s.get("uses")): s for s in job["steps"]}


def _expand(text: str, values: dict[str, str]) -> str:
    for expression, value in values.items():
        text = text.replace("${{ " + expression + " }}", value)
    assert "${{" not in text, text
    return text


def test_the_workflow_shards_uniquely_and_merges_by_pattern():
    workflow = yaml.safe_load(WORKFLOW.read_text())
    shard, merge = workflow["jobs"]["shard"], workflow["jobs"]["merge"]
    assert shard["strategy"]["matrix"]["shard"] == list(range(1, int(workflow["env"]["SHARDS"]) + 1))
    assert shard["strategy"]["fail-fast"] is False
    upload = _steps(shard)["Upload the shard"]
    assert upload["uses"] == "actions/upload-artifact@v4" and "${{ matrix.shard }}" in upload["with"]["name"]
    download = _steps(merge)["Download the shards"]
    assert download["uses"] == "actions/download-artifact@v4"
    assert download["with"]["pattern"] == upload["with"]["name"].replace("${{ matrix.shard }}", "*")
    assert "merge-multiple" not in download["with"]  # each shard in its own folder, with its own manifest
    assert merge["needs"] == ["plan", "shard"]
    assert not _steps(merge)["Merge the shards and gate the night"].get("continue-on-error")  # the gate fails the job
    assert workflow["env"]["NIGHTLY_CONFIG"] == "examples/nightly-zoo.toml" and ZOO.is_file()


def test_the_shard_and_merge_steps_run_as_written(tmp_path):
    """The workflow's own scripts, with two shards of a two-model config, as local processes."""
    workflow = yaml.safe_load(WORKFLOW.read_text())
    shard_job, merge_job = workflow["jobs"]["shard"], workflow["jobs"]["merge"]
    config = tmp_path / "nightly.toml"
    config.write_text("".join(f'[[models]]\nmodel = "{MODELS / m}"\n' for m in ("mlp.py", "nonzero.py")))
    env = {**os.environ, **workflow["env"], "NIGHTLY_CONFIG": str(config), "SHARDS": "2"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"  # the venv's `neuronprobe`
    upload = _steps(shard_job)["Upload the shard"]["with"]
    for index in ("1", "2"):
        values = {"matrix.shard": index, "needs.plan.outputs.night": NIGHT}
        script = _expand(_steps(shard_job)["Run the shard"]["run"], values)
        done = subprocess.run(["bash", "-e", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
        # What download-artifact does with a pattern and no merge-multiple: shards/<artifact name>/
        shutil.copytree(tmp_path / _expand(upload["path"], values), tmp_path / "shards" / _expand(upload["name"], values))
    script = _steps(merge_job)["Merge the shards and gate the night"]["run"]
    done = subprocess.run(["bash", "-e", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((tmp_path / "reports" / NIGHT / SUMMARY_FILE).read_text())
    assert [(m["name"], m["status"]) for m in summary["models"]] == [("mlp", "first_run"), ("nonzero", "first_run")]
    assert (tmp_path / "reports" / INDEX_FILE).is_file() and (tmp_path / "reports" / NIGHT / "nonzero.html").is_file()


def test_the_zoo_config_is_a_realistic_zoo():
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    config = load_config(ZOO)
    hf = [m.model[3:] for m in config.models if m.model.startswith("hf:")]
    assert len(set(hf)) >= 30
    assert all(t in CONFIG_MAPPING_NAMES for t in hf), [t for t in hf if t not in CONFIG_MAPPING_NAMES]
    assert [m.name for m in config.models if m.model.startswith(("tv:", "timm:"))] == ["resnet18", "vit_tiny_patch16_224"]
    assert [m.name for m in config.models if m.train] == ["gpt2-train"]
    assert all(is_named_spec(m.model) for m in config.models)  # nothing to resolve on disk
