"""The layers contract of pyproject.toml (run by `make lint` through import-linter) covers every module."""

from __future__ import annotations

import pkgutil

import tomllib
from helpers import ROOT

import neuronprobe


def _contracts() -> dict[str, dict]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return {c["id"]: c for c in config["contracts"]}


def test_every_module_of_the_package_sits_in_a_layer():
    """A module left out of the layers would be free to import anything: a new one must be placed."""
    layers = _contracts()["layers"]["layers"]
    placed = {name.strip() for layer in layers for name in layer.replace(":", "|").split("|")}
    modules = {m.name for m in pkgutil.iter_modules(neuronprobe.__path__)}
    assert modules - placed == set(), "add these to a layer in pyproject.toml [tool.importlinter]"
    assert placed - modules == set(), "these layers name modules that do not exist"


def test_cli_is_on_top_and_the_vocabulary_errors_and_defaults_at_the_bottom():
    layers = _contracts()["layers"]["layers"]
    assert layers[:2] == ["__main__", "cli"]
    bottom = [set(layer.split(" | ")) for layer in layers[-3:]]
    assert "vocabulary" in bottom[0] and {"errors", "defaults"} <= bottom[-1]


def test_every_module_of_report_sits_in_a_report_layer():
    """Inside report the schema is below the renderers and the notebook display above them: a new module must be placed."""
    import neuronprobe.report
    import neuronprobe.report.schema

    for contract, package in (("report-layers", neuronprobe.report), ("report-schema-layers", neuronprobe.report.schema)):
        layers = _contracts()[contract]["layers"]
        placed = {name.strip() for layer in layers for name in layer.replace(":", "|").split("|")}
        modules = {m.name for m in pkgutil.iter_modules(package.__path__)}
        assert modules - placed == set(), f"add these to the {contract} contract in pyproject.toml"
        assert placed - modules == set(), f"the {contract} contract names modules that do not exist"


def test_type_only_imports_count():
    """A type-only import that goes upward is a circle all the same (issue 35.3): import-linter counts them."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    assert config["exclude_type_checking_imports"] is False
