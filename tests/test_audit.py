"""`neuronprobe audit`: every rule at its known line in the fixture repository, the near-misses
silent, suppressions, baselines, SARIF 2.1.0 (validated against the schema), exit codes."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import jsonschema
import pytest
from helpers import TESTS
from typer.testing import CliRunner

from neuronprobe.audit.engine import audit_paths
from neuronprobe.audit.python_scan import scan_python
from neuronprobe.audit.rules import load_rules
from neuronprobe.audit.sarif import to_sarif
from neuronprobe.cli import app

REPO = TESTS / "data" / "audit_repo"
SARIF_SCHEMA = TESTS / "data" / "sarif" / "sarif-schema-2.1.0.json"
_MARK = re.compile(r"EXPECT(?P<next>-NEXT)?\s+(?P<rule>[a-z0-9-]+)")
runner = CliRunner()


def expected_findings(root: Path) -> set[tuple[str, int, str]]:
    """(file, line, rule) from the `# EXPECT rule` / `# EXPECT-NEXT rule` markers of the fixture."""
    out = set()
    for path in root.rglob("*"):
        if not path.is_file() or path.name == "README.md":
            continue
        rel = path.relative_to(root).as_posix()
        if rel.startswith(("third_party/", "pyenv/")):
            continue
        for number, text in enumerate(path.read_text().splitlines(), 1):
            for m in _MARK.finditer(text):
                out.add((rel, number + 1 if m.group("next") else number, m.group("rule")))
    return out


@pytest.fixture(scope="module")
def section():
    return audit_paths([REPO], "xla", jobs=1)


def test_every_marked_line_is_found_and_nothing_else(section) -> None:
    found = {(f.file, f.line, f.rule) for f in section.findings}
    expected = expected_findings(REPO)
    assert found - expected == set(), "findings on unmarked lines (a near-miss fired?)"
    assert expected - found == set(), "marked lines the audit missed"


def test_every_rule_fires_in_the_fixture(section) -> None:
    # the XLA-stack idioms (stacks = ["native"]) are tested on their own fixture: tests/test_native_audit.py
    assert {f.rule for f in section.findings} == {rule_id for rule_id, rule in load_rules().items() if "xla" in rule.stacks}


def test_findings_carry_severity_message_fix_and_the_source_line(section) -> None:
    rules = load_rules()
    f = next(f for f in section.findings if f.file == "train.py" and f.rule == "silent-cpu-fallback")
    assert (f.line, f.column, f.severity) == (16, 10, "error")
    assert f.snippet == 'device = "cuda" if torch.cuda.is_available() else "cpu"  # EXPECT silent-cpu-fallback'
    assert f.fix == rules["silent-cpu-fallback"].fix_xla and "torch_xla.device()" in f.fix
    assert f.message == rules["silent-cpu-fallback"].message


def test_parse_errors_and_unknown_suppressions_are_problems_not_crashes(section) -> None:
    problems = {(p.file, p.line, p.kind) for p in section.problems}
    assert problems == {("broken.py", 3, "syntax"), ("suppressed.py", 4, "suppression")}
    assert "no-such-rule" in next(p.detail for p in section.problems if p.kind == "suppression")
    assert section.suppressed == 1  # the .cuda() on suppressed.py:3
    assert not any(f.file == "suppressed.py" and f.rule == "dot-cuda" for f in section.findings)


def test_stack_native_gives_the_torchneuron_fixes() -> None:
    native = audit_paths([REPO / "train.py"], "native", jobs=1)
    fixes = {f.rule: f.fix for f in native.findings}
    assert "init_process_group('neuron')" in fixes["nccl-backend"]
    assert "device_type='neuron'" in fixes["cuda-amp"]
    assert "torch.accelerator.synchronize()" in fixes["cuda-synchronize"]


def test_gitignore_venv_and_vendored_folders_are_skipped(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(REPO, repo)
    (repo / ".gitignore").write_text("generated/\n*.gen.py\n")
    (repo / "generated").mkdir()
    (repo / "generated" / "a.py").write_text("import torch\ntorch.cuda.synchronize()\n")
    (repo / "x.gen.py").write_text("import torch\ntorch.cuda.synchronize()\n")
    (repo / "sub").mkdir()
    (repo / "sub" / ".gitignore").write_text("local.py\n")
    (repo / "sub" / "local.py").write_text("import torch\ntorch.cuda.synchronize()\n")
    (repo / "sub" / "kept.py").write_text("import torch\ntorch.cuda.synchronize()\n")
    files = {f.file for f in audit_paths([repo], jobs=1).findings}
    assert "sub/kept.py" in files
    assert not {f for f in files if f.startswith(("generated/", "third_party/", "pyenv/")) or f in ("x.gen.py", "sub/local.py")}
    vendored = {f.file for f in audit_paths([repo], jobs=1, include_vendored=True).findings}
    assert "third_party/vendored.py" in vendored and "pyenv/lib/site.py" not in vendored


def test_parallel_workers_find_the_same_as_one_process(tmp_path: Path) -> None:
    for i in range(60):  # enough files for the process pool
        (tmp_path / f"m{i}.py").write_text(f"import torch\n\nx{i} = torch.zeros(1).cuda()\n")
    calls = []
    one = audit_paths([tmp_path], jobs=1)
    two = audit_paths([tmp_path], jobs=2, progress=lambda done, total: calls.append((done, total)))
    assert [(f.file, f.line, f.rule) for f in one.findings] == [(f.file, f.line, f.rule) for f in two.findings]
    assert len(one.findings) == 60 and calls[-1] == (60, 60)


@pytest.mark.parametrize(
    ("source", "rule"),
    [
        ("from torch import cuda\ncuda.synchronize()\n", "cuda-synchronize"),
        ("import torch.cuda as tc\ntc.manual_seed(1)\n", "cuda-runtime-api"),
        ("import torch as th\nth.cuda.Event()\n", "cuda-event-timing"),
        ("from torch.cuda.amp import GradScaler\ns = GradScaler()\n", "cuda-amp"),
        ("import torch.distributed as d\nd.init_process_group(backend='nccl')\n", "nccl-backend"),
        ("import torch\nargs = object()\nargs.cuda = torch.cuda.is_available()\nd = 'cuda' if args.cuda else 'cpu'\n", "silent-cpu-fallback"),
    ],
)
def test_imports_and_aliases_are_resolved(source: str, rule: str) -> None:
    hits = scan_python(source.encode())
    assert [h[0] for h in hits] == [rule] and hits[0][1] == len(source.splitlines())


def test_the_prefilter_never_drops_a_finding() -> None:
    """Files without a trigger word are not parsed (speed); on the fixture it changes nothing."""
    for path in sorted(REPO.rglob("*.py")):
        if path.name == "broken.py":
            continue
        data = path.read_bytes()
        assert scan_python(data) == scan_python(data.decode()), path.name


@pytest.mark.parametrize(
    "source",
    [
        "import numpy as torch\ntorch.cuda.synchronize()\n",  # not torch at all
        "def synchronize():\n    pass\nsynchronize()\n",
        "# torch.cuda.synchronize()\n'torch.cuda.synchronize()'\n",
        "import torch\nd = torch.accelerator.current_accelerator() or torch.device('cpu')\n",
    ],
)
def test_lookalikes_are_not_flagged(source: str) -> None:
    assert scan_python(source.encode()) == []


def test_sarif_is_valid_sarif_2_1_0(section) -> None:
    log = to_sarif(section, "0.1.0")
    schema = json.loads(SARIF_SCHEMA.read_text())
    validator_cls = jsonschema.validators.validator_for(schema)
    validator_cls.check_schema(schema)
    errors = sorted(validator_cls(schema).iter_errors(log), key=lambda e: list(e.path))
    assert not errors, errors[0].message
    run = log["runs"][0]
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == list(load_rules())
    first = next(r for r in run["results"] if r["ruleId"] == "silent-cpu-fallback")
    location = first["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "train.py" and location["region"]["startLine"] == 16
    assert first["level"] == "error" and len(run["results"]) == len(section.findings)
    assert len(run["invocations"][0]["toolExecutionNotifications"]) == 2


# --- the command ------------------------------------------------------------------


def test_cli_writes_json_and_sarif_and_gates_on_errors(tmp_path: Path) -> None:
    out_json, out_sarif = tmp_path / "audit.json", tmp_path / "audit.sarif"
    result = runner.invoke(app, ["audit", str(REPO), "--json", str(out_json), "--sarif", str(out_sarif), "--fail-on", "error", "-j", "1"])
    assert result.exit_code == 1, result.output
    assert "gate failed" in result.output and "silent-cpu-fallback" in result.output
    data = json.loads(out_json.read_text())
    assert len(data["findings"]) == len(expected_findings(REPO))
    assert json.loads(out_sarif.read_text())["version"] == "2.1.0"
    # grouped by file, worst first: train.py's first finding is an error, and errors come before warnings
    lines = result.output.splitlines()
    train = lines[lines.index("train.py") + 1]
    assert "error" in train and "silent-cpu-fallback" in train


def test_cli_without_fail_on_exits_0_and_info_rule_gates_by_id(tmp_path: Path) -> None:
    assert runner.invoke(app, ["audit", str(REPO / "setup.py")]).exit_code == 0
    result = runner.invoke(app, ["audit", str(REPO / "Dockerfile"), "--fail-on", "cuda-determinism"])
    assert result.exit_code == 1, result.output


def test_baseline_only_new_findings_gate(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(REPO, repo)
    base = tmp_path / "base.json"
    assert runner.invoke(app, ["audit", str(repo), "--json", str(base), "-j", "1"]).exit_code == 0
    train = repo / "train.py"
    train.write_text("# a line added above every finding\n" + train.read_text())  # findings move: still known
    result = runner.invoke(app, ["audit", str(repo), "--baseline", str(base), "--fail-on", "warning", "-j", "1"])
    assert result.exit_code == 0, result.output
    train.write_text(train.read_text() + "torch.cuda.synchronize()\n")
    result = runner.invoke(app, ["audit", str(repo), "--baseline", str(base), "--fail-on", "warning", "-j", "1"])
    assert result.exit_code == 1 and "1 new finding" in result.output, result.output


def test_rules_lists_every_rule_with_both_fixes() -> None:
    result = runner.invoke(app, ["audit", "--rules"])
    assert result.exit_code == 0
    for rule in load_rules().values():
        assert f"{rule.id}  {rule.severity}" in result.output
    assert result.output.count("fix, XLA-era torch-neuronx") == len(load_rules())
    assert result.output.count("fix, TorchNeuron") == len(load_rules())


def test_target_picks_the_stack() -> None:
    trn2 = runner.invoke(app, ["audit", str(REPO / "train.py"), "--target", "trn2"])
    assert "init_process_group('neuron')" in trn2.output
    trn1 = runner.invoke(app, ["audit", str(REPO / "train.py"), "--target", "trn1"])
    assert "init_process_group('xla')" in trn1.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope/does-not-exist"], "no such file or folder"),
        (["REPO", "--fail-on", "errors"], "unknown rule or severity 'errors'"),
        (["REPO", "--stack", "cuda"], "--stack 'cuda'"),
        (["REPO", "--baseline", "CORRUPT"], "not valid JSON"),
        (["REPO", "--baseline", "NOTAUDIT"], "not an audit JSON"),
        ([], "give at least one PATH"),
    ],
)
def test_unusable_input_exits_2_with_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "corrupt.json").write_text('{"findings": [')
    (tmp_path / "other.json").write_text('{"model": "x"}')
    subst = {"REPO": str(REPO / "setup.py"), "CORRUPT": str(tmp_path / "corrupt.json"), "NOTAUDIT": str(tmp_path / "other.json")}
    result = runner.invoke(app, ["audit", *[subst.get(a, a) for a in args]])
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_an_unreadable_file_is_listed_and_the_rest_audited(tmp_path: Path) -> None:
    (tmp_path / "ok.py").write_text("import torch\ntorch.cuda.synchronize()\n")
    (tmp_path / "gone.py").symlink_to(tmp_path / "deleted-target.py")  # listed by the walk, cannot be opened
    section = audit_paths([tmp_path], jobs=1)
    assert [f.file for f in section.findings] == ["ok.py"]
    assert [(p.file, p.kind) for p in section.problems] == [("gone.py", "unreadable")]


# --- the audit section of the analyze report ------------------------------------------


def test_analyze_audit_adds_a_section_to_json_and_html(tmp_path: Path) -> None:
    from helpers import MODELS

    from neuronprobe.report.model import load_report

    out = tmp_path / "run.json"
    result = runner.invoke(app, ["analyze", str(MODELS / "mlp.py"), "--json", str(out), "--audit", str(REPO / "train.py")])
    assert result.exit_code == 0, result.output
    report = load_report(str(out))
    assert report.audit is not None and report.audit.files_scanned == 1
    assert {f.rule for f in report.audit.findings} >= {"silent-cpu-fallback", "nccl-backend"}
    errors = report.audit.counts()["error"]
    assert errors == sum(1 for f in report.audit.findings if f.severity == "error") > 0
    assert f"audit of {REPO / 'train.py'}: {errors} error(s)" in result.output
    html = out.with_suffix(".html").read_text()
    assert 'id="audit"' in html
    assert "CUDA assumptions in the repository" in html and "silent-cpu-fallback" in html
    assert html.index("silent-cpu-fallback") < html.index("cuda-backend-flags")  # errors before info


def test_a_report_without_an_audit_still_loads_and_renders() -> None:
    from report_fixtures import rich_report

    from neuronprobe.report.html import render_html
    from neuronprobe.report.model import Report

    data = json.loads(rich_report().to_json())
    data.pop("audit")
    report = Report.from_dict(data)
    assert report.audit is None
    assert "CUDA assumptions in the repository" not in render_html(report)


def test_analyze_audit_of_a_missing_path_exits_2_before_tracing(tmp_path: Path) -> None:
    from helpers import MODELS

    result = runner.invoke(app, ["analyze", str(MODELS / "mlp.py"), "--audit", str(tmp_path / "nope"), "-o", str(tmp_path)])
    assert result.exit_code == 2 and "--audit" in result.output and "no such file or folder" in result.output
    assert list(tmp_path.iterdir()) == []


def test_several_roots_name_each_file_by_its_root(tmp_path: Path) -> None:
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "m.py").write_text("import torch\ntorch.cuda.synchronize()\n")
    single = tmp_path / "single.py"
    single.write_text("import torch\nx = torch.zeros(1).cuda()\n")
    section = audit_paths([tmp_path / "a", tmp_path / "b", single], jobs=1)
    assert [f.file for f in section.findings] == sorted([f"{(tmp_path / 'a').as_posix()}/m.py", f"{(tmp_path / 'b').as_posix()}/m.py", single.as_posix()])
    assert section.files_scanned == 3
