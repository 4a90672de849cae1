"""Recompile prediction without compiling: traffic reading and graphs per policy.

Ground truth is counted by hand from the traffic; no torch compile runs here.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronprobe.errors import InputError
from neuronprobe.recompiles.predict import DEFAULT_COMPILE_SECONDS, first_seen, predict
from neuronprobe.recompiles.traffic import Const, Traffic, intern, read_shapes, traffic_from_lengths

DATA = Path(__file__).parent / "data"


def named_traffic(shapes: list[dict[str, list[int]]]) -> Traffic:
    sigs, ids = intern(tuple((k, tuple(v)) for k, v in sorted(s.items())) for s in shapes)
    return Traffic(sigs, ids, "test", list(range(1, len(sigs) + 1)))


def ids_traffic(lengths: list[int], batch: int = 1) -> Traffic:
    return named_traffic([{"input_ids": [batch, n]} for n in lengths])


# --- reading --shapes ------------------------------------------------------------------------


def test_shapes_file_is_read_into_distinct_signatures_in_first_seen_order() -> None:
    traffic = read_shapes(DATA / "recompile_static_shapes.jsonl")
    assert traffic.calls == 8
    assert traffic.signatures == [
        (("input_ids", (1, 8)),),
        (("input_ids", (1, 16)),),
        (("input_ids", (4, 32)),),
        (("input_ids", (1, 100)),),
        (("input_ids", (4, 8)),),
    ]
    assert traffic.ids.tolist() == [0, 1, 0, 2, 1, 3, 4, 0]
    assert traffic.first_line == [1, 2, 4, 6, 7]


def test_positional_lines_are_lists_of_shapes() -> None:
    traffic = read_shapes(DATA / "recompile_loop_shapes.jsonl")
    assert traffic.signatures[0] == ((0, (1, 3, 8)),)
    assert traffic.ids.tolist() == [0, 1, 2, 1]


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"input_ids": [1, 8]}', "{not json"], "line 2: not valid JSON"),
        (['{"input_ids": [1, 8]}', '{"input_ids": [1, "16"]}'], "line 2: input 'input_ids' is"),
        (['{"input_ids": [1, -8]}'], "line 1: input 'input_ids' has a negative size"),
        (['{"input_ids": [true, 8]}'], "line 1: input 'input_ids' is"),
        (["[1, 384]"], "line 1: [1, 384] is a list of numbers"),
        (["{}"], "line 1: an empty object"),
        (["42"], "line 1: 42 is not a call"),
        (['{"input_ids": [1, 8]}', "", "[[1, 8]]"], "line 3: positional inputs, but line 1 gives named inputs"),
    ],
)
def test_a_bad_shapes_line_is_one_sentence_naming_file_and_line(tmp_path: Path, lines: list[str], message: str) -> None:
    path = tmp_path / "traffic.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as err:
        read_shapes(path)
    assert str(err.value).startswith(f"{path} line ")
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_the_bad_fixture_names_its_line() -> None:
    with pytest.raises(InputError, match=r"recompile_bad_shapes\.jsonl line 3: input 'input_ids' is not a shape"):
        read_shapes(DATA / "recompile_bad_shapes.jsonl")


@pytest.mark.parametrize("name", ["missing.jsonl", "empty.jsonl", "folder"])
def test_missing_empty_or_folder_shapes_files_are_input_errors(tmp_path: Path, name: str) -> None:
    (tmp_path / "empty.jsonl").write_text("\n\n")
    (tmp_path / "folder").mkdir()
    with pytest.raises(InputError, match=str(tmp_path / name)):
        read_shapes(tmp_path / name)


# --- policies ------------------------------------------------------------------------------------


def test_static_is_one_graph_per_distinct_signature_with_first_seen_positions() -> None:
    p = predict(read_shapes(DATA / "recompile_static_shapes.jsonl"), buckets=[16, 64, 128])
    static = p.policies["static"]
    assert static.graphs == 5
    assert static.first_seen == [0, 1, 3, 5, 6]
    assert static.compile_seconds == 5 * DEFAULT_COMPILE_SECONDS


def test_dynamic_batch_frees_dim_0() -> None:
    # (1,8) and (4,8) share a graph once the batch is free: 4 graphs, not 5.
    p = predict(read_shapes(DATA / "recompile_static_shapes.jsonl"), buckets=[16, 64, 128])
    assert p.policies["dynamic_batch"].graphs == 4
    assert p.policies["dynamic_batch"].first_seen == [0, 1, 3, 5]


def test_bucketed_is_the_number_of_buckets_used() -> None:
    # lengths 8, 16, 8, 32, 16, 100, 8 -> buckets 16, 16, 16, 64, 16, 128, 16: three buckets used
    traffic = ids_traffic([8, 16, 8, 32, 16, 100, 8])
    p = predict(traffic, buckets=[16, 64, 128, 256], seconds_per_graph=90.0)
    assert p.policies["static"].graphs == 4
    assert p.policies["bucketed"].graphs == 3
    assert p.policies["bucketed"].first_seen == [0, 3, 5]
    assert p.policies["bucketed"].compile_seconds == 3 * 90.0
    assert p.edges == [16, 64, 128, 256]
    assert "given with --buckets" in p.policies["bucketed"].note


def test_lengths_beyond_the_last_bucket_are_counted_and_not_given_a_graph() -> None:
    traffic = ids_traffic([8, 100, 16, 300, 300])
    p = predict(traffic, buckets=[16, 64])
    bucketed = p.policies["bucketed"]
    assert bucketed.graphs == 1  # only bucket 16 can serve anything
    assert bucketed.beyond_last == 3
    assert "3 call(s) are longer than the last edge 64 (up to 300)" in bucketed.note


def test_without_buckets_they_are_proposed_for_the_traffic_and_returned() -> None:
    lengths = [10] * 50 + [100] * 30 + [1000] * 20 + [37, 512]
    p = predict(ids_traffic(lengths), max_buckets=3)
    assert p.proposal is not None
    assert p.proposal.k == 3 and p.proposal.n_lengths == len(lengths)
    assert p.edges == p.proposal.edges
    assert p.policies["bucketed"].graphs == 3
    assert "proposed for this traffic" in p.policies["bucketed"].note


def test_a_traffic_whose_sequence_dim_never_changes_has_nothing_to_bucket() -> None:
    p = predict(named_traffic([{"x": [1, 16]}, {"x": [4, 16]}, {"x": [8, 16]}]))
    assert p.proposal is None and p.edges == []
    assert p.policies["bucketed"].graphs == p.policies["static"].graphs == 3
    assert p.policies["dynamic_batch"].graphs == 1
    assert "nothing to pad" in p.policies["bucketed"].note


def test_two_sequence_inputs_of_one_call_count_one_length_each_distinct_value() -> None:
    traffic = named_traffic([{"input_ids": [1, n], "attention_mask": [1, n]} for n in (8, 20, 8, 50)])
    p = predict(traffic, max_buckets=2)
    assert p.proposal is not None and p.proposal.n_lengths == 4
    assert sorted(p.proposal.edges) == p.proposal.edges and p.proposal.edges[-1] == 50


def test_lengths_traffic_buckets_through_make_inputs() -> None:
    # make_inputs ignores the length (an MLP): every (b, L) of one batch size is one signature.
    def signature_for(b: int, n: int) -> tuple:
        return ((0, (b, 16)),)

    traffic = traffic_from_lengths(np.array([5, 30, 100, 7]), [1, 4], signature_for, "lengths.txt")
    assert traffic.calls == 8
    p = predict(traffic, buckets=[32, 128])
    assert p.policies["static"].graphs == 2
    assert p.policies["bucketed"].graphs == 2
    assert p.policies["dynamic_batch"].graphs == 1


def test_lengths_traffic_orders_calls_request_by_request_across_batch_sizes() -> None:
    def signature_for(b: int, n: int) -> tuple:
        return (("input_ids", (b, n)),)

    traffic = traffic_from_lengths(np.array([30, 5, 30]), [1, 4], signature_for, "lengths.txt")
    # calls: (1,30) (4,30) (1,5) (4,5) (1,30) (4,30)
    assert traffic.ids.tolist() == [0, 1, 2, 3, 0, 1]
    assert traffic.pairs == [(1, 30), (4, 30), (1, 5), (4, 5)]
    p = predict(traffic, buckets=[8, 32])
    assert p.policies["bucketed"].graphs == 4
    assert p.policies["bucketed"].first_seen == [0, 1, 2, 3]


def test_scalar_inputs_are_part_of_the_signature() -> None:
    sigs, ids = intern([((0, (1, 8)), (1, Const(True))), ((0, (1, 8)), (1, Const(False))), ((0, (1, 8)), (1, Const(True)))])
    p = predict(Traffic(sigs, ids, "samples"))
    assert p.policies["static"].graphs == 2
    assert p.causes[0].reason.startswith("scalar input 'arg1' changes value")


# --- causes from the traffic ----------------------------------------------------------------------


def test_shape_causes_count_the_recompiles_each_dim_triggers() -> None:
    traffic = read_shapes(DATA / "recompile_static_shapes.jsonl")
    p = predict(traffic, buckets=[16, 64, 128], where=("model.py", 15, "def forward(self, input_ids):"))
    by_dim = {c.dim: c for c in p.causes}
    # distinct signatures after the first (1,8): (1,16) (4,32) (1,100) (4,8)
    assert by_dim[1].count == 3 and by_dim[0].count == 2
    assert by_dim[1].reason == "tensor 'input_ids' size mismatch at index 1 (sequence length: 4 distinct sizes, 8..100)"
    assert by_dim[0].reason == "tensor 'input_ids' size mismatch at index 0 (batch size: 2 distinct sizes, 1..4)"
    assert all(c.file == "model.py" and c.line == 15 and not c.graph_changes_with_shape for c in p.causes)
    assert "pad to buckets 16, 64, 128" in by_dim[1].fix


def test_one_signature_has_no_recompiles() -> None:
    p = predict(ids_traffic([8, 8, 8]))
    assert p.policies["static"].graphs == 1 and p.causes == []


# --- properties ----------------------------------------------------------------------------------

shapes_strategy = st.lists(st.tuples(st.sampled_from([1, 2, 4, 8]), st.integers(min_value=1, max_value=600)), min_size=1, max_size=200)


@settings(max_examples=60, deadline=None)
@given(calls=shapes_strategy)
def test_policy_counts_match_a_brute_force_count(calls: list[tuple[int, int]]) -> None:
    edges = [64, 128, 256, 512]
    traffic = named_traffic([{"input_ids": [b, n]} for b, n in calls])
    p = predict(traffic, buckets=edges)

    def bucket(n: int) -> int | None:
        return next((e for e in edges if e >= n), None)

    assert p.policies["static"].graphs == len(set(calls))
    assert p.policies["dynamic_batch"].graphs == len({n for _, n in calls})
    if len({n for _, n in calls}) > 1:
        served = {(b, bucket(n)) for b, n in calls if bucket(n) is not None}
        assert p.policies["bucketed"].graphs == len(served)
        assert p.policies["bucketed"].beyond_last == sum(1 for _, n in calls if bucket(n) is None)
    else:  # dim 1 never varies: it is not known to be a sequence dim, so nothing is padded
        assert p.policies["bucketed"].graphs == p.policies["static"].graphs
    for policy in p.policies.values():
        assert policy.first_seen == sorted(policy.first_seen)
        assert len(policy.first_seen) == policy.graphs
    assert p.policies["static"].first_seen[0] == 0
    first_positions = sorted({c: i for i, c in reversed(list(enumerate(calls)))}.values())
    assert p.policies["static"].first_seen == first_positions


def test_first_seen_skips_unservable_calls() -> None:
    assert first_seen(np.array([-1, 2, 2, 0, -1, 1, 0])) == [1, 3, 5]
