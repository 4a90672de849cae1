"""Benchmark: recall of `neuronprobe audit` on hand-labelled CUDA-assumption sites (issue 29, point 9).

The labels (benchmarks/audit_recall_labels.toml) name, per public training repository at a
pinned commit, every line that assumes CUDA. Their code is never stored here: give the folder
holding one checkout per repository, named owner+name (``facebookresearch+DiT``); where a
checkout is a git work tree its HEAD must be the pinned commit.

For each repository: the audit of the checkout (stack xla, one process), minus the folders the
labels exclude; recall = labelled sites with at least one finding on their line / labelled
sites; findings per site = findings / labelled sites (the ratio the issue tracks, kept at or
below its earlier value); and the labelled sites missed and the findings on unlabelled lines,
for reading.

Run: python benchmarks/bench_audit_recall.py --repos /path/to/checkouts [--misses]
The same command with PYTHONPATH pointing at an older checkout of neuronprobe measures that one.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from neuronprobe.audit.engine import audit_paths

LABELS = Path(__file__).with_name("audit_recall_labels.toml")


def _head(folder: Path) -> str | None:
    if not (folder / ".git").exists():
        return None
    done = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
    return done.stdout.strip() or None


def _row(name: str, commit: str, sites: int, found: int, findings: int) -> str:
    per_found = f"{findings / found:.2f}" if found else "-"
    return f"| {name} | {commit} | {sites} | {found} | {found / sites:.3f} | {findings} | {findings / sites:.2f} | {per_found} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repos", type=Path, required=True, help="folder with one checkout per repository, named owner+name")
    parser.add_argument("--labels", type=Path, default=LABELS)
    parser.add_argument("--misses", action="store_true", help="also list missed sites and findings on unlabelled lines")
    parser.add_argument(
        "--with-excluded",
        action="store_true",
        help="count the findings in the folders the labels exclude too (modded-nanogpt's records/: archived copies, unlabelled)",
    )
    args = parser.parse_args()
    repos = tomllib.loads(args.labels.read_text(encoding="utf-8"))["repo"]
    print("| repository | commit | labelled sites | found | recall | findings | findings per site | findings per found site |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    totals = {False: [0, 0, 0], True: [0, 0, 0]}  # held out -> sites, found, findings
    notes: list[str] = []
    for repo in repos:
        folder = args.repos / repo["name"].replace("/", "+")
        if not folder.is_dir():
            sys.exit(f"{folder}: missing; check out {repo['name']} at {repo['commit']} there")
        head = _head(folder)
        if head is not None and head != repo["commit"]:
            sys.exit(f"{folder}: HEAD is {head}, the labels are for {repo['commit']}")
        excluded = () if args.with_excluded else tuple(f"{e.rstrip('/')}/" for e in repo.get("exclude", []))
        section = audit_paths([folder], "xla", jobs=1)
        findings = [f for f in section.findings if not f.file.startswith(excluded)]
        lines = {f"{f.file}:{f.line}" for f in findings}
        sites = list(dict.fromkeys(repo["sites"]))
        found = [s for s in sites if s in lines]
        for i, n in enumerate((len(sites), len(found), len(findings))):
            totals[bool(repo.get("heldout"))][i] += n
        print(_row(repo["name"] + (" (held out)" if repo.get("heldout") else ""), repo["commit"][:10], len(sites), len(found), len(findings)))
        notes += [f"missed: {repo['name']} {s}" for s in sites if s not in lines]
        notes += [f"unlabelled: {repo['name']} {f.file}:{f.line} {f.rule}" for f in findings if f"{f.file}:{f.line}" not in set(sites)]
    for label, (sites_n, found_n, findings_n) in (("labelled while the rules were written", totals[False]), ("held out", totals[True])):
        if sites_n:
            print(_row(f"**{label}**", "", sites_n, found_n, findings_n))
    sites_n, found_n, findings_n = (a + b for a, b in zip(totals[False], totals[True], strict=True))
    print(_row("**all**", "", sites_n, found_n, findings_n))
    if args.misses:
        print()
        print("\n".join(notes))


if __name__ == "__main__":
    main()
