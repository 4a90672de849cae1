"""Regenerate neuronprobe/support/data/native_table.json from TorchNeuron's public source.

The registered op names are facts; this script reads them from a git checkout (or a
bare mirror) of TorchNeuron's source at one commit (the public April-2026 copy is
``parmoham-aws/test-repo-parmoham``), resolves each through the installed torch's
dispatch table (:mod:`neuronprobe.support.native.resolve`) and writes neuronprobe's
own table with the commit it came from. The upstream source is not committed here.

What counts as registered (the modules TorchNeuron's registration really imports):

* ``torch_neuronx/python_ops/**`` except ``legacy``/``jax`` modules (its
  ``auto_registration.discover_all_implementations`` skips them), read as Python:
  ``@register_aten([...])``, ``@neuron_op(...)`` and its unary/binary/reduction/
  comparison forms, and literal ``aten_lib.impl(name, fn, "PrivateUse1")`` calls;
  commented-out code is not code;
* the C++ ``TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)`` blocks under ``torch_neuronx/csrc``;
* the explicit CPU-fallback list of ``python_ops/cpu_fallback_registrations.py``,
  recorded as called or not (either way those ops run on the host);
* the fallback's warning-silencer list (``VIEW_OPS_WHITELIST``): fallbacks without a warning.

Usage:

    python scripts/build_native_table.py GIT_DIR [--commit REV] [--out PATH]
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "neuronprobe" / "support" / "data" / "native_table.json"
DECORATORS = {"register_aten", "neuron_op", "neuron_unary_op", "neuron_binary_op", "neuron_reduction_op", "neuron_comparison_op"}
# Kernels that are registered but compute on the host (read in the source at the commit).
HOST_KERNELS = {
    "argsort.stable": "its kernel (csrc/aten/TensorShape.cpp argsort_stable_neuron) copies the tensor to the CPU, sorts there and copies the result back",
}


def git(git_dir: Path, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", str(git_dir), *args], check=True, capture_output=True, text=True).stdout


def skipped(path: str) -> bool:
    """Whether TorchNeuron's auto-registration leaves the module out (legacy, jax, tests)."""
    module = path.removesuffix(".py").replace("/", ".")
    return ".legacy" in module or ".jax" in module or "test" in module


def _strings(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [s for elt in node.elts for s in _strings(elt)]
    return []


def python_registrations(text: str) -> set[str]:
    """The aten names one Python module registers for PrivateUse1."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        if name in DECORATORS and node.args:
            found.update(s for s in _strings(node.args[0]) if s.startswith("aten::"))
        elif name == "impl" and len(node.args) >= 3 and _strings(node.args[2]) == ["PrivateUse1"]:
            found.update("aten::" + s.removeprefix("aten::") for s in _strings(node.args[0]))
    return found


def _strip_comments(text: str) -> str:
    return re.sub(r"/\*.*?\*/", "", re.sub(r"//[^\n]*", "", text), flags=re.S)


def cpp_registrations(text: str) -> set[str]:
    """``m.impl("name", ...)`` inside ``TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { ... }`` blocks."""
    text = _strip_comments(text)
    found: set[str] = set()
    for match in re.finditer(r"TORCH_LIBRARY_IMPL\(\s*aten\s*,\s*PrivateUse1\s*,\s*(\w+)\s*\)\s*\{", text):
        depth, i = 1, match.end()
        while depth and i < len(text):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        found.update("aten::" + n for n in re.findall(rf'{match.group(1)}\.impl\(\s*"([^"]+)"', text[match.end() : i]))
    return found


def cpu_fallback_list(text: str) -> list[str]:
    """The op names of ``register_cpu_fallback_ops``'s list of (name, op) pairs."""
    names = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Tuple) and len(node.elts) == 2 and _strings(node.elts[0]):
            names.append("aten::" + _strings(node.elts[0])[0])
    return names


def silenced(text: str) -> list[str]:
    """The names of the fallback's warning-silencer set (``VIEW_OPS_WHITELIST``)."""
    match = re.search(r"VIEW_OPS_WHITELIST\s*=?\s*\{(.*?)\};", _strip_comments(text), flags=re.S)
    return sorted(re.findall(r'"(aten::[^"]+)"', match.group(1))) if match else []


