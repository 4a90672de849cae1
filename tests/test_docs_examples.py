"""Every example of the README and the documentation site runs, or says why it cannot and still parses.

The examples are read by tests/doc_examples.py. `neuronprobe analyze` examples are run by tests/test_cli_docs.py
(with and without the xla-cpu environment); this file runs every other command example and every Python
example, once each however many pages show it, in a scratch folder where the examples' placeholder files
exist. A block marked `<!-- not-run: reason -->` is parsed instead: the command and its options must exist.
"""

from __future__ import annotations

import functools
import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import typer
from doc_examples import Block, Command, all_blocks, all_commands, doc_files, python_blocks
from helpers import ROOT
from report_fixtures import rich_report
from test_cli_docs import readme_analyze_examples
from typer.testing import CliRunner

from neuronprobe.cli import app
from neuronprobe.nightly.run import SUMMARY_FILE
from neuronprobe.report.model import load_report

SERVING = ROOT / "tests" / "data" / "serving"

# A nightly configuration for the `CONFIG` placeholder: one small model file, so that --jobs, --shard and merge run
# their whole course in seconds.
_CONFIG = 'target = "trn1"\nbackend = "static"\n\n[[models]]\nname = "mlp"\nmodel = "model.py"\nlengths = "lengths.txt"\nbatch_sizes = [1, 4]\n'

# What a command example must end with when exit 0 is not its answer here: the xla-cpu environment is hidden
# from this run (as in test_cli_docs' run without it), so asking for it is one line and exit 2.
_EXPECTED = {
    "parity model.py --dtype bf16 --backend xla-cpu": (2, "no xla-cpu environment at"),
}


def _placeholders(tmp: Path) -> None:
    """The files the examples name, made in the scratch folder under the names the pages use."""
    shutil.copy(ROOT / "tests" / "models" / "mlp.py", tmp / "model.py")  # has make_inputs; its step trains
    shutil.copy(ROOT / "examples" / "traffic_lengths.txt", tmp / "lengths.txt")
    rng = np.random.default_rng(1)
    times, prompts, outputs = np.sort(rng.uniform(0, 60, 300)), rng.integers(20, 3000, 300), rng.integers(2, 300, 300)
    trace = "TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(f"{t:.3f},{p},{o}\n" for t, p, o in zip(times, prompts, outputs, strict=True))
    for name in ("trace.csv", "AzureLLMInferenceTrace_conv.csv"):
        (tmp / name).write_text(trace)
    (tmp / "requests.jsonl").write_text("".join(json.dumps({"prompt_len": int(p)}) + "\n" for p in prompts))
    (tmp / "calls.jsonl").write_text("".join(json.dumps([[1, n]]) + "\n" for n in (16, 32, 16)))
    for name in ("compile_times.csv", "scrape_1.prom", "scrape_2.prom"):
        shutil.copy(SERVING / name, tmp / name)
    (tmp / "CONFIG").write_text(_CONFIG)
    # examples/nightly.toml as it is, with two shapes of traffic evidence per model (test_cli_docs' analyze runs
    # pass --max-compiles 2 for the same reason: each compile costs seconds, and 16 would cost minutes)
    (tmp / "examples").mkdir()
    for name in ("tiny_gpt.py", "request_lengths.txt"):
        shutil.copy(ROOT / "examples" / name, tmp / "examples" / name)
    config = (ROOT / "examples" / "nightly.toml").read_text()
    (tmp / "examples" / "nightly.toml").write_text(config.replace("[[models]]\n", "[[models]]\nmax_compiles = 2\n"))


# Reports the diff and report examples read, made when the first example names them (not before: a report in
# reports/ is history to the nightly examples that run first).
_REPORTS = ("reports/2025-06-01/tiny_gpt.json", "reports/2025-06-02/tiny_gpt.json", "reports/model.json")


def _make_reports(words: tuple[str, ...], tmp: Path) -> None:
    for name in set(words) & set(_REPORTS):
        if not (tmp / name).exists():
            (tmp / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp / name).write_text(rich_report().to_json())


