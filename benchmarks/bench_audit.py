"""Benchmark: `neuronprobe audit` on real code.

1. Findings per rule on well-known public PyTorch training repositories, at pinned
   commits (REPOS below). Their code is never stored in this repository: give the
   folder that holds the checkouts, one sub-folder per repository named owner+name
   (``karpathy+nanoGPT``). Where a checkout is a git work tree its HEAD must be the
   pinned commit. Every `error` finding is listed in ``--errors-out`` for the hand
   check whose verdicts are recorded in bench_audit_results.md.
2. Speed: the installed ``torch`` and ``transformers`` packages' Python sources,
   audited by the CLI (``neuronprobe audit PKG --jobs 2``: two worker processes and
   the progress bar), fresh process each, best of REPEATS. Budget: 10 s each.

Run: .venv/bin/python benchmarks/bench_audit.py --repos /path/to/checkouts
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from neuronprobe.audit.engine import audit_paths

# (owner/name, commit, commit date): the code audited for the results in docs/benchmarks.md.
REPOS: list[tuple[str, str, str]] = [
    ("karpathy/nanoGPT", "3adf61e154c3fe3fca428ad6bc3818b27a3b8291", "2025-11-12"),
    ("pytorch/examples", "77f55b912142e11fcfdf5b530231fb9c52f181e8", "2025-08-25"),
    ("huggingface/pytorch-image-models", "aa4b5850c1543fa488abf260f18390eda46cf85d", "2026-08-08"),
    ("pytorch/torchtitan", "b5bcd76c66d0acb1a08b176d9639425bc55e0b2a", "2026-08-21"),
]
PACKAGES = ("torch", "transformers")
JOBS = 2
REPEATS = 3
BUDGET_SECONDS = 10.0


def _checkout_commit(folder: Path) -> str | None:
    if not (folder / ".git").exists():
        return None
    done = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or None


def repositories(root: Path, errors_out: Path | None) -> None:
    print("| repository | commit | files | error | warning | info |")
    print("|---|---|---:|---:|---:|---:|")
    per_rule: dict[str, Counter[str]] = {}
    errors: list[dict[str, object]] = []
    for name, commit, _date in REPOS:
        folder = root / name.replace("/", "+")
        if not folder.is_dir():
            sys.exit(f"{folder}: missing; check out {name} at {commit} there")
        head = _checkout_commit(folder)
        if head is not None and head != commit:
            sys.exit(f"{folder}: HEAD is {head}, the benchmark is pinned to {commit}")
        section = audit_paths([folder], "xla", jobs=JOBS)
        counts = section.counts()
        print(f"| {name} | {commit[:10]} | {section.files_scanned} | {counts['error']} | {counts['warning']} | {counts['info']} |")
        per_rule[name] = Counter(f.rule for f in section.findings)
        errors.extend({"repo": name, "rule": f.rule, "file": f.file, "line": f.line, "snippet": f.snippet} for f in section.findings if f.severity == "error")
    rules = sorted({r for c in per_rule.values() for r in c}, key=lambda r: -sum(c[r] for c in per_rule.values()))
    print()
    print("| rule | " + " | ".join(n.split("/")[1] for n, _, _ in REPOS) + " |")
    print("|---|" + "---:|" * len(REPOS))
    for rule in rules:
        print(f"| {rule} | " + " | ".join(str(per_rule[n][rule]) for n, _, _ in REPOS) + " |")
    if errors_out is not None:
        errors_out.write_text(json.dumps(errors, indent=1) + "\n")
        print(f"\n{len(errors)} error finding(s) for the hand check: {errors_out}")


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)  # locates without importing
    if spec is None or not spec.submodule_search_locations:
        sys.exit(f"{name} is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def speed() -> None:
    cli = Path(sys.executable).with_name("neuronprobe")
    print(f"\nload average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} core(s)")
    print(f"\n| package | .py files | MB | wall, best of {REPEATS} (s) | CPU of that run (s) | budget |")
    print("|---|---:|---:|---:|---:|---|")
    for name in PACKAGES:
        folder = _package_dir(name)
        files = list(folder.rglob("*.py"))
        size = sum(f.stat().st_size for f in files) / 1e6
        times = []
        with tempfile.TemporaryDirectory() as tmp:
            for _ in range(REPEATS):
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                start = time.perf_counter()
                subprocess.run(
                    [str(cli), "audit", str(folder), "--jobs", str(JOBS), "--include-vendored", "--json", os.path.join(tmp, "a.json")],
                    check=True,
                    stdout=subprocess.DEVNULL,
                )
                wall = time.perf_counter() - start
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
                times.append((wall, cpu))
        wall, cpu = min(times)
        print(f"| {name} | {len(files)} | {size:.1f} | {wall:.2f} | {cpu:.2f} | <= {BUDGET_SECONDS:.0f} s |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repos", type=Path, help="folder with one checkout per repository (owner+name)")
    parser.add_argument("--errors-out", type=Path, default=None, help="write the error findings here (JSON)")
    parser.add_argument("--no-speed", action="store_true")
    args = parser.parse_args()
    if args.repos is not None:
        repositories(args.repos, args.errors_out)
    if not args.no_speed:
        speed()


if __name__ == "__main__":
    main()
