"""`nightly --jobs N`: models in parallel workers that share one memory total; the night is the serial one."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest
from diff_fixtures import make_report
from helpers import MODELS, TESTS, marker_line
from typer.testing import CliRunner
from warm_torch import warm_export  # noqa: F401  (an autouse fixture)

from neuronprobe.cli import app
from neuronprobe.errors import ConfigError
from neuronprobe.nightly.run import SUMMARY_FILE, MemoryPlan, NightlyConfig, analyse_models, load_config, plan_workers

runner = CliRunner()
HOSTILE = TESTS / "hostile"


def _rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _config(tmp_path: Path, names: list[str]) -> NightlyConfig:
    for n in names:
        (tmp_path / f"{n}.py").write_text("# stand-in\n")
    path = tmp_path / "n.toml"
    path.write_text("".join(f'[[models]]\nmodel = "{n}.py"\n' for n in names))
    return load_config(path)


def test_workers_wait_while_the_running_ones_would_pass_the_memory_total(tmp_path):
    config = _config(tmp_path, [f"m{i}" for i in range(6)])
    lock, running, most = threading.Lock(), [0], [0]

    def slow(model, cfg, required, command_line):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.2)
        with lock:
            running[0] -= 1
        return make_report([], model=model.name)

    finished: list[str] = []
    out = analyse_models(
        config, config.models, analyze=slow, jobs=4, memory=MemoryPlan(per_worker_bytes=3, total_bytes=7), on_done=lambda a: finished.append(a.name)
    )
    assert most[0] == 2  # 4 jobs, but only two reservations of 3 fit in 7
    assert [a.name for a in out] == [f"m{i}" for i in range(6)]  # the config's order, whatever the finishing order
    assert sorted(finished) == [a.name for a in out]
    most[0] = 0
    analyse_models(config, config.models, analyze=slow, jobs=4, memory=MemoryPlan(per_worker_bytes=5, total_bytes=7))
    assert most[0] == 1
    most[0] = 0
    analyse_models(config, config.models, analyze=slow, jobs=3, memory=MemoryPlan(per_worker_bytes=1, total_bytes=100))
    assert most[0] == 3


def test_the_plan_bounds_jobs_by_memory_and_splits_the_total(tmp_path):
    config = _config(tmp_path, [f"m{i}" for i in range(8)])
    jobs, plan = plan_workers(config, 4, "4G")
    assert (jobs, plan.per_worker_bytes, plan.total_bytes) == (4, 2**30, 4 * 2**30)
    bounded = tmp_path / "bounded.toml"
    bounded.write_text('max_memory = "3G"\n' + Path(config.path).read_text())
    limited = load_config(bounded)
    jobs, plan = plan_workers(limited, None, "7G")
    assert jobs == min(2, len(os.sched_getaffinity(0))) and plan.per_worker_bytes == 3 * 2**30
    with pytest.raises(ConfigError, match="--jobs 0"):
        plan_workers(config, 0, None)
    result = runner.invoke(app, ["nightly", config.path, "--jobs", "2", "--total-memory", "lots", "-o", str(tmp_path / "r")])
    assert result.exit_code == 2 and "--total-memory 'lots'" in result.output and not (tmp_path / "r").exists()


def test_jobs_2_with_a_hanging_and_a_memory_hungry_model_finishes_the_others(tmp_path):
    per = _rss_bytes() + 400 * 2**20  # the forked worker starts with this process's pages
    models = [MODELS / "mlp.py", HOSTILE / "loop_forever.py", HOSTILE / "memory_hog.py", MODELS / "nonzero.py"]
    config = tmp_path / "n.toml"
    # The hanging model runs out the whole timeout. 10 s: the others take about 3 s each on an idle host (the first
    # one waits for the fork server's torch import), so a host three times slower still finishes them.
    config.write_text(f'timeout = 10\nmax_memory = "{per}"\n' + "".join(f'[[models]]\nmodel = "{m}"\n' for m in models))
    reports = tmp_path / "reports"
    result = runner.invoke(app, ["nightly", str(config), "-o", str(reports), "--date", "2025-06-01", "--jobs", "2", "--total-memory", str(2 * per)])
    assert result.exit_code == 2, result.output
    summary = json.loads((reports / "2025-06-01" / SUMMARY_FILE).read_text())
    status = {m["name"]: (m["status"], m["error"] or "") for m in summary["models"]}
    assert list(status) == ["mlp", "loop_forever", "memory_hog", "nonzero"]  # the config's order
    assert status["mlp"] == ("first_run", "") and status["nonzero"] == ("first_run", "")
    hang, hog = HOSTILE / "loop_forever.py", HOSTILE / "memory_hog.py"
    assert status["loop_forever"] == (
        "failed",
        f"{hang}:{marker_line(hang)}: the analysis did not finish within --timeout 10 s and was stopped; fix the loop, or raise --timeout",
    )
    assert status["memory_hog"][0] == "failed"
    assert status["memory_hog"][1].startswith(f"{hog}:{marker_line(hog)}: the analysis used more than --max-memory")
    assert sorted(p.name for p in (reports / "2025-06-01").iterdir()) == [SUMMARY_FILE, "mlp.html", "mlp.json", "nonzero.html", "nonzero.json"]
    assert "[4/4] " in result.output  # not a terminal: one line per finished model
