"""The ``hf:`` loader as a package (neuronprobe/loaders/hf/): imports that run one way, family recipes as
registered records, the one search engine, and the error texts it learns from as versioned data."""

from __future__ import annotations

import ast
import inspect
import json
import re
from pathlib import Path

import pytest

from neuronprobe.loaders.hf import InputPlan, InputsInfo
from neuronprobe.loaders.hf import error_texts as texts
from neuronprobe.loaders.hf.inputs.families import registered
from neuronprobe.loaders.hf.inputs.recipes import RecipeContext
from neuronprobe.loaders.hf.search import Found, Step, search

PACKAGE = Path(__file__).resolve().parent.parent / "neuronprobe" / "loaders" / "hf"
# The order modules may import each other in: each only from those before it (the package's __init__ re-exports).
LAYERS = [
    "error_texts",
    "config",
    "build",
    "shrink",
    "inputs.primitives",
    "inputs.recipes",
    "inputs.segmentation|inputs.grids|inputs.audio|inputs.image_text|inputs.other",
    "inputs.families",
    "inputs.make",
    "inputs.repairs",
    "search",
    "parent",
    "load",
]


def _rank(module: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if module in layer.split("|"))


def _imports(path: Path) -> list[tuple[str, int]]:
    """Every neuronprobe.loaders.hf module ``path`` imports, at module level or in a function, with its line."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("neuronprobe.loaders.hf"):
            base = node.module.removeprefix("neuronprobe.loaders.hf").lstrip(".")
            names = [f"{base}.{a.name}".lstrip(".") for a in node.names] if base in ("", "inputs") else [base]
            found += [(name, node.lineno) for name in names]
    return found


def test_the_package_imports_run_one_way_lazy_imports_included():
    modules = {".".join(p.relative_to(PACKAGE).with_suffix("").parts): p for p in PACKAGE.rglob("*.py") if p.name != "__init__.py"}
    assert set(modules) == {m for layer in LAYERS for m in layer.split("|")}  # a new module takes its place in LAYERS
    upward = [
        f"{name} line {line} imports {target}"
        for name, path in modules.items()
        for target, line in _imports(path)
        if _rank(target) >= _rank(name) and target != name
    ]
    assert upward == []
    old = [p for p in ("hf.py", "hf_families.py", "hf_parent.py") if (PACKAGE.parent / p).exists()]
    assert old == []


def test_recipes_are_records_in_an_explicit_order_with_their_sources():
    recipes = registered()
    assert len(recipes) == 60
    assert len({r.priority for r in recipes}) == len(recipes) and list(recipes) == sorted(recipes, key=lambda r: r.priority)
    assert {r.family for r in recipes} == {"segmentation", "grids", "audio", "image_text", "other"}
    for r in recipes:
        assert r.sources, f"{r.name} names no transformers source"
        assert list(inspect.signature(r.build).parameters) == ["ctx"], r.name
    trajectory = next(r for r in recipes if r.name == "trajectory_inputs")
    assert trajectory.needs == {"states", "actions", "returns_to_go", "timesteps"}
    assert trajectory.sources == ("transformers/models/decision_transformer/modeling_decision_transformer.py",)


def test_a_recipe_runs_only_for_a_forward_with_every_parameter_it_needs():
    trajectory = next(r for r in registered() if r.name == "trajectory_inputs")
    config = type("C", (), {"state_dim": 3, "act_dim": 2, "n_positions": 96, "max_ep_len": 10})()
    names = ("states", "actions", "returns_to_go", "timesteps")
    ctx = RecipeContext(None, config, {n: None for n in names}, 1, 8, "cpu", {}, InputPlan())  # type: ignore[misc]
    made = trajectory(ctx)
    assert made is not None and made["states"].shape == (1, 8, 3) and made["actions"].shape == (1, 8, 2)
    assert trajectory(RecipeContext(None, config, {n: None for n in names[:3]}, 1, 8, "cpu", {}, InputPlan())) is None  # type: ignore[misc]


def test_the_search_retries_with_what_each_failure_taught_and_stops_when_nothing_more_is_learned():
    info = InputsInfo(main_input="input_ids", shapes={"input_ids": (1, 8)})
    tried: list[InputPlan] = []

    def attempt(plan: InputPlan) -> Step[str]:
        tried.append(plan)
        return Step(value="ran") if plan.image_tokens == 2 else Step(error=ValueError(f"wanted {len(tried)}"), info=info)

    def learn(plan: InputPlan, error: BaseException, seen: InputsInfo) -> InputPlan | None:
        return InputPlan(image_tokens=(plan.image_tokens or 0) + 1)

    found = search(attempt, learn, retries=5)
    assert found == Found("ran", InputPlan(image_tokens=2), found.errors) and [str(e) for e in found.errors] == ["wanted 1", "wanted 2"]
    assert found.error is None
    # Out of retries: the last plan tried and the last error say why.
    tried.clear()
    short = search(attempt, learn, retries=1)
    assert short.value is None and short.plan == InputPlan(image_tokens=1) and str(short.error) == "wanted 2"
    # A failure with nothing to learn from (a build error: no inputs info) ends the search at once.
    tried.clear()
    built = search(lambda plan: Step(error=RuntimeError("no build")), learn, retries=5)
    assert built.value is None and str(built.error) == "no build" and len(built.errors) == 1


def test_every_error_text_is_data_with_its_versions_and_matches_its_example():
    data = json.loads((PACKAGE / "data" / texts.TEXTS_FILE).read_text())
    loaded = texts.error_texts()
    assert len(loaded) == len(data["patterns"]) == 39
    for entry in loaded.values():
        assert entry.regex.search(entry.example), entry.id
        assert dict(entry.checked_on).keys() >= {"torch", "transformers"} and entry.provenance
    # Each is used by the code, and the code compiles no error text of its own.
    code = "\n".join(p.read_text() for p in PACKAGE.rglob("*.py"))
    used = set(re.findall(r'error_text\("([\w-]+)"\)', code))
    assert used == set(loaded)


def test_a_malformed_error_text_is_neuronprobes_bug_named_by_entry():
    good = {"id": "x", "regex": "abc", "printed_by": ["torch"], "checked_on": {"torch": "2.13.0"}, "provenance": "p", "example": "abc"}
    assert texts._entry(good, "#0").regex.pattern == "abc"
    with pytest.raises(texts.ErrorTextsError, match=r"pattern 'x' does not match its own example"):
        texts._entry({**good, "example": "xyz"}, "#0")
    with pytest.raises(texts.ErrorTextsError, match=r"pattern 'x' lacks checked_on"):
        texts._entry({k: v for k, v in good.items() if k != "checked_on"}, "#0")
    with pytest.raises(texts.ErrorTextsError, match=r"pattern 'x' does not compile"):
        texts._entry({**good, "regex": "("}, "#0")
    with pytest.raises(texts.ErrorTextsError, match=r"has no pattern 'nope'"):
        texts.error_text("nope")
