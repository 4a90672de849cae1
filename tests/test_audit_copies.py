"""Audit noise (issue 34.9): one finding per rule per line, and near-copies of a file folded into the first one met.

modded-nanogpt keeps 53 archived ``records/*/train_gpt.py`` beside its ``train_gpt.py``: the
audit reported every CUDA assumption once per copy (421 of 641 findings over the labelled
repositories of benchmarks/audit_recall_labels.toml). The tree here is the same shape, small.
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from neuronprobe.audit.engine import audit_paths
from neuronprobe.audit.model import AuditFinding, AuditSection
from neuronprobe.cli import app

SCRIPT = "import torch\nmodel = torch.nn.Linear(2, 2).cuda()\ntorch.cuda.synchronize()\n"


def _tree(root: Path) -> Path:
    (root / "records" / "a").mkdir(parents=True)
    (root / "records" / "b").mkdir(parents=True)
    (root / "train.py").write_text(SCRIPT)
    (root / "records" / "a" / "train.py").write_text(SCRIPT)
    # an archived copy, renamed, with one line of its own and the current script's line twice
    (root / "records" / "b" / "train_v2.py").write_text(SCRIPT + "x = torch.zeros(3, device='cuda')\n" + "model = torch.nn.Linear(2, 2).cuda()\n")
    return root


def test_copies_are_folded_into_the_shallowest_file(tmp_path: Path) -> None:
    section = audit_paths([_tree(tmp_path)], "xla", jobs=1)
    places = [(f.file, f.line, f.rule) for f in section.findings]
    on_top = [f for f in section.findings if f.file == "train.py"]
    assert {f.line for f in on_top} == {2, 3}  # every site of the current script still has its finding
    cuda_call = next(f for f in on_top if f.line == 2)
    assert cuda_call.copies == ["records/a/train.py:2", "records/b/train_v2.py:2", "records/b/train_v2.py:5"]
    assert ("records/b/train_v2.py", 4, "hardcoded-cuda-device") in places  # a line only the copy has stays a finding
    assert not any(f.file == "records/a/train.py" for f in section.findings)


def test_two_lines_of_one_file_are_two_findings_and_one_line_is_one(tmp_path: Path) -> None:
    (tmp_path / "t.py").write_text("import torch\na = torch.ones(1).cuda()\na = torch.ones(1).cuda()\nb = x.cuda(), y.cuda()\n")
    section = audit_paths([tmp_path], "xla", jobs=1)
    dot_cuda = [(f.line, f.column) for f in section.findings if f.rule == "dot-cuda"]
    assert [line for line, _ in dot_cuda] == [2, 3, 4]  # line 4 once, at its first column
    assert dot_cuda[2][1] == 6  # x.cuda(), not y.cuda()


def test_different_scripts_sharing_lines_are_not_copies(tmp_path: Path) -> None:
    """train.py and sample.py of one repository share their setup lines; each is run, each keeps its findings."""
    shared = "import torch\nm = torch.nn.Linear(2, 2).cuda()\ntorch.cuda.synchronize()\n"
    (tmp_path / "train.py").write_text(shared + "".join(f"loss_{i} = m(x_{i}).sum()\n" for i in range(6)))
    (tmp_path / "sample.py").write_text(shared + "".join(f"y_{i} = m.generate(z_{i})\n" for i in range(6)))
    section = audit_paths([tmp_path], "xla", jobs=1)
    assert sorted((f.file, f.line) for f in section.findings) == [("sample.py", 2), ("sample.py", 3), ("train.py", 2), ("train.py", 3)]
    assert all(not f.copies for f in section.findings)


def test_the_console_and_json_name_the_copies(tmp_path: Path) -> None:
    out = tmp_path / "audit.json"
    result = CliRunner().invoke(app, ["audit", str(_tree(tmp_path / "repo")), "--json", str(out)])
    assert "also in 3 copies of this file: records/a/train.py:2, records/b/train_v2.py:2, records/b/train_v2.py:5" in result.output
    data = json.loads(out.read_text())
    found = data["findings"] if "findings" in data else data["audit"]["findings"]
    top = next(f for f in found if f["file"] == "train.py" and f["line"] == 2)
    assert top["copies"] == ["records/a/train.py:2", "records/b/train_v2.py:2", "records/b/train_v2.py:5"]


def test_a_finding_written_before_copies_existed_still_loads() -> None:
    from report_fixtures import rich_report

    from neuronprobe.report.model import Report

    report = rich_report()
    report.audit = AuditSection(findings=[AuditFinding("dot-cuda", "error", "t.py", 2, copies=["c/t.py:2"])])
    data = json.loads(report.to_json())
    assert Report.from_dict(data).audit.findings[0].copies == ["c/t.py:2"]
    data["audit"]["findings"][0].pop("copies")
    assert Report.from_dict(data).audit.findings[0].copies == []


def test_near_identical_siblings_are_alternatives_not_copies(tmp_path: Path) -> None:
    """mae's main_finetune.py and main_linprobe.py: one folder, nearly the same text, both run by users."""
    body = "".join(f"step_{i} = run(model, batch_{i})\n" for i in range(20))
    (tmp_path / "main_finetune.py").write_text(SCRIPT + body + "mode = 'finetune'\n")
    (tmp_path / "main_linprobe.py").write_text(SCRIPT + body + "mode = 'linprobe'\n")
    section = audit_paths([tmp_path], "xla", jobs=1)
    assert sorted((f.file, f.line) for f in section.findings) == [
        ("main_finetune.py", 2),
        ("main_finetune.py", 3),
        ("main_linprobe.py", 2),
        ("main_linprobe.py", 3),
    ]
    assert all(not f.copies for f in section.findings)