# The README's nightly example, run on its own config (examples/nightly.toml, two compiles per model) as the
# first night of an empty reports folder: what the example config is meant to show.
_EXAMPLE_NIGHT = "nightly examples/nightly.toml"


def _check_the_example_night(reports: Path) -> None:
    """Both models of examples/nightly.toml are analysed, each a first run; tiny_gpt shows its dynamic shape
    and its compile error (moved from tests/test_nightly_e2e.py, which ran the same config a second time)."""
    (night,) = [folder for folder in reports.iterdir() if folder.is_dir() and not folder.name.startswith(".")]  # not .cache
    summary = json.loads((night / SUMMARY_FILE).read_text())
    assert [(m["name"], m["status"]) for m in summary["models"]] == [("tiny_gpt", "first_run"), ("gpt2-2layer", "first_run")]
    tiny = load_report(str(night / "tiny_gpt.json"))
    assert {f.verdict for f in tiny.findings} >= {"dynamic_shape", "compile_error"}


def _argv(command: Command, tmp: Path) -> list[str]:
    """The command's words as a shell would pass them here: repository files by their path, globs expanded.
    An `hf:gpt2` of a parity example is built one layer deep and 64 wide: the example is about the precisions,
    and twelve GPT-2 layers at four of them cost half a minute of the suite."""
    out: list[str] = []
    for word in command.words:
        if not (tmp / word).exists() and (ROOT / word).exists():
            word = str(ROOT / word)
        out.extend(sorted(glob.glob(word, root_dir=tmp)) if any(c in word for c in "*?[") else [word])
    if out[0] == "parity" and out[1].startswith("hf:gpt2"):
        out[2:2] = ["--set", "n_layer=1", "--set", "n_embd=64", "--set", "n_head=2"]
    return out


