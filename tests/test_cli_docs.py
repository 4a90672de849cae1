"""Every command has help text and is documented in the README; --version works without torch."""

from __future__ import annotations

import subprocess
import sys

import typer
from helpers import ROOT
from typer.testing import CliRunner

from neuronprobe import __version__
from neuronprobe.cli import app


def _commands() -> list[str]:
    group = typer.main.get_command(app)
    return sorted(group.commands)


def test_the_commands_are_the_documented_ones():
    assert _commands() == ["analyze", "audit", "buckets", "diff", "doctor", "nightly", "report", "setup"]


def test_every_command_has_help_and_a_readme_mention():
    readme = (ROOT / "README.md").read_text()
    group = typer.main.get_command(app)
    for name in _commands():
        command = group.commands[name]
        assert (command.help or "").strip(), f"{name} has no help text"
        result = CliRunner().invoke(app, [name, "--help"])
        assert result.exit_code == 0, result.output
        assert f"neuronprobe {name}" in readme, f"the README never shows `neuronprobe {name}`"


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
