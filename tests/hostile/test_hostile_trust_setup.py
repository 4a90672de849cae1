"""`setup xla-cpu` never adopts a folder it did not create (issue 34.8).

A folder holding a ``complete.json`` and a ``venv/`` used to be taken for the set-up's own:
the file was deleted and pip installed into the foreign venv. Now a folder is the set-up's
own only when its stamp holds a random token and the completeness marker the same token;
anything else is refused with one sentence, exit 2, the folder byte-identical. The set-up
itself is simulated (``_stream`` and the probes): no venv, no pip, no network. None of these
tests touches the machine's real environment at ``~/.cache/neuronprobe/xla-cpu``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from io_cli import bounded
from typer.testing import CliRunner

import neuronprobe.backends.xla_env as xla_env
from neuronprobe.backends.xla_env import LEGACY_OWNER_TEXT, MARKER, OWNER_FILE, XlaEnv, requirements_digest, requirements_file, setup_env
from neuronprobe.cli import app
from neuronprobe.errors import InputError

runner = CliRunner()


def tree(folder: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else None) for p in sorted(folder.rglob("*"))}


def venv(folder: Path) -> None:
    (folder / "venv" / "bin").mkdir(parents=True)
    (folder / "venv" / "bin" / "python").write_text("their interpreter")
    (folder / "venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")


def marker(folder: Path, **extra: object) -> None:
    data = {
        "versions": {"torch": "2.9.0", "torch-xla": "2.9.0"},
        "requirements": requirements_digest(requirements_file()),
        "python": str(folder / "venv" / "bin" / "python"),
    }
    (folder / MARKER).write_text(json.dumps({**data, **extra}))


def refused(folder: Path, why: str) -> None:
    before = tree(folder)
    with bounded(cpu_s=10):  # CPU seconds: a loaded machine stretches the wall clock, not these
        result = runner.invoke(app, ["setup", "xla-cpu", "--path", str(folder)])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: setup --path {folder}: ") and why in lines[0], result.output
    assert "Traceback" not in result.output
    assert tree(folder) == before  # nothing deleted, nothing added (not even the lock), no pip run


def test_a_complete_json_and_a_venv_are_someone_elses(tmp_path):
    venv(tmp_path)
    marker(tmp_path)
    refused(tmp_path, f"the folder already holds files neuronprobe did not put there ({MARKER}, venv); give a new or empty folder")


def test_a_stamp_without_a_token_is_not_ours(tmp_path):
    venv(tmp_path)
    marker(tmp_path)
    (tmp_path / OWNER_FILE).write_text("{}")
    refused(tmp_path, f"did not put there ({MARKER}, venv) (its {OWNER_FILE} holds no token of a set-up)")


def test_the_old_stamp_outside_the_default_place_is_not_ours(tmp_path):
    venv(tmp_path)
    marker(tmp_path)
    (tmp_path / OWNER_FILE).write_text(LEGACY_OWNER_TEXT)
    refused(tmp_path, f"did not put there ({MARKER}, venv) (its {OWNER_FILE} holds no token of a set-up)")


def test_a_marker_with_another_token_is_not_ours(tmp_path):
    venv(tmp_path)
    marker(tmp_path, token="b" * 32)
    (tmp_path / OWNER_FILE).write_text(json.dumps({"token": "a" * 32}))
    refused(tmp_path, "the tokens differ")


def test_anything_else_in_our_own_folder_means_refusal(tmp_path):
    venv(tmp_path)
    marker(tmp_path, token="a" * 32)
    (tmp_path / OWNER_FILE).write_text(json.dumps({"token": "a" * 32}))
    (tmp_path / "notes.txt").write_text("mine")
    refused(tmp_path, "the folder already holds files neuronprobe did not put there (notes.txt)")


@pytest.fixture
def simulated(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The set-up's commands recorded, not run: venv makes the interpreter file, pip succeeds, the probes pass."""
    commands: list[list[str]] = []

    def stream(cmd, progress, env):
        commands.append(cmd)
        if cmd[1:3] == ["-m", "venv"]:
            Path(cmd[3], "bin").mkdir(parents=True)
            Path(cmd[3], "bin", "python").write_text("")
            Path(cmd[3], "pyvenv.cfg").write_text("home = /usr/bin\n")
        return 0, []

    monkeypatch.setattr(xla_env, "_stream", stream)
    monkeypatch.setattr(
        xla_env, "inspect_python", lambda python, source="", path=None: XlaEnv("ready", python, path, source, {"torch": "2.9.0", "torch-xla": "2.9.0"})
    )
    monkeypatch.setattr(xla_env, "_run_probe", lambda python, code, timeout: ({"ok": True}, ""))
    return commands


