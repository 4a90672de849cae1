"""Nightly workers forked by the fork server (issue 35.5) are killable and limited as workers forked from the command.

The server imported torch once; each worker it forks still has its own session, the
command's deadline, a memory bound on its process group, a stack dump before a kill,
and dies with the command; its report is the one a worker forked from the command sends.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from helpers import MODELS, TESTS, marker_line

from neuronprobe.nightly.run import NightlyConfig, isolated_analyze, load_config
from neuronprobe.process.forkserver import FORK_SERVER_ENV, ForkServer
from neuronprobe.process.isolation import run_isolated
from neuronprobe.process.supervisor import group_rss_bytes
from neuronprobe.process.worker import WorkerFailure
from neuronprobe.vocabulary import StepStatus

HOSTILE = TESTS / "hostile"
REPO = TESTS.parent


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _gone_within(pids: list[int], seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [p for p in pids if _alive(p)]


def _night(tmp_path: Path, model: Path, extra: str = "") -> NightlyConfig:
    config = tmp_path / "nightly.toml"
    config.write_text(f'backend = "static"\n{extra}\n[[models]]\nname = "m"\nmodel = "{model}"\n')
    return load_config(config)


def _identity(progress) -> dict:
    import torch

    progress(os.getpid())
    return {"pid": os.getpid(), "sid": os.getsid(0), "torch": torch.__version__}


def _sleep_forever(progress) -> None:
    progress(os.getpid())
    time.sleep(300)


def test_a_worker_from_the_server_leads_its_own_session_and_finds_torch_imported(tmp_path):
    with ForkServer() as server:
        first = run_isolated(_identity, (), limit_s=120, workdir=tmp_path, name="one", launcher=server.launch)
        second = run_isolated(_identity, (), limit_s=120, workdir=tmp_path, name="two", launcher=server.launch)
        assert first.status is StepStatus.OK and second.status is StepStatus.OK, (first, second)
        assert server.pid is not None and first.value["pid"] != second.value["pid"]
        assert first.value["sid"] == first.value["pid"]  # its own session: a kill of its group spares the server
        assert _alive(server.pid)
        server_pid = server.pid
    assert _gone_within([server_pid, first.value["pid"], second.value["pid"]], 5) == []  # close() ends the server


def test_a_worker_from_the_server_is_killed_at_the_timeout_with_its_stack(tmp_path):
    with ForkServer() as server:
        result = run_isolated(_sleep_forever, (), limit_s=3, workdir=tmp_path, name="hang", launcher=server.launch, dump_stacks=True)
        assert result.status is StepStatus.TIMEOUT
        assert "in _sleep_forever" in result.stacks
        assert _gone_within([result.progress[0]], 5) == []
        assert _alive(server.pid)  # the server serves the next model


def test_a_nightly_model_that_loops_forever_in_a_server_worker_is_stopped_at_its_line(tmp_path):
    model = HOSTILE / "loop_forever.py"
    config = _night(tmp_path, model, "timeout = 5")
    with isolated_analyze(config) as analyze:
        assert analyze.server is not None
        started = time.monotonic()
        with pytest.raises(WorkerFailure) as info:
            analyze(config.models[0], config, None, "")
        assert time.monotonic() - started < 60
    assert f"{model}:{marker_line(model)}: the analysis did not finish within --timeout 5 s" in str(info.value)


def test_a_nightly_model_that_allocates_without_bound_in_a_server_worker_is_stopped_at_max_memory(tmp_path):
    model = HOSTILE / "memory_hog.py"
    config = _night(tmp_path, model)
    analyze = isolated_analyze(config)
    with analyze:
        assert analyze.server is not None
        warm = run_isolated(_identity, (), limit_s=120, workdir=tmp_path / "warm", name="warm", launcher=analyze.server.launch)
        assert warm.ok
        # A worker starts with the server's pages (torch imported); give it 400 MiB on top of them.
        limit = group_rss_bytes(analyze.server.pid) + 400 * 2**20
        limited = isolated_analyze(config, max_memory_bytes=limit)
        limited.server = analyze.server
        with pytest.raises(WorkerFailure) as info:
            limited(config.models[0], config, None, "")
    assert f"{model}:{marker_line(model)}: the analysis used more than --max-memory" in str(info.value)


def test_a_report_from_a_server_worker_equals_the_one_from_a_worker_forked_from_the_command(tmp_path, monkeypatch):
    config = _night(tmp_path, MODELS / "nonzero.py")
    reports = []
    for enabled in ("1", "0"):
        monkeypatch.setenv(FORK_SERVER_ENV, enabled)
        with isolated_analyze(config) as analyze:
            assert (analyze.server is not None) == (enabled == "1")
            observed = analyze(config.models[0], config, None, "neuronprobe nightly")
        sent = json.loads(observed.report.to_json())
        for volatile in ("metadata", "capture"):  # times, pids and the host
            sent.pop(volatile)
        reports.append(sent)
        assert observed.reads is not None  # the files it read, for the result cache, come back too
    assert reports[0] == reports[1]


KILLED_PARENT = """
import os, sys
from pathlib import Path
from neuronprobe.process.forkserver import ForkServer
from neuronprobe.process.isolation import run_isolated

def hang(progress):
    import time
    progress(os.getpid())
    time.sleep(300)

server = ForkServer()
run_isolated(hang, (), limit_s=300, workdir=Path(sys.argv[1]), name="hang", launcher=server.launch,
             on_progress=lambda pid: print(pid, server.pid, flush=True))
"""


def test_a_server_worker_and_the_server_die_when_the_command_is_killed(tmp_path):
    script = tmp_path / "command.py"
    script.write_text(textwrap.dedent(KILLED_PARENT))
    command = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path / "work")], cwd=REPO, stdout=subprocess.PIPE, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"}
    )
    pids: list[int] = []
    try:
        assert command.stdout is not None
        worker, server = (int(p) for p in command.stdout.readline().split())
        pids = [worker, server]
        assert all(_alive(p) for p in pids)
        os.kill(command.pid, signal.SIGKILL)
        command.wait()
        assert _gone_within(pids, 5) == [], "outlived the killed command by 5 s"
    finally:
        if command.poll() is None:
            command.kill()
            command.wait()
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_step_that_cannot_be_pickled_is_forked_from_the_command(tmp_path):
    with ForkServer() as server:
        result = run_isolated(lambda progress: os.getppid(), (), limit_s=60, workdir=tmp_path, name="closure", launcher=server.launch)
        assert result.status is StepStatus.OK
        assert result.value == os.getpid()  # its parent is this process, not the server
        assert server.pid is None  # nothing needed the server