def read_source(git_dir: Path, commit: str) -> dict:
    files = git(git_dir, "ls-tree", "-r", "--name-only", commit).splitlines()
    show = lambda p: git(git_dir, "show", f"{commit}:{p}")  # noqa: E731
    registered: set[str] = set()
    for path in files:
        if path.startswith("torch_neuronx/python_ops/") and path.endswith(".py") and not skipped(path):
            registered |= python_registrations(show(path))
        elif path.startswith("torch_neuronx/csrc/") and path.endswith((".cpp", ".cc")):
            registered |= cpp_registrations(show(path))
    fallback_file = "torch_neuronx/python_ops/cpu_fallback_registrations.py"
    fallbacks = cpu_fallback_list(show(fallback_file)) if fallback_file in files else []
    # Is register_cpu_fallback_ops called anywhere but its own definition?
    calls = [
        p
        for p in files
        if p.startswith("torch_neuronx/") and p.endswith(".py") and "register_cpu_fallback_ops(" in show(p).replace("def register_cpu_fallback_ops(", "")
    ]
    bindings = "torch_neuronx/csrc/core/NeuronBindings.cpp"
    return {
        "registered": sorted(registered),
        "cpu_fallbacks": fallbacks,
        "cpu_fallbacks_called": bool(calls),
        "silenced": silenced(show(bindings)) if bindings in files else [],
    }


def build(git_dir: Path, commit: str, repo: str) -> dict:
    import torch

    from neuronprobe.support.native.resolve import op_key, resolve

    sha = git(git_dir, "rev-parse", commit).strip()
    when = git(git_dir, "show", "-s", "--format=%cs", sha).strip()
    source = read_source(git_dir, sha)
    resolved = resolve(source["registered"], source["cpu_fallbacks"])
    reach = set(resolved.no_kernel) | set(resolved.registered_cpu_fallback)
    called = (
        "called at import" if source["cpu_fallbacks_called"] else "defined but not called at this commit: the generic fallback takes them, to the same effect"
    )
    return {
        "format": 1,
        "stack": "native",
        "release": f"TorchNeuron development source of {when} (before the Neuron 2.33 public beta)",
        "source": {"repository": repo, "commit": sha, "date": when},
        "torch": torch.__version__.split("+")[0],
        "built": date.today().isoformat(),
        "provenance": [
            f"{repo}@{sha[:8]} ({when}): torch_neuronx/python_ops (register_aten, neuron_op, aten_lib.impl(..., 'PrivateUse1'); legacy/ and jax/ skipped as auto_registration.discover_all_implementations skips them), torch_neuronx/csrc TORCH_LIBRARY_IMPL(aten, PrivateUse1, ...)",
            f"registered CPU fallbacks: python_ops/cpu_fallback_registrations.py register_cpu_fallback_ops ({called})",
            "no kernel: every other overload of torch's dispatch table without a CompositeImplicitAutograd or CompositeExplicitAutograd kernel reaches TorchNeuron's boxed CPU fallback (csrc/core/NeuronBindings.cpp TORCH_LIBRARY_IMPL(_, PrivateUse1) neuron_cpu_fallback)",
            f"resolved through torch {torch.__version__.split('+')[0]}'s dispatcher (torch._C._dispatch_get_all_op_names, _dispatch_has_kernel_for_dispatch_key)",
        ],
        "counts": {
            "registered_names": len(source["registered"]),
            "neuron_kernel": len(resolved.neuron_kernel),
            "registered_cpu_fallback": len(resolved.registered_cpu_fallback),
            "composite": len(resolved.composite),
            "no_kernel": len(resolved.no_kernel),
            "decomposes": resolved.decomposes,
            "unmatched": len(resolved.unmatched),
        },
        "neuron_kernel": resolved.neuron_kernel,
        "registered_cpu_fallback": resolved.registered_cpu_fallback,
        "composite": resolved.composite,
        "no_kernel": resolved.no_kernel,
        "unmatched_registrations": resolved.unmatched,
        "silent_fallback": sorted(k for k in (op_key(s) for s in source["silenced"]) if k in reach),
        "host_kernels": {k: v for k, v in HOST_KERNELS.items() if k in resolved.neuron_kernel},
        "dtype_fallback": {},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("git_dir", type=Path, help="a TorchNeuron git directory (a clone's .git or a bare mirror)")
    parser.add_argument("--commit", default="HEAD")
    parser.add_argument("--repo", default="parmoham-aws/test-repo-parmoham", help="the repository the commit is from (provenance)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    table = build(args.git_dir, args.commit, args.repo)
    args.out.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")
    print(f"{args.out}: {table['counts']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
