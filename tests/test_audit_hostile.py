"""The audit surface against hostile and broken input (issue 29, points 2, 3 and 8).

Each test builds its own small tree in tmp_path: FIFOs, device links, unreadable
folders, bad .gitignore patterns, lines built to make a regular expression
backtrack, nesting deeper than the parser takes, baselines with the wrong types.
The contract: the audit finishes, lists what it did not read, exits 0/1 on a
usable input and 2 with one line on an unusable one, never 3, and never changes
its inputs.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import neuronprobe.audit.python_scan as python_scan
import neuronprobe.audit.reading as reading
import neuronprobe.audit.suppress as suppress
import neuronprobe.audit.text_scan as text_scan
from neuronprobe.audit.engine import audit_inputs, audit_paths
from neuronprobe.audit.sarif import to_sarif
from neuronprobe.audit.suppress import load_baseline
from neuronprobe.cli import app
from neuronprobe.errors import InputError

runner = CliRunner()
SYNC = "import torch\ntorch.cuda.synchronize()\n"


def _cli(args: list[str]) -> tuple[int, str]:
    result = runner.invoke(app, ["audit", *args])
    assert "Traceback" not in result.output, result.output
    return result.exit_code, result.output


def _one_line_exit_2(args: list[str], *needles: str) -> None:
    code, output = _cli(args)
    assert code == 2, output
    assert len(output.strip().splitlines()) == 1, output
    for needle in needles:
        assert needle in output, output


# --- what the walk reads: regular files only, and nothing skipped without a word --------------


def test_a_fifo_in_the_tree_is_listed_and_never_opened(tmp_path: Path) -> None:
    (tmp_path / "ok.py").write_text(SYNC)
    os.mkfifo(tmp_path / "train.py")  # opening it for reading would wait for a writer forever
    os.mkfifo(tmp_path / ".gitignore")
    section = audit_paths([tmp_path], jobs=1)
    assert [f.file for f in section.findings] == ["ok.py"]
    assert [(p.file, p.kind, p.detail) for p in section.problems] == [
        (".gitignore", "not-read", "a FIFO: not read; its patterns do not apply"),
        ("train.py", "not-read", "a FIFO: not read"),
    ]


def test_a_symlink_to_dev_zero_is_listed_as_a_device(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").symlink_to("/dev/zero")  # read() would never end
    (tmp_path / "ok.py").write_text(SYNC)
    section = audit_paths([tmp_path], jobs=1)
    assert section.files_scanned == 1 and [f.file for f in section.findings] == ["ok.py"]
    assert [(p.file, p.detail) for p in section.problems] == [("requirements.txt", "a character device: not read")]


def test_a_file_swapped_for_a_fifo_after_the_walk_is_refused_on_the_open_descriptor(tmp_path: Path) -> None:
    fifo = tmp_path / "late.py"
    os.mkfifo(fifo)
    with pytest.raises(reading.NotRegularFile, match="a FIFO"):
        reading.read_regular(fifo)


def test_a_file_over_the_cap_is_listed_not_read(tmp_path: Path) -> None:
    big = tmp_path / "requirements.txt"
    with big.open("wb") as fh:  # sparse: no disk, no time
        fh.truncate(reading.MAX_FILE_BYTES + 1)
    (tmp_path / "ok.py").write_text(SYNC)
    section = audit_paths([tmp_path], jobs=1)
    assert [(p.file, p.kind, p.detail) for p in section.problems] == [("requirements.txt", "not-read", "larger than 4 MiB: not audited")]
    assert [f.file for f in section.findings] == ["ok.py"]


def test_an_unreadable_folder_is_listed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "ok.py").write_text(SYNC)
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "hidden.py").write_text(SYNC)
    locked.chmod(0)
    # chmod 0 does not stop root (these tests may run as root): refuse the listing as the kernel would
    real_scandir = os.scandir

    def scandir(path: object = ".") -> object:
        if os.fspath(path) == str(locked):  # type: ignore[arg-type]
            raise PermissionError(13, "Permission denied", str(locked))
        return real_scandir(path)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "scandir", scandir)
    try:
        section = audit_paths([tmp_path], jobs=1)
    finally:
        locked.chmod(0o755)
    assert [f.file for f in section.findings] == ["ok.py"]
    assert [(p.file, p.kind, p.detail) for p in section.problems] == [("locked/", "unreadable", "folder not listed: Permission denied")]
    code, output = _cli([str(tmp_path), "-j", "1"])
    assert code == 0 and "not audited/problem: locked/: folder not listed: Permission denied" in output


def test_a_fifo_or_a_device_as_the_root_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    _one_line_exit_2([str(fifo)], "a FIFO, not a file or folder to audit")
    _one_line_exit_2(["/dev/null"], "a character device, not a file or folder to audit")


def test_an_empty_path_is_refused(tmp_path: Path) -> None:
    _one_line_exit_2([""], "an empty PATH")
    _one_line_exit_2([str(tmp_path), ""], "an empty PATH")


def test_the_same_path_twice_is_audited_once(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(SYNC)
    twice = audit_paths([tmp_path, tmp_path, str(tmp_path) + "/"], jobs=1)
    assert twice.files_scanned == 1 and len(twice.findings) == 1 and twice.roots == [str(tmp_path)]
    inside = audit_paths([tmp_path, tmp_path / "train.py"], jobs=1)  # a file inside a folder also given
    assert inside.files_scanned == 1 and len(inside.findings) == 1


def test_a_bad_gitignore_pattern_is_listed_and_the_other_patterns_apply(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("[z-a]\nbuild/\n")
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "gen.py").write_text(SYNC)
    (tmp_path / "train.py").write_text(SYNC)
    section = audit_paths([tmp_path], jobs=1)
    assert [f.file for f in section.findings] == ["train.py"]
    assert [(p.file, p.line, p.kind) for p in section.problems] == [(".gitignore", 1, "gitignore")]
    assert "pattern '[z-a]' ignored: bad character range z-a" in section.problems[0].detail
    code, _ = _cli([str(tmp_path), "-j", "1"])
    assert code == 0


def test_a_nested_gitignore_negation_re_includes_as_git_does(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("*.py\n")
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / ".gitignore").write_text("!keep.py\n")
    for path in (tmp_path / "top.py", sub / "keep.py", sub / "other.py"):
        path.write_text(SYNC)
    section = audit_paths([tmp_path], jobs=1)
    assert [f.file for f in section.findings] == ["sub/keep.py"]
    # a later pattern in the deeper file wins over its own earlier one, too
    (sub / ".gitignore").write_text("!*.py\nother.py\n")
    assert [f.file for f in audit_paths([tmp_path], jobs=1).findings] == ["sub/keep.py"]


def test_audit_inputs_names_every_file_the_audit_reads(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("skip.py\n")
    (tmp_path / "train.py").write_text(SYNC)
    (tmp_path / "skip.py").write_text(SYNC)
    (tmp_path / "Dockerfile").write_text("FROM python:3.11\n")
    baseline = tmp_path / "base.json"
    inputs = {p.resolve() for p in audit_inputs([tmp_path], baseline=baseline)}
    assert inputs == {tmp_path.resolve(), *(tmp_path / n for n in (".gitignore", "train.py", "Dockerfile", "base.json"))}


# --- lines as the syntax tree numbers them ----------------------------------------------------


def test_a_suppression_after_a_form_feed_still_silences_its_line(tmp_path: Path) -> None:
    # \f is whitespace to the tokenizer and a line break to str.splitlines
    (tmp_path / "ff.py").write_text(
        "import torch\n\x0c\ntorch.cuda.synchronize()  # neuronprobe: ignore[cuda-synchronize]\nx = 1\x0c\ny = torch.zeros(1).cuda()\n"
    )
    section = audit_paths([tmp_path], jobs=1)
    assert section.suppressed == 1
    assert [(f.rule, f.line, f.snippet) for f in section.findings] == [("dot-cuda", 5, "y = torch.zeros(1).cuda()")]


def test_a_snippet_after_a_u2028_is_the_line_the_tree_names(tmp_path: Path) -> None:
    (tmp_path / "ls.py").write_text('import torch\nNOTE = "a\u2028b"\ntorch.cuda.synchronize()\n', encoding="utf-8")
    (tmp_path / "requirements.txt").write_text("# \u2028 note\n--index-url https://download.pytorch.org/whl/cu121\n", encoding="utf-8")
    section = audit_paths([tmp_path], jobs=1)
    assert [(f.file, f.line, f.snippet) for f in section.findings] == [
        ("ls.py", 3, "torch.cuda.synchronize()"),
        ("requirements.txt", 2, "--index-url https://download.pytorch.org/whl/cu121"),
    ]


# --- time linear in the input ------------------------------------------------------------------

PATTERNS = [
    (f"{m.__name__}.{name}", value) for m in (text_scan, suppress, python_scan, reading) for name, value in vars(m).items() if isinstance(value, re.Pattern)
]
PREFIXES = ["", " ", "FROM ", "- image: ", "[", "[[", "dependencies = [", "nvidia-", "# neuronprobe: ignore[", "torch==", "name = "]
FRAGMENTS = [" ", "\t", "=", "@", "[", "-", "#", "a", "1", ":", "/", "+cu1", "-cu1", "--a ", "# neuronprobe: ignore[a", "[ ", "-cuda1", "a="]


def test_every_pattern_is_found_by_the_sweep() -> None:
    names = {n.rsplit(".", 1)[1] for n, _ in PATTERNS}
    assert {"CUDA_INDEX", "IMAGE_KEY", "TOML_TABLE", "SUPPRESSION", "FROM_LINE", "PREFILTER", "CUDA_ONLY_WHEEL"} <= names


@pytest.mark.parametrize(("name", "pattern"), PATTERNS, ids=[n for n, _ in PATTERNS])
def test_no_pattern_backtracks_on_a_long_line(name: str, pattern: re.Pattern) -> None:
    """Every prefix x fragment line of 20,000 characters, searched: a pattern that is quadratic in the
    line takes 0.2 s to seconds of CPU on one of them (the old IMAGE_KEY, TOML_TABLE and CUDA_INDEX
    took over 0.5 s, the old SUPPRESSION 0.2 s); a linear one takes about a millisecond. CPU time,
    so a loaded machine does not fail it; the bound is a guard against blow-up, not a benchmark."""
    worst = 0.0
    for prefix in PREFIXES:
        for fragment in FRAGMENTS:
            line = prefix + fragment * (20_000 // len(fragment))
            subject = line.encode() if isinstance(pattern.pattern, bytes) else line
            start = time.process_time()
            pattern.search(subject)
            worst = max(worst, time.process_time() - start)
    assert worst < 0.1, f"{name}: {worst:.2f} s of CPU on one 20,000-character line"


@pytest.mark.parametrize(
    ("name", "line"),
    [
        ("suppressed.py", "x = 1  " + "# neuronprobe: ignore[" * 5_000),
        ("requirements.txt", "torch" + "=" * 100_000),
        ("pyproject.toml", "[" + " " * 100_000),
        (".github/workflows/ci.yml", " " * 100_000),
        ("Dockerfile", "FROM " + "--a " * 25_000),
    ],
)
def test_a_100k_character_line_is_audited_at_once(tmp_path: Path, name: str, line: str) -> None:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    # the Python file has a finding, so its suppression comments are parsed too
    path.write_text(SYNC + line + "\n" if name.endswith(".py") else line + "\n")
    start = time.process_time()
    section = audit_paths([tmp_path], jobs=1)
    assert time.process_time() - start < 1.0  # quadratic was seconds to minutes at this length
    assert section.files_scanned == 1 and section.problems == []


# --- nesting deeper than the parser takes ------------------------------------------------------


@pytest.mark.parametrize("expression", ["-" * 100_000 + "1", "+".join(["a"] * 100_000), "f" + "()" * 100_000, "(" * 5_000 + ")" * 5_000])
def test_a_deeply_nested_file_is_listed_as_unparsable(tmp_path: Path, expression: str) -> None:
    (tmp_path / "deep.py").write_text(f"import torch\nx = {expression}\ntorch.cuda.synchronize()\n")
    (tmp_path / "ok.py").write_text(SYNC)
    section = audit_paths([tmp_path], jobs=1)
    assert [f.file for f in section.findings] == ["ok.py"]
    assert [(p.file, p.kind) for p in section.problems] == [("deep.py", "syntax")]
    assert section.problems[0].detail.endswith("not audited")
    code, _ = _cli([str(tmp_path / "deep.py")])
    assert code == 0


# --- SARIF locations ------------------------------------------------------------------------


def test_sarif_uses_srcroot_only_for_relative_paths(tmp_path: Path) -> None:
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "a.py").write_text(SYNC)
    single = tmp_path / "b.py"
    single.write_text(SYNC)
    folder = to_sarif(audit_paths([tmp_path / "repo"], jobs=1), "0")
    assert folder["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"] == {"uri": "a.py", "uriBaseId": "%SRCROOT%"}
    absolute = to_sarif(audit_paths([single], jobs=1), "0")
    assert absolute["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"] == {"uri": single.as_uri()}
    both = to_sarif(audit_paths([tmp_path / "repo", single], jobs=1), "0")
    uris = [r["locations"][0]["physicalLocation"]["artifactLocation"] for r in both["runs"][0]["results"]]
    assert all("uriBaseId" not in u and u["uri"].startswith("file:///") for u in uris)


# --- baselines validated on load, naming the file and the field ---------------------------------


def _finding(**overrides: object) -> dict[str, object]:
    return {"rule": "dot-cuda", "file": "a.py", "line": 3, "snippet": "x.cuda()", "severity": "warning", **overrides}


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (json.dumps({"findings": [_finding(line="abc")]}), "audit.findings[0].line: expected an integer, got str"),
        ('{"findings": [{"rule": "r", "file": "f", "snippet": "s", "line": Infinity}]}', "not valid JSON (Infinity is not JSON)"),
        ('{"findings": [{"rule": "r", "file": "f", "snippet": "s", "line": NaN}]}', "not valid JSON (NaN is not JSON)"),
        (json.dumps({"findings": [_finding(line=[1, 2])]}), "audit.findings[0].line: expected an integer, got list"),
        (json.dumps({"findings": [_finding(line=True)]}), "audit.findings[0].line: expected an integer, got bool"),
        (json.dumps({"findings": [_finding(line=2.5)]}), "audit.findings[0].line: expected an integer, got float"),
        (json.dumps({"findings": [_finding(line=-1)]}), "audit.findings[0].line: expected a line number (0 or more), got -1"),
        (json.dumps({"findings": [_finding(), _finding(rule=["x"])]}), "audit.findings[1].rule: expected str, got list"),
        (json.dumps({"findings": [_finding(severity=1)]}), "audit.findings[0].severity: expected str, got int"),
        (json.dumps({"findings": [{"rule": "r", "file": "f", "severity": "error"}]}), "audit.findings[0]: missing field 'line'"),
        (json.dumps({"findings": [_finding(colour="red")]}), "audit.findings[0].colour: unknown field (not in this neuronprobe's schema)"),
        (json.dumps({"schema_version": 2, "findings": []}), "written by a newer neuronprobe (audit JSON schema_version 2; this neuronprobe reads 1 to 1)"),
        (json.dumps({"findings": ["x"]}), "audit.findings[0]: expected an object, got str"),
        ("[" * 100_000 + "]" * 100_000, "--baseline"),
        ("\udcff", "not UTF-8"),
    ],
)
def test_a_malformed_baseline_exits_2_naming_the_file_and_the_field(tmp_path: Path, text: str, needle: str) -> None:
    (tmp_path / "a.py").write_text(SYNC)
    base = tmp_path / "base.json"
    base.write_bytes(text.encode("utf-8", errors="surrogateescape"))
    before = base.read_bytes()
    _one_line_exit_2([str(tmp_path / "a.py"), "--baseline", str(base)], f"--baseline {base}", needle)
    assert base.read_bytes() == before


def test_a_fifo_or_a_folder_as_the_baseline_exits_2(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(SYNC)
    os.mkfifo(tmp_path / "pipe.json")
    _one_line_exit_2([str(tmp_path / "a.py"), "--baseline", str(tmp_path / "pipe.json")], "a FIFO: not read")
    _one_line_exit_2([str(tmp_path / "a.py"), "--baseline", str(tmp_path)], "a folder: not read")


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.sampled_from(["findings", "rule", "file", "line", "snippet", "severity", "x"]), children, max_size=6)
    ),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.one_of(
        JSON_VALUES.map(lambda v: json.dumps(v).encode()), st.binary(max_size=200), JSON_VALUES.map(lambda v: json.dumps({"findings": [v]}).encode())
    )
)
def test_fuzzed_baselines_load_or_are_refused_and_stay_byte_identical(tmp_path: Path, data: bytes) -> None:
    base = tmp_path / "fuzz.json"
    base.write_bytes(data)
    try:
        findings = load_baseline(base)
    except InputError as exc:
        message = str(exc)
        assert message.startswith(f"--baseline {base}") and "\n" not in message
    else:
        assert all(isinstance(f.line, int) and f.line >= 0 and isinstance(f.rule, str) for f in findings)
    assert base.read_bytes() == data


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.one_of(JSON_VALUES.map(lambda v: json.dumps({"findings": [v]}).encode()), st.binary(max_size=64)))
def test_fuzzed_baselines_through_the_cli_exit_0_or_2_in_one_line(tmp_path: Path, data: bytes) -> None:
    source = tmp_path / "a.py"
    source.write_text(SYNC)
    base = tmp_path / "fuzz.json"
    base.write_bytes(data)
    code, output = _cli([str(source), "--baseline", str(base), "-j", "1"])
    assert code in (0, 2), output
    if code == 2:
        assert len(output.strip().splitlines()) == 1 and f"--baseline {base}" in output
    assert base.read_bytes() == data and source.read_text() == SYNC
