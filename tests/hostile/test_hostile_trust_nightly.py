"""Two nightlies at once into one folder (issue 34.9): the index lists every model of both.

Each nightly builds its files before it takes the folder's lock; the one that writes
last used to write an index built without the other's models. The index is now
rendered again under the lock from the reports on disk and the merged summary.
"""

from __future__ import annotations

import json
from pathlib import Path

from diff_fixtures import finding, make_report

from neuronprobe.files import write_atomic
from neuronprobe.nightly.run import INDEX_FILE, SUMMARY_FILE, load_config, run_nightly, write_night

NIGHT = "2025-06-01"


def _config(folder: Path, names: list[str]) -> Path:
    folder.mkdir()
    for name in names:
        (folder / f"{name}.py").write_text("# stands in for a model file\n")
    path = folder / "nightly.toml"
    path.write_text("".join(f'[[models]]\nmodel = "{n}.py"\n\n' for n in names))
    return path


def _analyse(model, config, require_backend, command_line):
    if model.name == "broken":
        from neuronprobe.errors import ModelLoadError

        raise ModelLoadError(f"{model.name}.py:1: the model's forward raised ValueError: <b>no</b>")
    return make_report([finding("aten::nonzero", "dynamic_shape", 3)], model=model.name)


def test_two_nightlies_built_at_once_leave_an_index_of_both(tmp_path):
    reports = tmp_path / "reports"
    first = load_config(_config(tmp_path / "a", ["alpha", "broken"]))
    second = load_config(_config(tmp_path / "b", ["beta", "gamma"]))
    # Both nights are built before either writes: each sees a folder without the other's models.
    one = run_nightly(first, reports, NIGHT, analyze=_analyse)
    two = run_nightly(second, reports, NIGHT, analyze=_analyse)
    assert "beta" not in one.files[INDEX_FILE] and "alpha" not in two.files[INDEX_FILE]
    write_night(one, reports, write_atomic)
    write_night(two, reports, write_atomic)  # the last writer
    index = (reports / INDEX_FILE).read_text()
    for name in ("alpha", "beta", "gamma"):
        assert f"{NIGHT}/{name}.html" in index, name
    assert "broken" in index and "&lt;b&gt;no&lt;/b&gt;" in index  # the other run's failure, escaped
    summary = json.loads((reports / NIGHT / SUMMARY_FILE).read_text())
    assert [m["name"] for m in summary["models"]] == ["alpha", "beta", "broken", "gamma"]


def test_a_single_nightly_writes_the_index_it_built(tmp_path):
    reports = tmp_path / "reports"
    config = load_config(_config(tmp_path / "a", ["alpha", "beta"]))
    result = run_nightly(config, reports, NIGHT, analyze=_analyse)
    write_night(result, reports, write_atomic)
    assert (reports / INDEX_FILE).read_text() == result.files[INDEX_FILE]  # rendered again from disk: the same bytes
