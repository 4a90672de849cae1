"""Hostile rule files (--rules): every malformed one is one sentence naming the file (exit 2), never a crash.

The loader runs in-process here (it is what the analysis worker calls); one case goes
through the CLI to check the worker does not blame the model. The fuzzing feeds the
loader mutated rule documents and random bytes: each either loads or raises InputError,
and the file is byte-identical afterwards.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import MODELS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from io_cli import bounded
from typer.testing import CliRunner

from neuronprobe.cli import app
from neuronprobe.errors import InputError
from neuronprobe.support import code_rule_ids, load_table, with_user_rules

runner = CliRunner()
BASE = {"id": "my-rule", "verdict": "cpu_fallback", "message": "m", "fix": "f", "ops": ["addmm"], "provenance": "p"}


def _load(path: Path):
    return with_user_rules(load_table(), path)


def _file(tmp_path: Path, doc: object) -> Path:
    path = tmp_path / "rules.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"message": ["a", "list"]}, 'needs a non-empty string "message"'),
        ({"fix": {"a": "dict"}}, 'needs a non-empty string "fix"'),
        ({"verdict": ["cpu_fallback"]}, 'needs a non-empty string "verdict"'),
        ({"fixes": {"addmm": ["not", "a", "string"]}}, '"fixes" must be an object of op -> fix'),
        ({"provenance": {"a": 1}}, '"provenance" must be a string'),
        ({"sdk_from": ["2.31.0"]}, 'sdk_from ["2.31.0"] is not a release written like 2.31.0'),
        ({"sdk_fixed": {"v": 1}}, 'sdk_fixed {"v": 1} is not a release written like 2.31.0'),
        ({"sdk_fixed": "next"}, 'sdk_fixed "next" is not a release written like 2.31.0'),
        ({"sdk_from": "9.9.9"}, "sdk_from '9.9.9' is not a release the file lists"),
        ({"override": "yes"}, '"override" must be true or false'),
        ({"when": [{"arg": ["beta"], "eq": 1}]}, '"arg" takes the name of an argument'),
        ({"when": [{"arg": "beta", "eq": {"x": 1}}]}, '"eq" takes a number, string, boolean or null'),
        ({"when": [{"tensor": "self", "dtype_in": [["int64"]]}]}, '"dtype_in" takes a non-empty list of dtype names'),
        ({"when": [{"tensor": "self", "dim": True, "gt": 1}]}, 'a tensor condition is "dtype_in"'),
        ({"ops": "addmm"}, '"ops" must be a list of strings'),
    ],
)
def test_a_wrong_type_names_the_file_and_the_rule(tmp_path, change, words):
    path = _file(tmp_path, {"rules": [{**BASE, **change}]})
    with pytest.raises(InputError) as err:
        _load(path)
    assert str(err.value).startswith(f"{path}: rule 'my-rule': ") and words in str(err.value), str(err.value)


def test_sdk_releases_of_the_file_are_releases(tmp_path):
    path = _file(tmp_path, {"sdk_releases": {"latest": "2.20"}, "rules": [BASE]})
    with pytest.raises(InputError, match='"sdk_releases" must be an object of release'):
        _load(path)


@pytest.mark.parametrize("taken", ["dynamic-output-shape", "no-lowering", "host-read", "observed-fallback", "hlo-f64", "data-dependent-branch"])
def test_an_id_neuronprobe_gives_is_refused(tmp_path, taken):
    path = _file(tmp_path, {"rules": [{**BASE, "id": taken}]})
    with pytest.raises(InputError) as err:
        _load(path)
    assert str(err.value).startswith(f"{path}: rule {taken!r}: the id is")


def test_a_declared_override_of_a_bundled_rule_is_accepted_and_an_override_of_nothing_is_not(tmp_path):
    table = _load(_file(tmp_path, {"rules": [{**BASE, "id": "dynamic-output-shape", "override": True}]}))
    assert table.rules[0].id == "dynamic-output-shape" and table.rules[0].override
    with pytest.raises(InputError, match="no bundled rule has this id"):
        _load(_file(tmp_path, {"rules": [{**BASE, "override": True}]}))
    with pytest.raises(InputError, match="neuronprobe gives its own findings"):
        _load(_file(tmp_path, {"rules": [{**BASE, "id": "host-read", "override": True}]}))


def test_an_override_applies_only_to_the_ops_it_names(tmp_path):
    """A user's dynamic-output-shape for addmm must not relabel aten::_unique2 (the bundled rule's op)."""
    rules = _file(tmp_path, {"rules": [{**BASE, "id": "dynamic-output-shape", "override": True, "message": "MINE"}]})
    out = tmp_path / "r.json"
    result = runner.invoke(app, ["analyze", str(MODELS / "unique.py"), "--backend", "static", "--rules", str(rules), "--json", str(out), "--no-html"])
    assert result.exit_code == 0, result.output
    (finding,) = json.loads(out.read_text())["findings"]
    assert (finding["op"], finding["verdict"], finding["rule"]) == ("aten::_unique2", "dynamic_shape", "dynamic-output-shape")
    assert "MINE" not in finding["message"] and finding["line"] == 7


def test_a_rule_file_nested_100000_deep_is_exit_2_naming_the_file(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"rules": [{"id": "x", "when": ' + "[" * 100_000 + "]" * 100_000 + "}]}")
    with pytest.raises(InputError, match=f"^{path}: the rule file is nested too deep to read$"):
        _load(path)
    # Through the CLI: the worker loads it, and the sentence names the file, not the model code.
    result = runner.invoke(app, ["analyze", str(MODELS / "mlp.py"), "--backend", "static", "--rules", str(path), "-o", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert result.output.strip() == f"error: {path}: the rule file is nested too deep to read"
    assert not (tmp_path / "out").exists()


def test_conditions_nested_deep_but_readable_json_are_exit_2(tmp_path):
    path = tmp_path / "deep.json"
    for depth in (400, 900, 3000):  # the JSON reader, or the condition parser, reaches its limit first
        cond = '{"any": [' * depth + '{"arg": "beta", "eq": 1}' + "]}" * depth
        path.write_text(
            '{"rules": [{"id": "my-rule", "verdict": "cpu_fallback", "message": "m", "fix": "f", "ops": ["addmm"], "provenance": "p", "when": [' + cond + "]}]}"
        )
        try:
            _load(path)
        except InputError as exc:
            assert str(exc).startswith(f"{path}: "), str(exc)


def test_fail_on_a_type_error_in_a_rule_file_names_the_rule_file_not_the_report(tmp_path):
    path = _file(tmp_path, {"rules": [{**BASE, "fixes": {"addmm": ["x"]}}]})
    result = runner.invoke(app, ["analyze", str(MODELS / "mlp.py"), "--rules", str(path), "--fail-on", "my-rule", "-o", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    assert result.output.strip().startswith(f"error: {path}: rule 'my-rule': ") and "report.findings" not in result.output


# --- fuzzing ---------------------------------------------------------------------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=12,
)
_keys = st.sampled_from(
    [
        "id",
        "verdict",
        "message",
        "fix",
        "ops",
        "not_ops",
        "tags",
        "dtypes",
        "when",
        "fixes",
        "sdk_from",
        "sdk_fixed",
        "provenance",
        "override",
        "targets",
        "ncc_code",
    ]
)


@st.composite
def _mutated_rule_files(draw: st.DrawFn) -> object:
    rule: dict[str, object] = dict(BASE)
    for key in draw(st.lists(_keys, max_size=4)):
        rule[key] = draw(_json)
    rules = draw(st.sampled_from([[rule], [rule, rule], rule, []]))
    return draw(st.sampled_from([{"rules": rules}, {"rules": rules, "sdk_releases": draw(_json)}, rules]))


def _loads_or_refuses(path: Path) -> None:
    before = path.read_bytes()
    try:
        with bounded():
            _load(path)
    except InputError as exc:
        assert str(exc).startswith(str(path)), str(exc)
    assert path.read_bytes() == before


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=_mutated_rule_files())
def test_fuzz_mutated_rule_files_load_or_name_the_file(tmp_path, doc):
    _loads_or_refuses(_file(tmp_path, doc))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=200))
def test_fuzz_random_bytes_as_a_rule_file(tmp_path, data):
    path = tmp_path / "rules.json"
    path.write_bytes(data)
    _loads_or_refuses(path)


def test_the_registry_is_what_the_loader_refuses():
    assert {"host-read", "grad-scaler-sync", "branch-on-metric", "observed-fallback", "hlo-f64", "no-lowering"} <= code_rule_ids()
