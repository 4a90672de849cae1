"""Benchmark ``neuronprobe analyze hf:llama`` under ``--backend auto`` with the xla-cpu environment present (issue 23).

The 6.7B config of the Llama benchmark in docs/benchmarks.md (LlamaConfig defaults) is analysed
from the command line, as a user runs it, in a fresh process. Reported: wall time,
the peak resident memory of the whole process tree (the command, its analysis worker
and the xla-cpu worker, summed; sampled every 0.1 s from /proc, since
``/usr/bin/time -v`` gives only the largest single process), the exit code, and which
way ``auto`` took (the backend that ran and the limitation that says why).

Needs the environment (``neuronprobe setup xla-cpu``, or NEURONPROBE_XLA_PYTHON).
Usage: python benchmarks/bench_auto_llama.py [--max-memory 8G] [-- extra analyze options]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SAMPLE_S = 0.1


def _tree_rss(root: int) -> int:
    """Resident bytes of ``root`` and every process under it, from /proc."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    page = os.sysconf("SC_PAGE_SIZE")
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(name)
        children.setdefault(int(fields[1]), []).append(pid)
        rss[pid] = int(fields[21]) * page
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total


def run(extra: list[str]) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="bench-auto-llama-") as tmp:
        command = [sys.executable, "-m", "neuronprobe.cli", "analyze", "hf:llama", "-o", tmp, "--no-html", *extra]
        env = {**os.environ, "HF_HUB_OFFLINE": "1"}
        start = time.perf_counter()
        proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        peak = 0
        while proc.poll() is None:
            peak = max(peak, _tree_rss(proc.pid))
            time.sleep(SAMPLE_S)
        _, err = proc.communicate()
        wall = time.perf_counter() - start
        report_file = Path(tmp) / "hf_llama.json"
        way = err.strip().splitlines()[0] if err.strip() else ""
        if report_file.exists():
            report = json.loads(report_file.read_text())
            whys = [f"{lim['what']}: {lim['why'][:160]}" for lim in report["not_analysed"] if "xla-cpu" in lim["what"]]
            way = f"backend {report['backend']['name']}, capture {report['capture']['strategy']}" + (f"; {whys[0]}" if whys else "")
    return {
        "command": " ".join(["neuronprobe", *command[3:]]),
        "exit": proc.returncode,
        "wall_s": round(wall, 1),
        "peak_tree_gib": round(peak / 2**30, 2),
        "way": way,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-memory", default=None, help="passed to analyze (default: analyze's own, 75%% of the machine)")
    args, extra = parser.parse_known_args()
    options = [*(["--max-memory", args.max_memory] if args.max_memory else []), *[e for e in extra if e != "--"]]
    print(json.dumps(run(options), indent=2))


if __name__ == "__main__":
    main()
