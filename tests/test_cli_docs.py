"""Every command has help text, a README mention and a page of its own; --version works without torch; every
`neuronprobe analyze` example of the README and the documentation pages runs (tests/test_docs_examples.py runs the rest)."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from doc_examples import doc_files
from helpers import ROOT
from typer.testing import CliRunner

from neuronprobe import __version__
from neuronprobe.cli import app


def _commands() -> list[str]:
    group = typer.main.get_command(app)
    return sorted(group.commands)


def test_the_commands_are_the_documented_ones():
    assert _commands() == ["analyze", "audit", "buckets", "cache", "diff", "doctor", "nightly", "parity", "report", "rules", "setup"]


def test_every_command_has_help_a_readme_mention_and_a_page():
    readme = (ROOT / "README.md").read_text()
    group = typer.main.get_command(app)
    for name in _commands():
        command = group.commands[name]
        assert (command.help or "").strip(), f"{name} has no help text"
        result = CliRunner().invoke(app, [name, "--help"])
        assert result.exit_code == 0, result.output
        assert f"[`neuronprobe {name}`](docs/commands/{name}.md)" in readme, f"the README does not link `neuronprobe {name}` to its page"
        page = ROOT / "docs" / "commands" / f"{name}.md"
        assert page.read_text().startswith(f"# neuronprobe {name}\n"), f"{page} is not the page of `neuronprobe {name}`"


def test_version_prints_and_imports_nothing_heavy():
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from neuronprobe.cli import app\n"
        "r = CliRunner().invoke(app, ['--version'])\n"
        "print(r.exit_code, r.output.strip(), [m for m in ('torch', 'pandas', 'matplotlib') if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout.strip()
    assert out == f"0 neuronprobe {__version__} []"


# --- every analyze example of the README and the docs, on a machine with and without the xla-cpu environment (issue 23)

# The examples' placeholders, as files of this repository: examples/tiny_gpt.py has make_inputs for traffic;
# its forward calls torch.unique, which the training capture cannot follow (exit 2), so --train takes the MLP.
_PLACEHOLDERS = {"model.py": "examples/tiny_gpt.py", "lengths.txt": "examples/traffic_lengths.txt"}
_TRAIN_MODEL = "tests/models/mlp.py"
_ANALYZE = re.compile(r"^(?:\$ )?neuronprobe analyze (?P<args>[^#`]+?)\s*(?:#.*)?$")
_INLINE = re.compile(r"`neuronprobe analyze (?P<args>[^`]+)`")
# Text that names `neuronprobe analyze` with an option but no model: prose about the option, not an example;
# and the benchmark's own command (the 6.7B hf:llama config: benchmarks/bench_auto_llama.py measures it, and
# test_backend_xla_cpu's shrink test runs auto on it under a memory limit).
_NOT_COMMANDS = {"--backend auto", "hf:llama"}
# A decode trace in the Azure trace's columns for the docs' `--decode-trace trace.csv`.
_TRACE = "TIMESTAMP,ContextTokens,GeneratedTokens\n0.0,120,30\n0.5,300,12\n1.0,64,200\n1.5,900,40\n2.0,256,64\n"


def readme_analyze_examples() -> list[str]:
    """The argument strings of every `neuronprobe analyze` example of the README and the documentation pages
    (docs/**/*.md): code blocks and inline code, each once, in the order of doc_files()."""
    found: list[str] = []
    texts = [path.read_text() for path in doc_files()]
    for text in texts:
        in_block = False
        for line in text.splitlines():
            if line.lstrip().startswith("```"):
                in_block = not in_block
                continue
            matches = [m.group("args") for m in [_ANALYZE.match(line.strip())] if m] if in_block else _INLINE.findall(line)
            found.extend(a.strip() for a in matches if a.strip() not in _NOT_COMMANDS)
    # the inline "`neuronprobe analyze tv:resnet18` and `timm:vit_tiny_patch16_224`" names a second spec
    if any(a == "tv:resnet18" for a in found) and any("`neuronprobe analyze tv:resnet18` and `timm:vit_tiny_patch16_224`" in t for t in texts):
        found.append("timm:vit_tiny_patch16_224")
    return list(dict.fromkeys(found))


def _argv(example: str, tmp: Path) -> list[str]:
    calls = tmp / "calls.jsonl"
    calls.write_text("".join(json.dumps([[1, n]]) + "\n" for n in (16, 32, 16)))
    trace = tmp / "trace.csv"
    trace.write_text(_TRACE)
    made = {"calls.jsonl": str(calls), "trace.csv": str(trace)}
    out = []
    words = shlex.split(example)
    for word in words:
        word = _TRAIN_MODEL if word == "model.py" and "--train" in words else _PLACEHOLDERS.get(word, word)
        out.append(made[word] if word in made else str(ROOT / word) if (ROOT / word).is_file() else word)
    return ["analyze", *out, "-o", str(tmp / "out"), "--no-html", "--max-compiles", "2"]  # two shapes of traffic evidence: time


def test_the_readme_examples_are_the_ones_run_below():
    # A new example must be added to a machine-state run: this list is the docs', not a copy.
    assert readme_analyze_examples() == [
        "examples/tiny_gpt.py --backend static",
        "hf:llama --set num_hidden_layers=2",
        "model.py --lengths lengths.txt --batch-sizes 1,4,8",
        "tv:resnet18",
        "model.py --audit .",
        "model.py --parity",
        "model.py --backend xla-cpu",
        "model.py --decode-trace trace.csv",
        "model.py --serving-trace trace.csv --max-num-batched-tokens 512 --max-num-seqs 4 --max-model-len 4096",
        "model.py --target trn2 --backend static",
        "model.py --shapes calls.jsonl",
        "model.py",
        "model.py --train",
        "hf:gpt2 --train --optimizer adamw --optimizer-impl foreach",
        "model.py --train --dataset-size 1000 --batch-size 64",
        "timm:vit_tiny_patch16_224",
    ]


def _python_examples() -> list[tuple[str, str, str]]:
    """The README's two Python calls of neuronprobe.analyze: (example, backend name, backend detail)."""
    import torch

    import neuronprobe

    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
    first = neuronprobe.analyze(model, (torch.randn(2, 8),))
    second = neuronprobe.analyze(str(ROOT / _TRAIN_MODEL), train=True, optimizer="sgd", optimizer_impl="for-loop")
    return [
        ("analyze(model, example_inputs)", first.backend.name, first.backend.detail),
        ("analyze('model.py', train=True)", second.backend.name, second.backend.detail),
    ]


