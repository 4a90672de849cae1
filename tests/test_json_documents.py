"""Every JSON file besides the report is a versioned, typed document read by the one strict reader (issue 35.4).

For each (``audit --json``, ``diff --json``, ``buckets --json`` in its three forms, the nightly's
``_nightly.json`` and ``_shard.json``): what is written loads back equal; ``schema_version`` comes
first; a file written before the version (the same shape, no ``schema_version``) loads as schema 1;
a newer neuronprobe's file, an unknown field and a wrong type are each refused with one sentence
naming the versions or the field, never a traceback.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from diff_fixtures import finding, make_report
from typer.testing import CliRunner

from neuronprobe.audit.engine import audit_paths
from neuronprobe.audit.model import AUDIT_DOCUMENT
from neuronprobe.cli import app
from neuronprobe.errors import ReportFormatError
from neuronprobe.nightly.documents import SHARD_MANIFEST_DOCUMENT, SUMMARY_DOCUMENT, NightEntry, NightSummary, ShardEntry, ShardManifest
from neuronprobe.report.diff import DIFF_DOCUMENT, diff_reports, load_diff
from neuronprobe.shape_buckets.decode import propose_decode_buckets
from neuronprobe.shape_buckets.documents import BUCKETS_DOCUMENT, DECODE_BUCKETS_DOCUMENT, SERVING_PLAN_DOCUMENT, buckets_json
from neuronprobe.shape_buckets.propose import propose_buckets
from neuronprobe.shape_buckets.serving import propose_serving_plan
from neuronprobe.typed_json import DocumentSchema

TESTS = Path(__file__).parent
runner = CliRunner()


def _audit() -> Any:
    section = audit_paths([TESTS / "data" / "audit_repo"], jobs=1)
    assert section.findings and section.problems is not None  # a real audit: findings to round-trip
    return section


def _diff() -> Any:
    return diff_reports(make_report([]), make_report([finding()]), base_label="base", new_label="new")


def _summary() -> NightSummary:
    return NightSummary(
        "2026-12-03",
        [
            NightEntry(
                "tiny_gpt", "regressed", json="2026-12-03/tiny_gpt.json", baseline="2026-12-02", comparable=True, regressions=["new cpu_fallback"], seconds=3.5
            ),
            NightEntry("broken", "failed", error="ModelLoadError: no weights", seconds=0.25, reused_from=None),
        ],
    )


def _manifest() -> ShardManifest:
    return ShardManifest(
        config_sha256="0" * 64,
        neuronprobe="0.1.0",
        rules="2026.11",
        backend="static",
        date="2026-12-03",
        history=30,
        shard=[1, 2],
        config_models=["a", "b"],
        models=[ShardEntry("a", seconds=1.5), ShardEntry("b", error="boom", internal=True, seconds=0.0)],
    )


# (schema, a value of it computed by the library as the command computes it, a field path that holds an integer)
CASES: list[tuple[DocumentSchema[Any], Any, tuple[str, ...]]] = [
    (AUDIT_DOCUMENT, _audit, ("files_scanned",)),
    (DIFF_DOCUMENT, _diff, ("graphs_change",)),
    (BUCKETS_DOCUMENT, lambda: propose_buckets([5, 9, 17, 33, 40, 64, 64, 100], 3), ("k",)),
    (DECODE_BUCKETS_DOCUMENT, lambda: propose_decode_buckets(([100, 700, 1500], [300, 50, 200]), 4), ("k",)),
    (
        SERVING_PLAN_DOCUMENT,
        lambda: propose_serving_plan(
            ([300, 100, 50, 700], [3, 2, 4, 5], [0.0, 0.0, 0.5, 1.0]), max_num_batched_tokens=1024, max_num_seqs=8, max_model_len=4096
        ),
        ("requests",),
    ),
    (SUMMARY_DOCUMENT, _summary, ("models", 0, "name")),
    (SHARD_MANIFEST_DOCUMENT, _manifest, ("history",)),
]
IDS = [c[0].name for c in CASES]


def _set(data: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    node: Any = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value


@pytest.mark.parametrize(("schema", "make", "int_path"), CASES, ids=IDS)
def test_written_then_loaded_is_equal_with_the_version_first(tmp_path: Path, schema: DocumentSchema[Any], make: Any, int_path: tuple[Any, ...]) -> None:
    value = make()
    path = tmp_path / "doc.json"
    path.write_text(schema.dumps(value))
    data = json.loads(path.read_text())
    assert next(iter(data)) == "schema_version" and data["schema_version"] == schema.version == 1
    loaded = schema.load(path)
    assert loaded == value
    assert schema.dumps(loaded) == path.read_text()  # byte for byte: nothing lost or reordered


@pytest.mark.parametrize(("schema", "make", "int_path"), CASES, ids=IDS)
def test_a_file_written_before_the_version_loads_as_schema_1(tmp_path: Path, schema: DocumentSchema[Any], make: Any, int_path: tuple[Any, ...]) -> None:
    value = make()
    path = tmp_path / "old.json"
    path.write_text(json.dumps(dataclasses.asdict(value), indent=2))  # what neuronprobe wrote before: a bare asdict
    assert schema.load(path) == value


@pytest.mark.parametrize(("schema", "make", "int_path"), CASES, ids=IDS)
def test_a_newer_file_an_unknown_field_and_a_wrong_type_are_one_sentence(
    tmp_path: Path, schema: DocumentSchema[Any], make: Any, int_path: tuple[Any, ...]
) -> None:
    data = schema.to_dict(make())
    path = tmp_path / "doc.json"

    def refused(doc: dict[str, Any]) -> str:
        path.write_text(json.dumps(doc))
        with pytest.raises(ReportFormatError) as info:
            schema.load(path)
        message = str(info.value)
        assert message.startswith(f"{path}: ") and "\n" not in message
        return message[len(f"{path}: ") :]

    newer = {**data, "schema_version": 2}
    assert refused(newer) == (f"written by a newer neuronprobe ({schema.name} schema_version 2; this neuronprobe reads 1 to 1); upgrade neuronprobe to read it")
    assert refused({**data, "colour": "red"}) == f"{schema.where}.colour: unknown field (not in this neuronprobe's schema)"
    wrong = json.loads(json.dumps(data))
    _set(wrong, int_path, {"not": "scalar"})
    where = schema.where + "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in int_path)
    assert refused(wrong).startswith(f"{where}: expected ")
    assert (
        refused({"schema_version": 1})
        == f"not {'an' if schema.name[0] in 'aeio' else 'a'} {schema.name} (no '{schema.marker}' field); write one with {schema.hint}"
    )
    assert refused({**data, "schema_version": "1"}) == f'schema_version "1" is no {schema.name} schema version (a whole number from 1)'


def test_an_old_shard_manifest_with_its_format_key_loads(tmp_path: Path) -> None:
    data = {"format": 1, **dataclasses.asdict(_manifest())}  # written before schema_version: ``format`` was the version
    path = tmp_path / "_shard.json"
    path.write_text(json.dumps(data))
    assert SHARD_MANIFEST_DOCUMENT.load(path) == _manifest()
    path.write_text(json.dumps({**data, "format": 2}))
    with pytest.raises(ReportFormatError, match=r"shard manifest schema_version 2; this neuronprobe reads 1 to 1"):
        SHARD_MANIFEST_DOCUMENT.load(path)


def test_load_diff_reads_what_diff_json_writes(tmp_path: Path) -> None:
    base, new = tmp_path / "base.json", tmp_path / "new.json"
    base.write_text(make_report([]).to_json())
    new.write_text(make_report([finding()]).to_json())
    out = tmp_path / "diff.json"
    result = runner.invoke(app, ["diff", str(base), str(new), "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["schema_version"] == 1
    loaded = load_diff(out)
    assert loaded.has_regression and loaded.new_findings[0].op == "aten::_unique2"


def test_buckets_json_writes_the_versioned_proposal(tmp_path: Path) -> None:
    lengths = tmp_path / "lengths.txt"
    lengths.write_text("\n".join(str(n) for n in [5, 9, 17, 33, 40, 64, 64, 100]) + "\n")
    out = tmp_path / "b.json"
    result = runner.invoke(app, ["buckets", str(lengths), "--max-buckets", "3", "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_text() == buckets_json(BUCKETS_DOCUMENT.load(out))
    assert json.loads(out.read_text())["schema_version"] == 1


def test_an_audit_json_from_a_newer_neuronprobe_as_baseline_exits_2_in_one_sentence(tmp_path: Path) -> None:
    base = tmp_path / "base.json"
    base.write_text(json.dumps({**AUDIT_DOCUMENT.to_dict(_audit()), "schema_version": 9}))
    result = runner.invoke(app, ["audit", str(TESTS / "data" / "audit_repo"), "--baseline", str(base), "-j", "1"])
    assert result.exit_code == 2
    assert result.output.strip() == (
        f"error: --baseline {base}: written by a newer neuronprobe (audit JSON schema_version 9; this neuronprobe reads 1 to 1); upgrade neuronprobe to read it"
    )
