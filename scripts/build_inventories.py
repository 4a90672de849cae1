"""Inventories of what the support table must cover, generated from upstream sources.

1. ``xla_fallbacks.json``: every CPU-fallback site in torch-xla's C++ at a tag
   (each ``call_fallback_fn`` call, and the host ``nonzero()`` that expands a
   boolean index), with the support rule that covers it, or why it cannot be
   decided from a captured graph.
2. ``ncc_error_codes.json``: every code of the neuronx-cc error-code catalogue
   (aws-neuron-sdk ``compiler/error-codes/``), with its rule or the reason none
   applies.
3. ``xla_argument_paths.json``: every branch of torch-xla's aten lowerings
   (``aten_xla_type.cpp``, ``aten_autograd_ops.cpp``) whose path depends on the
   call's arguments: an optional argument given or not, training mode,
   requires_grad, a scalar or a tensor operand, the operand dtype, an
   environment flag. Each is covered by the fallback site in the same function
   (inventory 1), by a rule citing a line of the function, or by a note saying
   why the path cannot change a Neuron verdict or cannot be told from a graph.

Only derived facts are written: file:line, the enclosing function, the aten op
torch-xla falls back to, the error code and its one-line message. No upstream
code is copied. A site is covered by a rule whose ``provenance`` cites a line
of the site's function in the same file; a code by a rule with that
``ncc_code``. Everything else needs an entry in ``inventories/notes.json``
(``{"rule": id}`` for a rule that covers it without citing the line, or
``{"reason": ...}``). Usage, with the two repositories fetched as git dirs::

    python scripts/build_inventories.py --xla-git PATH/pytorch+xla/repo --tag v2.9.0 \\
        --sdk-git PATH/aws-neuron+aws-neuron-sdk/repo
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(__file__).resolve().parent / "inventories"
NOTES = OUT / "notes.json"
CSRC = "torch_xla/csrc/"
SITE = re.compile(r"call_fallback_fn\s*<|->nonzero\(\)")
FUNCTION = re.compile(r"^[A-Za-z][^;{}()]*?\b(?:\w+::)*(\w+)\(")
ATEN_OP = re.compile(r"ATEN_OP2?\(\s*(\w+)\s*(?:,\s*(\w+)\s*)?\)")
# What a lowering's branch reads, by kind (issue 33.9): a condition on the call's own arguments.
BRANCH = re.compile(r"^\s*(?:\}\s*else\s+)?if\s*\(|\?\s")
BRANCH_KINDS: dict[str, re.Pattern[str]] = {
    "optional argument": re.compile(r"\.has_value\(\)|\.defined\(\)"),
    "training mode": re.compile(r"\btrain(?:ing)?\b"),
    "requires_grad": re.compile(r"requires_grad"),
    "scalar or tensor operand": re.compile(r"is_wrapped_number|IsSpecialScalar|\bdim\(\)\s*==\s*0|\.isIntegral\(|\.isFloatingPoint\(|numel\(\)\s*==\s*1"),
    "operand dtype": re.compile(r"isIntegralType|isFloatingType|isComplexType|scalar_type\(\)\s*[=!]="),
    "environment": re.compile(r"GetEnvBool|GetEnvString|ExperimentEnabled|UseBF16"),
}
PATH_FILES = ("torch_xla/csrc/aten_xla_type.cpp", "torch_xla/csrc/aten_autograd_ops.cpp")
CITE = re.compile(r"([\w/]+\.cpp)((?:\s*,?\s*:\d+(?:-\d+)?)+)")


def git_show(git_dir: Path, rev: str, path: str) -> str:
    return subprocess.run(["git", "--git-dir", str(git_dir), "show", f"{rev}:{path}"], check=True, capture_output=True, text=True).stdout


def git_files(git_dir: Path, rev: str, prefix: str) -> list[str]:
    out = subprocess.run(
        ["git", "--git-dir", str(git_dir), "ls-tree", "-r", "--name-only", rev, prefix],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return out.split()


def fallback_sites(path: str, text: str) -> list[dict[str, Any]]:
    """The fallback sites of one C++ file: line, enclosing function and its line, the aten op."""
    lines = text.splitlines()
    sites = []
    for number, line in enumerate(lines, start=1):
        if line.lstrip().startswith("//") or not SITE.search(line):
            continue
        start = number
        while start > 1 and not FUNCTION.match(lines[start - 1]):
            start -= 1
        m = FUNCTION.match(lines[start - 1])
        function = m.group(1) if m else "?"
        op = None
        window = " ".join(lines[number - 1 : number + 3])
        a = ATEN_OP.search(window)
        if "->nonzero()" in line:
            op = "nonzero"
        elif a:
            op = a.group(1) if not a.group(2) else f"{a.group(1)}.{a.group(2)}"
        elif "NmsOp" in window:
            op = "torchvision::nms"
        sites.append({"file": path, "line": number, "function": function, "function_line": start, "fallback_op": op})
    return sites


def argument_paths(path: str, text: str) -> list[dict[str, Any]]:
    """The argument-dependent branches of one lowering file: line, enclosing function, what they read (kinds)."""
    lines = text.splitlines()
    out: list[dict[str, Any]] = []
    ordinal: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        if line.lstrip().startswith("//") or not BRANCH.search(line):
            continue
        condition = " ".join(lines[number - 1 : number + 2]).split("{")[0]
        kinds = [kind for kind, pattern in BRANCH_KINDS.items() if pattern.search(condition)]
        if not kinds:
            continue
        start = number
        while start > 1 and not FUNCTION.match(lines[start - 1]):
            start -= 1
        m = FUNCTION.match(lines[start - 1])
        function = m.group(1) if m else "?"
        name = path.rsplit("/", 1)[-1]
        ordinal[function] = ordinal.get(function, 0) + 1
        key = f"{name}:{function}:{ordinal[function]}"
        out.append({"file": path, "line": number, "function": function, "function_line": start, "kinds": kinds, "key": key})
    return out


def cover_paths(paths: list[dict[str, Any]], sites: list[dict[str, Any]], rules: Any, notes: dict[str, Any]) -> list[dict[str, Any]]:
    """Each branch with what covers it: the fallback site of its function (inventory 1), a rule citing a line of
    the function up to the branch, or its note; a pure function of the four inputs."""
    cites = [(rule, cited_lines(rule.provenance)) for rule in rules if rule.provenance]
    by_function = {(s["file"], s["function_line"]): s for s in sites}
    out = []
    for entry in paths:
        name = entry["file"].rsplit("/", 1)[-1]
        note = notes.get(entry["key"], {})
        site = by_function.get((entry["file"], entry["function_line"]))
        covering = [rule.id for rule, c in cites if any(entry["function_line"] <= n <= entry["line"] + 8 for n in c.get(name, ()))]
        item = dict(entry)
        if "reason" in note:
            item.update(status="reason", reason=note["reason"])
        elif covering or "rule" in note:
            item.update(status="rule", rules=covering or [note["rule"]])
        elif site is not None:
            item.update(status="fallback-site", site=site_key(site))
        else:
            item.update(status="uncovered")
        out.append(item)
    return out


def cited_lines(provenance: str) -> dict[str, set[int]]:
    """``aten_xla_type.cpp:571, :527`` -> {"aten_xla_type.cpp": {571, 527}} (ranges expanded)."""
    out: dict[str, set[int]] = {}
    for m in CITE.finditer(provenance):
        name = m.group(1).rsplit("/", 1)[-1]
        for a, b in re.findall(r":(\d+)(?:-(\d+))?", m.group(2)):
            out.setdefault(name, set()).update(range(int(a), int(b or a) + 1))
    return out


def site_key(site: dict[str, Any]) -> str:
    return f"{site['file'].rsplit('/', 1)[-1]}:{site['function']}:{site['fallback_op']}"


def cover_sites(sites: list[dict[str, Any]], rules: Any, notes: dict[str, Any]) -> list[dict[str, Any]]:
    """Each site with the rules that cite it, else its note: a pure function of the three inputs."""
    cites = [(rule, cited_lines(rule.provenance)) for rule in rules if rule.provenance]
    out = []
    for site in sites:
        name = site["file"].rsplit("/", 1)[-1]
        covering = [rule for rule, c in cites if any(site["function_line"] <= n <= site["line"] for n in c.get(name, ()))]
        note = notes.get(site_key(site), {})
        entry = {**site, "key": site_key(site)}
        if covering:
            entry.update(status="rule", rules=[r.id for r in covering], condition="; ".join(c.describe() for r in covering for c in r.when) or None)
        elif "rule" in note:
            entry.update(status="rule", rules=[note["rule"]], condition=None)
        elif "reason" in note:
            entry.update(status="reason", reason=note["reason"])
        else:
            entry.update(status="uncovered")
        out.append(entry)
    return out


def cover_codes(codes: list[dict[str, Any]], rules: Any, notes: dict[str, Any]) -> list[dict[str, Any]]:
    """Each error code with the rules that predict it, else its note (kind and reason)."""
    out = []
    for code in codes:
        note = notes.get(code["code"], {})
        covering = [r.id for r in rules if r.ncc_code == code["code"]] or ([note["rule"]] if "rule" in note else [])
        entry = {**code, "kind": note.get("kind", "op")}
        if covering:
            entry.update(status="rule", rules=covering)
        elif "reason" in note:
            entry.update(status="reason", reason=note["reason"])
        else:
            entry.update(status="uncovered")
        out.append(entry)
    return out


def error_codes(git_dir: Path, rev: str) -> list[dict[str, Any]]:
    """Code and one-line message of each page under compiler/error-codes/."""
    codes = []
    for path in git_files(git_dir, rev, "compiler/error-codes/"):
        name = path.rsplit("/", 1)[-1]
        if not name.endswith(".rst") or name == "index.rst":
            continue
        text = git_show(git_dir, rev, path)
        m = re.search(r"\*\*Error message\*\*:\s*(.+)", text)
        if m:
            message = m.group(1).strip()
        else:  # pages without the bold label: the first sentence after the title
            body = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith((".", " ", "=", "NCC_", ":"))]
            message = body[0] if body else ""
        codes.append({"code": f"NCC_{name[:-4]}", "page": path, "message": message[:160]})
    return codes


def summary(entries: list[dict[str, Any]], tied: Any = None) -> dict[str, int]:
    counted = [e for e in entries if tied is None or tied(e)]
    return {
        "total": len(entries),
        "counted": len(counted),
        "rule": sum(e["status"] == "rule" for e in counted),
        "reason": sum(e["status"] == "reason" for e in counted),
        "uncovered": sum(e["status"] == "uncovered" for e in counted),
    }


TIED_KINDS = ("op", "dtype", "attribute")


def path_summary(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts of the argument-dependent branches by status and by kind."""
    by_kind: dict[str, int] = {}
    for e in entries:
        for kind in e["kinds"]:
            by_kind[kind] = by_kind.get(kind, 0) + 1
    statuses = ("rule", "fallback-site", "reason", "uncovered")
    return {"total": len(entries), **{s: sum(e["status"] == s for e in entries) for s in statuses}, "by_kind": by_kind}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--xla-git", type=Path, required=True, help="git dir of pytorch/xla")
    parser.add_argument("--tag", default="v2.9.0")
    parser.add_argument("--sdk-git", type=Path, required=True, help="git dir of aws-neuron/aws-neuron-sdk")
    parser.add_argument("--sdk-rev", default="HEAD")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from neuronprobe.support import load_table

    rules = load_table().rules
    notes = json.loads(NOTES.read_text())
    sites: list[dict[str, Any]] = []
    for path in git_files(args.xla_git, args.tag, CSRC):
        if path.endswith(".cpp"):
            text = git_show(args.xla_git, args.tag, path)
            if SITE.search(text):
                sites.extend(fallback_sites(path, text))
    xla = cover_sites(sites, rules, notes["xla_sites"])
    branches = [b for path in PATH_FILES for b in argument_paths(path, git_show(args.xla_git, args.tag, path))]
    paths = cover_paths(branches, sites, rules, notes["xla_argument_paths"])
    sdk_commit = subprocess.run(["git", "--git-dir", str(args.sdk_git), "rev-parse", args.sdk_rev], check=True, capture_output=True, text=True).stdout.strip()
    ncc = cover_codes(error_codes(args.sdk_git, args.sdk_rev), rules, notes["ncc_codes"])
    OUT.mkdir(exist_ok=True)
    (OUT / "xla_fallbacks.json").write_text(
        json.dumps({"source": f"pytorch/xla {args.tag} {CSRC}*.cpp", "summary": summary(xla), "sites": xla}, indent=1) + "\n"
    )
    (OUT / "ncc_error_codes.json").write_text(
        json.dumps(
            {
                "source": f"aws-neuron/aws-neuron-sdk {sdk_commit} compiler/error-codes/",
                "summary": summary(ncc, lambda e: e["kind"] in TIED_KINDS),
                "codes": ncc,
            },
            indent=1,
        )
        + "\n"
    )
    (OUT / "xla_argument_paths.json").write_text(
        json.dumps({"source": f"pytorch/xla {args.tag} {', '.join(PATH_FILES)}", "summary": path_summary(paths), "branches": paths}, indent=1) + "\n"
    )
    for name, entries in (("xla", xla), ("ncc", ncc), ("paths", paths)):
        missing = [e.get("key") or e["code"] for e in entries if e["status"] == "uncovered"]
        counts = path_summary(entries) if name == "paths" else summary(entries)
        print(f"{name}: {counts}" + (f"; uncovered: {', '.join(missing)}" if missing else ""), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