def _run_examples(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, tuple[int, str]]:
    monkeypatch.chdir(tmp_path)  # `--audit .` audits this folder, not the repository
    results = {}
    for example in readme_analyze_examples():
        result = CliRunner().invoke(app, _argv(example, tmp_path))
        results[example] = (result.exit_code, result.output)
    return results


def test_every_readme_example_runs_without_the_xla_cpu_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("NEURONPROBE_XLA_ENV", str(tmp_path / "no-env"))  # conftest unsets NEURONPROBE_XLA_PYTHON
    results = _run_examples(tmp_path, monkeypatch)
    for example, (code, output) in results.items():
        if example == "model.py --backend xla-cpu":  # asked for explicitly: one line, exit 2
            assert code == 2 and "--backend xla-cpu: no xla-cpu environment at" in output, (example, output)
            continue
        assert code == 0, (example, output)
        assert "backend static" in output, (example, output)
        if "--backend static" not in example:  # the default says why it did not observe
            assert "xla-cpu not used: no xla-cpu environment" in output, (example, output)
    for example, name, detail in _python_examples():
        assert name == "static" and "xla-cpu not used: no xla-cpu environment" in detail, example


@pytest.mark.slow
def test_every_readme_example_runs_with_the_xla_cpu_environment(tmp_path, monkeypatch, xla_env):
    results = _run_examples(tmp_path, monkeypatch)
    for example, (code, output) in results.items():
        assert code == 0, (example, output)  # auto never does worse than static
        observed = "backend xla-cpu" in output
        if "--backend static" in example:  # asked for: the README's first example shows the static output
            assert not observed and "backend static" in output, (example, output)
        elif example.startswith(("tv:", "timm:")):
            assert not observed and "auto: xla-cpu not used: " + example + " is built by torchvision/timm" in output.replace("\n", " ")
        else:
            assert observed, (example, output)
    (first, second) = _python_examples()
    assert first[1] == "static" and "auto: xla-cpu not used: a model object lives in this process" in first[2]
    assert second[1] == "xla-cpu", second
