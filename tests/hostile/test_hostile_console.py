"""Console output is inert: terminal control characters in paths and names are shown escaped, never sent raw.

A file called ``x\\x1b]0;pwned\\x07.py`` must not retitle the terminal that runs ``neuronprobe audit``;
``\\x1b[2J`` must not clear it; a right-to-left override must not reorder a path. Every command prints
through :func:`neuronprobe.console_io.make_console`, whose render hook applies :func:`inert` to all text.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from neuronprobe.cli import app
from neuronprobe.cli.common import err_console, out_console
from neuronprobe.console_io import inert

runner = CliRunner()
TITLE = "\x1b]0;pwned\x07"  # retitles an xterm
CLEAR = "\x1b[2J"  # clears the screen
RLO = "\u202e"  # right-to-left override


def _raw_controls(text: str) -> list[str]:
    return [c for c in text if c == "\x1b" or c == RLO or ("\x00" <= c < " " and c not in "\n\t") or "\x7f" <= c <= "\x9f"]


def test_inert_escapes_controls_and_keeps_text():
    assert inert(f"a{TITLE}b{CLEAR}{RLO}c\r\x00\x9b") == "a\\x1b]0;pwned\\x07b\\x1b[2J\\u202ec\\x0d\\x00\\x9b"
    assert inert("línea\tcon 中文\n") == "línea\tcon 中文\n"


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=40))
def test_fuzz_inert_leaves_no_control_character(text):
    assert _raw_controls(inert(text)) == []


def test_every_console_of_the_cli_is_inert(capsys):
    for console in (out_console(), err_console()):
        console.print(f"path {CLEAR}x", markup=False)
    captured = capsys.readouterr()
    assert captured.out == "path \\x1b[2Jx\n" and captured.err == "path \\x1b[2Jx\n"


def test_audit_shows_a_hostile_file_name_escaped(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    name = f"x{CLEAR}{RLO}.py"
    (repo / name).write_text("import torch\nmodel = torch.nn.Linear(2, 2).cuda()\n")
    result = runner.invoke(app, ["audit", str(repo)])
    assert result.exit_code == 0, result.output
    assert "x\\x1b[2J\\u202e.py" in result.output and _raw_controls(result.output) == []


def test_a_report_path_and_an_error_are_escaped(tmp_path):
    lengths = tmp_path / f"L{TITLE}.txt"
    lengths.write_text("5\n9\n12\n")
    out = tmp_path / f"o{CLEAR}.json"
    result = runner.invoke(app, ["buckets", str(lengths), "--json", str(out), "--config", "none"])
    assert result.exit_code == 0, result.output
    assert f"json: {tmp_path}/o\\x1b[2J.json" in result.output and _raw_controls(result.output) == []
    result = runner.invoke(app, ["report", str(tmp_path / f"missing{TITLE}.json")])
    assert result.exit_code == 2
    assert result.output.strip() == f"error: {tmp_path}/missing\\x1b]0;pwned\\x07.json: no such report file"


def test_setup_names_a_hostile_path_escaped_and_as_written(tmp_path):
    blocker = tmp_path / f"f{TITLE}[bold]"
    blocker.write_text("a file, not a folder\n")
    result = runner.invoke(app, ["setup", "xla-cpu", "--path", str(blocker / "env")])
    assert result.exit_code == 2, result.output
    shown = f"{tmp_path}/f\\x1b]0;pwned\\x07[bold]"
    assert result.output.strip() == f"error: --path {shown}/env: {shown} is not a folder"


def test_doctor_shows_a_hostile_environment_path_escaped_and_as_written(tmp_path, monkeypatch):
    env = tmp_path / f"env{CLEAR}[/x]"
    monkeypatch.setenv("NEURONPROBE_XLA_ENV", str(env))
    monkeypatch.delenv("NEURONPROBE_XLA_PYTHON", raising=False)
    result = runner.invoke(app, ["doctor"], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    assert f"{tmp_path}/env\\x1b[2J[/x]" in result.output and _raw_controls(result.output) == []


def test_a_nightly_config_path_is_escaped(tmp_path):
    folder = tmp_path / f"c{CLEAR}"
    folder.mkdir()
    config = folder / "n.toml"
    config.write_text("[[models]]\nmodel = 'missing.py'\n")
    result = runner.invoke(app, ["nightly", str(config), "-o", str(tmp_path / "r"), "--date", "2026-01-02"])
    assert result.exit_code == 2
    assert _raw_controls(result.output) == [] and "c\\x1b[2J" in result.output
