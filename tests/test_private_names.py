"""No module of neuronprobe imports another module's private (underscore) name (issue 35.3).

A leading underscore says "only this module relies on it": a rename there must not break another
module. A name another module needs is public, named for what it is, or lives where both can import it.
The walk reads every module's AST: ``from m import _x`` (relative forms included) and ``m._x`` on a
module bound by an import. The door to torch's own private internals, ``neuronprobe._torch``, is the
one package whose names may start with an underscore (each internal there has a self-check).
"""

from __future__ import annotations

import ast
from pathlib import Path

from helpers import ROOT

PACKAGE = ROOT / "neuronprobe"
PRIVATE_DOOR = "neuronprobe._torch"

# (importing module, imported module, name): the training module's, which its split (issue 35.3, h-training)
# makes public or moves. Remove each entry when its import is gone: the test fails on an entry no import uses.
TRAINING_PENDING: frozenset[tuple[str, str, str]] = frozenset()  # training made its names public (issue 35.3): none left


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def private_imports(path: Path, root: Path = ROOT) -> list[tuple[str, str, str, int]]:
    """(importing module, imported module, private name, line) for each private name ``path`` (a module under
    ``root``, the folder that holds the ``neuronprobe`` package) takes from another module."""
    module = _module_name(path, root)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[str, str, str, int]] = []
    bound: dict[str, str] = {}  # a local name -> the neuronprobe module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = _absolute(node, module, path.name == "__init__.py")
            if not source.startswith("neuronprobe"):
                continue
            for alias in node.names:
                if _private(alias.name):
                    found.append((module, source, alias.name, node.lineno))
                else:  # `from neuronprobe import training` binds a module (or a name: its attributes are checked alike)
                    bound[alias.asname or alias.name] = f"{source}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("neuronprobe"):
                    bound[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr) and isinstance(node.value, ast.Name) and node.value.id in bound:
            found.append((module, bound[node.value.id], node.attr, node.lineno))
    return [f for f in found if f[1] != module and not f[1].startswith(PRIVATE_DOOR)]


def _all_private_imports() -> list[tuple[str, str, str, int]]:
    return [hit for path in sorted(PACKAGE.rglob("*.py")) for hit in private_imports(path)]


def test_no_module_imports_another_module_s_private_name():
    hits = [h for h in _all_private_imports() if h[:3] not in TRAINING_PENDING]
    assert hits == [], "\n".join(f"{m} (line {line}) imports {source}.{name}: make it public or move it" for m, source, name, line in hits)


def test_every_pending_training_entry_is_still_needed():
    used = {h[:3] for h in _all_private_imports()}
    stale = sorted(TRAINING_PENDING - used)
    assert stale == [], f"remove these from TRAINING_PENDING, no module imports them any more: {stale}"


def test_the_walk_finds_each_form_of_private_import(tmp_path):
    """The check itself: each form is found, a public name, a dunder and the torch door are not."""
    package = tmp_path / "neuronprobe" / "pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    source = (
        "from neuronprobe.analysis import _metadata, AnalyzeOptions\n"
        "from .sibling import _helper\n"
        "from neuronprobe import training\n"
        "import neuronprobe.capture.graph as graph\n"
        "from neuronprobe._torch.fake_tensor import fake_mode_with_shapes\n"
        "from neuronprobe.version import __version__\n"
        "training._loss_of(1)\n"
        "graph._bare_call\n"
        "training.with_labels\n"
    )
    module = package / "user.py"
    module.write_text(source)
    hits = {(m, s, n) for m, s, n, _ in private_imports(module, tmp_path)}
    assert hits == {
        ("neuronprobe.pkg.user", "neuronprobe.analysis", "_metadata"),
        ("neuronprobe.pkg.user", "neuronprobe.pkg.sibling", "_helper"),
        ("neuronprobe.pkg.user", "neuronprobe.training", "_loss_of"),
        ("neuronprobe.pkg.user", "neuronprobe.capture.graph", "_bare_call"),
    }