def _run(argv: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(app, argv)
    return result.exit_code, result.output


@functools.cache
def _cli_commands() -> dict[str, Any]:
    """The command line's commands by name, built once (typer builds them anew on every call)."""
    return dict(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


def _parses(words: tuple[str, ...]) -> None:
    """The command exists and takes these options and arguments (their values are not converted: the files
    are the user's). Raises the command line's own usage error (NoSuchOption, UsageError) if not."""
    commands = _cli_commands()
    assert words and words[0] in commands, f"no command `neuronprobe {words[0] if words else ''}`"
    command, name, args = commands[words[0]], words[0], list(words[1:])
    while hasattr(command, "commands"):  # a group (`nightly`): its own routing picks the sub-command (`nightly CONFIG` runs)
        if not args:  # the group named alone in the text: it exists
            return
        group_context = command.context_class(command, info_name=name)
        command.parse_args(group_context, args)
        protected = getattr(group_context, "_protected_args", None) or group_context.protected_args
        assert protected, f"`neuronprobe {' '.join(words)}` names no sub-command of `{name}`"
        name, args = protected[0], list(group_context.args)
        assert name in command.commands, f"no command `neuronprobe {words[0]} {name}`"
        command = command.commands[name]
    context = command.context_class(command, info_name=name)  # not resilient: a usage error raises
    _, extra, _ = command.make_parser(context).parse_args(args)
    if extra:
        context.fail(f"Got unexpected extra argument(s) ({' '.join(extra)})")


def _usage_error(e: Exception) -> str | None:
    """The message of a command-line usage error (typer vendors click, so its classes are matched by name)."""
    names = {cls.__name__ for cls in type(e).__mro__}
    return e.format_message() if "UsageError" in names and hasattr(e, "format_message") else None


# --- what the pages hold ----------------------------------------------------------------------------------


def test_every_not_run_mark_gives_a_reason_and_stands_above_a_block():
    marked = {(b.path, b.line - 1) for b in all_blocks() if b.not_run}
    for path in doc_files():
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if line.strip().startswith("<!--") and "not-run" in line:
                assert (path, number) in marked, f"{path.relative_to(ROOT)}:{number}: a not-run mark not directly above a code block"
    for block in all_blocks():
        if block.not_run:
            assert len(block.not_run) >= 10, f"{block.where}: say why the example cannot run here"
            assert commands_or_python(block), f"{block.where}: a not-run mark on a block with no example"


def commands_or_python(block: Block) -> bool:
    return block.lang == "python" or any(c.block == block for c in all_commands())


def test_every_command_example_parses_run_or_not():
    commands = all_commands()
    assert len(commands) >= 50 and {c.words[0] for c in commands} >= {
        "analyze",
        "parity",
        "audit",
        "buckets",
        "diff",
        "nightly",
        "rules",
        "doctor",
        "setup",
        "report",
        "cache",
    }
    for command in commands:
        try:
            _parses(command.words)
        except Exception as e:  # a usage error is the finding; anything else is raised
            if (message := _usage_error(e)) is None:
                raise
            pytest.fail(f"{command.block.where}: `neuronprobe {command.text}`: {message}")


def test_every_command_named_in_the_text_parses():
    # prose names commands inline (`neuronprobe audit . --stack native`): they must exist and take those options too
    named = []
    for path in doc_files():
        text = re.sub(r"^\s*```.*?^\s*```", "", path.read_text(), flags=re.S | re.M)
        named += [(path, m.group(1)) for m in re.finditer(r"`neuronprobe ([^`]+)`", text)]
    assert len(named) >= 50
    for path, words in named:
        try:
            _parses(tuple(shlex.split(words, comments=True)))
        except Exception as e:  # a usage error is the finding; anything else is raised
            if (message := _usage_error(e)) is None:
                raise
            pytest.fail(f"{path.relative_to(ROOT)}: `neuronprobe {words}`: {message}")


def test_a_renamed_option_fails_the_parse_check():
    _parses(("buckets", "lengths.txt", "--fit", "strict"))
    with pytest.raises(Exception, match="No such option: --fitting") as raised:
        _parses(("buckets", "lengths.txt", "--fitting", "strict"))
    assert _usage_error(raised.value) is not None
    with pytest.raises(Exception, match="unexpected extra argument") as raised:
        _parses(("diff", "a.json", "b.json", "c.json"))
    assert _usage_error(raised.value) is not None
    with pytest.raises(AssertionError, match="no command"):
        _parses(("analyse", "model.py"))


def test_the_magics_take_the_command_lines_arguments():
    magics = [
        line.split("%neuronprobe", 1)[1].split("#")[0].split()
        for b in all_blocks()
        for line in b.text.splitlines()
        if "%neuronprobe " in line and "%%neuronprobe" not in line
    ]
    assert len(magics) == 2  # docs/notebooks.md; tests/test_notebook_kernel.py runs the magics in a real kernel
    for words in magics:
        _parses(tuple(words))


def test_every_python_example_compiles():
    blocks = python_blocks()
    assert len(blocks) >= 9
    for block in blocks:
        compile(block.text, block.where, "exec")


def _slugs(page: Path) -> set[str]:
    """The anchors of a page's headings, as the site's Markdown (the toc extension) makes them."""
    from markdown.extensions.toc import slugify

    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)
    return {slugify(re.sub(r"[`*]", "", m.group(1)), "-") for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


def test_the_readmes_links_resolve():
    # GitHub shows the README; its links into the site are relative paths to the pages under docs/
    links = re.findall(r"\]\(([^)\s]+)\)", (ROOT / "README.md").read_text())
    local = [link for link in links if not re.match(r"[a-z]+:", link)]
    assert len(local) >= 25 and all(link.startswith(("docs/", "ARCHITECTURE.md")) for link in local), local
    for link in local:
        path, _, anchor = link.partition("#")
        assert (ROOT / path).is_file(), f"README.md links {link}: no such file"
        if anchor:
            assert anchor in _slugs(ROOT / path), f"README.md links {link}: {path} has no heading #{anchor}"


def test_the_site_builds_with_broken_links_failing(tmp_path):
    # what `make docs` runs; --strict turns a broken link or anchor, or a page left out of the nav, into a failure
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    pages = {p.relative_to(ROOT / "docs").with_suffix("").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    built = {p.parent.relative_to(tmp_path / "site").as_posix() for p in (tmp_path / "site").rglob("index.html")}
    assert {page for page in pages if page != "index"} <= built


# --- running them -------------------------------------------------------------------------------------------


def test_every_command_example_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("NEURONPROBE_XLA_ENV", str(tmp_path / "no-env"))  # as test_cli_docs' run without it
    monkeypatch.chdir(tmp_path)
    _placeholders(tmp_path)
    analyzed = set(readme_analyze_examples())
    ran: dict[str, tuple[int, str]] = {}
    seconds: dict[str, float] = {}
    for command in all_commands():
        if command.block.not_run or command.text in ran:
            continue
        if command.words[0] == "analyze":  # run by test_cli_docs, on machines with and without xla-cpu
            assert command.text.removeprefix("analyze ") in analyzed, command.block.where
            continue
        _make_reports(command.words, tmp_path)
        started = time.perf_counter()
        ran[command.text] = code, output = _run(_argv(command, tmp_path))
        seconds[command.text] = time.perf_counter() - started
        want_code, want_text = _EXPECTED.get(command.text, (0, ""))
        assert code == want_code and want_text in output, (command.block.where, command.text, output[-3000:])
        if command.text == _EXAMPLE_NIGHT:
            _check_the_example_night(tmp_path / "reports")
        if "--shard 2/8" in command.text:  # the rest of the matrix this job is one of, for the merge that follows
            for i in (1, 3, 4, 5, 6, 7, 8):
                argv = [w.replace("2/8", f"{i}/8").replace("shard-2", f"shard-{i}") for w in _argv(command, tmp_path)]
                assert _run(argv)[0] == 0, argv
    assert set(_EXPECTED) <= set(ran)
    print("\n".join(f"{s:6.1f} s  neuronprobe {text}" for text, s in sorted(seconds.items(), key=lambda kv: -kv[1])))
    # what the examples say they write
    for written in ("buckets.json", "decode.json", "plan.json", "audit.sarif", "model.html", "refs/model/manifest.json"):
        assert (tmp_path / written).is_file(), written
    assert any((tmp_path / "reports").glob("*/tiny_gpt.json")) and (tmp_path / "reports" / "index.html").is_file()


def _prelude() -> dict[str, object]:
    """The names the Python examples take as given: a model and its inputs, lengths, a trace, a report
    (the README's first example analyses the model itself)."""
    import pandas as pd
    import torch
    import torch.nn.functional as F

    import neuronprobe

    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
    example_inputs = (torch.randn(2, 8),)
    rng = np.random.default_rng(2)
    times = np.sort(rng.uniform(0, 60, 200))
    df = pd.DataFrame({"TIMESTAMP": times, "ContextTokens": rng.integers(20, 3000, 200), "GeneratedTokens": rng.integers(2, 300, 200)})
    lengths = [int(n) for n in (ROOT / "examples" / "traffic_lengths.txt").read_text().split()]
    return {
        "torch": torch,
        "F": F,
        "pd": pd,
        "neuronprobe": neuronprobe,
        "model": model,
        "example_inputs": example_inputs,
        "df": df,
        "lengths": lengths,
        "report": rich_report(),  # a report with findings and traffic, for the gates
    }


def test_every_python_example_runs(monkeypatch):
    monkeypatch.setenv("NEURONPROBE_XLA_ENV", "/nonexistent/xla-cpu")  # a model file is analysed statically here
    prelude = _prelude()
    seen: set[str] = set()
    ran = 0
    for path in doc_files():
        scope = dict(prelude)  # the blocks of one page share their names, in page order
        for block in (b for b in python_blocks() if b.path == path):
            if block.not_run or block.text in seen:
                continue
            seen.add(block.text)
            code = re.sub(r"""(["'])model\.py\1""", repr(str(ROOT / "tests" / "models" / "mlp.py")), block.text)
            try:
                exec(compile(code, block.where, "exec"), scope)
            except Exception as e:  # the example's own failure is the finding
                pytest.fail(f"{block.where}: {type(e).__name__}: {e}")
            ran += 1
    assert ran >= 8
