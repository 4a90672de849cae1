"""Benchmark the nightly's scale-out: the fork server, parallel workers, the result cache, and sharding.

    python benchmarks/bench_nightly.py [--models 40] [--output FILE.md]
    python benchmarks/bench_nightly.py --only fork-server [--models 16] [--rounds 2]

A config of ``--models`` small architectures (model files written to a temporary
folder: MLPs, small CNNs and one-layer transformer encoders of different widths,
every one a real torch model analysed by a real worker) is run as a user runs it,
``python -m neuronprobe.cli nightly ...`` in a fresh process each time:

1. ``--jobs 1`` vs ``--jobs 2`` (no cache): wall time and ratio.
2. The result cache: a first night, then a second night with nothing changed.
   Goal: the second night <= 10% of the first.
3. Sharding, n = 4: the sum of the four shard runs' wall times plus the merge vs the
   serial run (``--jobs 1`` each). Goal: overhead <= 5% of the total work.
4. The fork server (issue 35.5): workers forked from a server that imported torch once
   vs workers forked from the command (``NEURONPROBE_FORK_SERVER=0``, what every worker
   did before), at ``--jobs 1`` and ``--jobs 2``, no cache. The two are run interleaved
   (A, B, A, B, ... for ``--rounds`` rounds) in this one process, so that the load of a
   shared machine falls on both alike; a model's cost is the night's wall time over its
   models. Goal: at least 40% less per model at every ``--jobs``.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FORK_SERVER_GOAL = 0.40
CACHE_GOAL = 0.10
SHARD_OVERHEAD_GOAL = 0.05
SHARDS = 4

MLP = """import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear({w}, {h}), torch.nn.GELU(), torch.nn.LayerNorm({h}), torch.nn.Linear({h}, 4))

    def forward(self, x):
        return torch.softmax(self.net(x), dim=-1)


def get_model():
    return Net()


def get_example_inputs():
    return (torch.randn(2, {w}),)
"""

CNN = """import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, {h}, 3, padding=1)
        self.norm = torch.nn.BatchNorm2d({h})
        self.head = torch.nn.Linear({h}, 10)

    def forward(self, x):
        y = torch.relu(self.norm(self.conv(x)))
        return self.head(torch.nn.functional.adaptive_avg_pool2d(y, 1).flatten(1))


def get_model():
    return Net()


def get_example_inputs():
    return (torch.randn(1, 3, {w}, {w}),)
"""

ENCODER = """import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(100, {h})
        self.layer = torch.nn.TransformerEncoderLayer({h}, 2, dim_feedforward=2 * {h}, batch_first=True)

    def forward(self, ids):
        return self.layer(self.embed(ids)).mean(dim=1)


def get_model():
    return Net()


def get_example_inputs():
    return (torch.randint(0, 100, (1, {w})),)
"""


def write_zoo(folder: Path, count: int) -> Path:
    """``count`` model files of three families and several widths, and their config."""
    entries = []
    for i in range(count):
        family, template = [("mlp", MLP), ("cnn", CNN), ("encoder", ENCODER)][i % 3]
        width, hidden = 8 + 4 * (i // 3), 16 * (1 + i % 4)
        name = f"{family}_{i:02d}"
        (folder / f"{name}.py").write_text(template.format(w=width, h=hidden))
        entries.append(f'[[models]]\nmodel = "{name}.py"\n')
    config = folder / "zoo.toml"
    config.write_text('backend = "static"\ntimeout = 600\n\n' + "\n".join(entries))
    return config


def nightly(*args: str, env: dict[str, str] | None = None) -> float:
    """One nightly command in a fresh process; its wall time (an unexpected exit code stops the benchmark)."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "neuronprobe.cli", "nightly", *args], capture_output=True, text=True, env={**os.environ, **(env or {})})
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"nightly {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return seconds


