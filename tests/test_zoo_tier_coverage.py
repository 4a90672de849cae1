"""The zoo tier covers the loader (issue 27): every registered family recipe and input repair is exercised
by at least one tier type, every capture strategy appears, and the tier's parts hold each type once.

The per-type checks are in tests/test_zoo_tier_<n>.py; the tier is made by ``scripts/zoo.py --tier``.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from helpers import ROOT
from zoo_tier import PARTS, part, registered, tier

from neuronprobe.capture.strategies import HF_STRATEGIES


def _covered() -> set[str]:
    return {n for entry in tier()["types"] for n in (*entry["recipes"], *entry["repairs"])}


def test_every_registered_recipe_and_repair_is_exercised_by_a_tier_type():
    recipes, repairs = registered()
    unexercised = tier()["unexercised"]
    known_dead = {*unexercised["recipes"], *unexercised["repairs"]}
    uncovered = [n for n in (*recipes, *repairs) if n not in _covered() and n not in known_dead]
    assert not uncovered, (
        f"no zoo tier type exercises {', '.join(uncovered)}: regenerate the tier "
        "(OMP_NUM_THREADS=1 python scripts/zoo.py --tier tests/data/zoo_tier.json) or name a real type that needs it"
    )


def test_the_tier_names_only_registered_recipes_and_repairs():
    """A renamed or deleted recipe or repair fails here, by name, until the tier is regenerated."""
    recipes, repairs = registered()
    data = tier()
    stale = sorted(_covered() - {*recipes, *repairs})
    assert not stale, f"the zoo tier names {', '.join(stale)}, which the loader no longer registers"
    listed = [*data["unexercised"]["recipes"], *data["unexercised"]["repairs"]]
    assert [n for n in listed if n not in (*recipes, *repairs)] == [], "a name listed as unexercised is not registered"
    assert [n for n in listed if n in _covered()] == [], "a name listed as unexercised is exercised by a tier type"


def test_every_capture_strategy_appears_in_the_tier():
    seen = {entry["strategy"] for entry in tier()["types"]}
    assert seen == {str(s) for s in HF_STRATEGIES}


def test_the_tier_was_recorded_on_the_installed_transformers_and_torch():
    """The expectations hold for the releases they were recorded on: a pin bump regenerates the tier."""
    import torch
    import transformers

    recorded = tier()["recorded_on"]
    assert (recorded["transformers"], recorded["torch"]) == (transformers.__version__, torch.__version__), (
        f"the zoo tier was recorded on transformers {recorded['transformers']}, torch {recorded['torch']}: regenerate it "
        "(OMP_NUM_THREADS=1 python scripts/zoo.py --tier tests/data/zoo_tier.json)"
    )


def test_each_tier_type_is_in_exactly_one_part_and_has_a_lower_bound_below_its_recorded_ops():
    types = [entry["model_type"] for entry in tier()["types"]]
    parted = [entry["model_type"] for n in range(1, PARTS + 1) for entry in part(n)]
    assert sorted(parted) == sorted(types) and len(set(types)) == len(types)
    for entry in tier()["types"]:
        assert 0 < entry["min_ops"] <= entry["ops"], entry["model_type"]


def _zoo() -> Any:
    spec = importlib.util.spec_from_file_location("zoo", ROOT / "scripts" / "zoo.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_greedy_cover_takes_the_cheapest_types_that_cover_every_name():
    zoo = _zoo()

    def row(name: str, seconds: float, recipes: list[str], repairs: tuple[str, ...] = (), strategy: str = "meta") -> dict[str, Any]:
        return {"model_type": name, "analysed": True, "seconds": seconds, "strategy": strategy, "recipes": recipes, "repairs": list(repairs)}

    rows = [
        row("slow_all", 60.0, ["a", "b"], ("r",)),
        row("fast_a", 0.5, ["a"]),
        row("fast_b", 0.5, ["b"]),
        row("repairs_r", 1.0, [], ("r",), strategy="fake"),
        row("nothing", 0.1, []),
        {**row("partial_c", 0.1, ["c", "a"]), "partial": True},  # a partial capture only for what no whole one covers
    ]
    chosen = zoo.greedy_tier(rows, {"a", "b", "r", "c", "strategy:meta", "strategy:fake"})
    assert [(r["model_type"], new) for r, new in chosen] == [
        ("fast_a", ["a", "strategy:meta"]),  # 2 names for 0.5 s (+2 s a type), before fast_b by name
        ("repairs_r", ["r", "strategy:fake"]),  # 2 names for 1 s beat 1 name for 0.5 s
        ("fast_b", ["b"]),
        ("partial_c", ["c"]),
    ]


def test_a_recording_keeps_each_name_once_in_firing_order_and_nothing_is_kept_outside_one():
    from neuronprobe.loaders import fired

    fired.recipe("outside")  # no recording open: nothing to note into, and no error
    with fired.recording() as outer:
        fired.recipe("b")
        with fired.recording() as inner:  # a strategy's own recording hides the enclosing one
            fired.repair("repair_x")
        fired.recipe("a")
        fired.recipe("b")
    assert (outer.recipes, outer.repairs) == (["b", "a"], [])
    assert (inner.recipes, inner.repairs) == ([], ["repair_x"])