def test_someone_elses_lock_file_alone_is_not_ours(tmp_path, simulated):
    """A folder holding only a `.setup.lock` with content was taken for an interrupted set-up: truncated, then pip ran there."""
    (tmp_path / ".setup.lock").write_text("another tool's lock: pid 4242\n")
    refused(tmp_path, "the folder already holds files neuronprobe did not put there (.setup.lock)")
    assert simulated == []  # no venv made, no pip run


def test_a_lock_file_that_is_a_link_is_never_followed(tmp_path, simulated):
    """`.setup.lock` -> a file elsewhere: opening it for the lock used to truncate the link's target."""
    precious = tmp_path / "precious.txt"
    precious.write_text("someone's notes\n")
    folder = tmp_path / "env"
    folder.mkdir()
    (folder / ".setup.lock").symlink_to(precious)
    refused(folder, "the folder already holds files neuronprobe did not put there (.setup.lock)")
    assert precious.read_text() == "someone's notes\n" and simulated == []


def test_a_new_folder_is_stamped_with_a_token_the_marker_repeats_and_is_reused(tmp_path, simulated):
    env = setup_env(tmp_path / "env")
    assert env.usable and not env.reused
    stamp = json.loads((tmp_path / "env" / OWNER_FILE).read_text())
    assert len(stamp["token"]) == 32 and json.loads((tmp_path / "env" / MARKER).read_text())["token"] == stamp["token"]
    assert setup_env(tmp_path / "other").usable
    assert json.loads((tmp_path / "other" / OWNER_FILE).read_text())["token"] != stamp["token"]  # random, not a common name
    count = len(simulated)
    before = tree(tmp_path / "env")
    again = setup_env(tmp_path / "env")
    assert again.reused and len(simulated) == count and tree(tmp_path / "env") == before


def test_an_interrupted_set_up_of_our_own_is_finished(tmp_path, simulated):
    folder = tmp_path / "env"
    folder.mkdir()
    (folder / OWNER_FILE).write_text(json.dumps({"token": "c" * 32}))
    venv(folder)  # the venv was made, pip was killed: no marker
    env = setup_env(folder)
    assert env.usable and json.loads((folder / MARKER).read_text())["token"] == "c" * 32


def test_the_environment_an_earlier_version_set_up_in_the_default_place_is_still_recognised(tmp_path, monkeypatch, simulated):
    default = tmp_path / "cache" / "neuronprobe" / "xla-cpu"
    monkeypatch.setenv("NEURONPROBE_XLA_ENV", str(default))  # where default_env_path() points (the suite's own)
    default.mkdir(parents=True)
    venv(default)
    marker(default)
    (default / OWNER_FILE).write_text(LEGACY_OWNER_TEXT)
    (default / ".setup.lock").write_text("")
    before = tree(default)
    env = setup_env()
    assert env.reused and env.usable and simulated == []
    assert tree(default) == before  # recognised as it is: nothing rewritten
    (default / MARKER).write_text(json.dumps({**json.loads((default / MARKER).read_text()), "python": "/elsewhere/bin/python"}))
    with pytest.raises(InputError, match="holds no token of a set-up"):
        setup_env()  # a marker that does not name this venv's own interpreter is not the old set-up's