def fork_server_rows(models: int, rounds: int) -> list[str]:
    """Section 4: per-model cost with and without the fork server, interleaved, at --jobs 1 and 2."""
    from neuronprobe.process.forkserver import FORK_SERVER_ENV

    modes = {"forked from the command": {FORK_SERVER_ENV: "0"}, "fork server": {FORK_SERVER_ENV: "1"}}
    seconds: dict[tuple[str, int], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-nightly-fs-") as tmp:
        root = Path(tmp)
        config = write_zoo(root, models)
        for r in range(rounds):
            for jobs in (1, 2):
                for mode, env in modes.items():
                    out = root / f"{mode.split()[0]}-{jobs}-{r}"
                    wall = nightly(str(config), "-o", str(out), "--jobs", str(jobs), "--no-cache", "--date", "2026-01-01", env=env)
                    seconds.setdefault((mode, jobs), []).append(wall)
                    print(f"round {r + 1}, --jobs {jobs}, {mode}: {wall:.1f} s", file=sys.stderr, flush=True)
    rows = []
    for jobs in (1, 2):
        before, after = (min(seconds[(mode, jobs)]) / models for mode in modes)
        saved = 1 - after / before
        runs = " / ".join(f"{s:.1f}" for s in seconds[("fork server", jobs)])
        old_runs = " / ".join(f"{s:.1f}" for s in seconds[("forked from the command", jobs)])
        rows.append(
            f"| fork server vs workers forked from the command, `--jobs {jobs}`, {models} models, per model | "
            f">= {FORK_SERVER_GOAL:.0%} less | {saved:.0%} less: {after:.2f} s vs {before:.2f} s (ratio {after / before:.2f}; "
            f"nights {runs} s vs {old_runs} s, best of {rounds}) |"
        )
    return rows


def _header(args: argparse.Namespace) -> list[str]:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    only = f" --only {args.only} --rounds {args.rounds}" if args.only else ""
    return [
        f"`python benchmarks/bench_nightly.py --models {args.models}{only}` ({cores} cores, load average {os.getloadavg()[0]:.1f} at the end, "
        f"Python {platform.python_version()}; each run a fresh `python -m neuronprobe.cli nightly` process):",
        "",
        "| what | goal | measured |",
        "|---|---|---|",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=2, help="fork-server section: interleaved A/B rounds (the best of each is reported)")
    parser.add_argument("--only", choices=["fork-server"], default=None, help="run only this section")
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.only == "fork-server":
        text = "\n".join([*_header(args), *fork_server_rows(args.models, args.rounds)]) + "\n"
        print(text)
        if args.output is not None:
            args.output.write_text(text)
        return
    forked = fork_server_rows(min(args.models, 16), args.rounds)
    with tempfile.TemporaryDirectory(prefix="bench-nightly-") as tmp:
        root = Path(tmp)
        config = write_zoo(root, args.models)
        night = ("--date", "2026-01-01")
        serial = nightly(str(config), "-o", str(root / "serial"), "--jobs", "1", "--no-cache", *night)
        parallel = nightly(str(config), "-o", str(root / "parallel"), "--jobs", "2", "--no-cache", *night)
        first = nightly(str(config), "-o", str(root / "cached"), "--jobs", "2", *night)
        second = nightly(str(config), "-o", str(root / "cached"), "--jobs", "2", "--date", "2026-01-02")
        shards = [nightly(str(config), "--shard", f"{i}/{SHARDS}", "-o", str(root / f"shard-{i}"), "--jobs", "1", *night) for i in range(1, SHARDS + 1)]
        merge = nightly("merge", *(str(root / f"shard-{i}") for i in range(1, SHARDS + 1)), "--history", str(root / "merged"))
    sharded = sum(shards) + merge
    overhead = (sharded - serial) / serial
    lines = [
        *_header(args),
        *forked,
        f"| `--jobs 2` vs `--jobs 1`, {args.models} models, no cache | faster | {parallel / serial:.2f}x ({parallel:.1f} s vs {serial:.1f} s) |",
        f"| second night, nothing changed (cache) vs the first | <= {CACHE_GOAL:.0%} | {second / first:.1%} ({second:.1f} s vs {first:.1f} s) |",
        f"| {SHARDS} shards + merge vs the serial run (`--jobs 1`) | overhead <= {SHARD_OVERHEAD_GOAL:.0%} | "
        f"{overhead:+.1%} ({' + '.join(f'{s:.1f}' for s in shards)} + merge {merge:.1f} = {sharded:.1f} s vs {serial:.1f} s) |",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.output is not None:
        args.output.write_text(text)


if __name__ == "__main__":
    main()
