"""propose_buckets as a user calls it: constraints, k choice, baselines, holdout, JSON, bad input."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from neuronprobe import propose_buckets as lazy_propose
from neuronprobe.errors import InputError
from neuronprobe.report.model import BucketProposal, Histogram, Report
from neuronprobe.shape_buckets import LengthData, fit_step_times, propose_buckets
from neuronprobe.shape_buckets.propose import HISTOGRAM_MAX_DISTINCT

# A conversation-like mix: a short body, a dense cluster just above 1024 and a long tail.
rng = np.random.default_rng(7)
TRAFFIC = np.concatenate([rng.integers(100, 600, 3000), rng.integers(1025, 1190, 2500), rng.integers(2000, 9000, 800)]).astype(int)


def test_the_public_export_gives_this_functions_proposal():
    """neuronprobe.propose_buckets reads the command's files too (tests/test_request_doors.py); given lengths, it is this function."""
    assert lazy_propose(TRAFFIC, 4, cost="attention") == propose_buckets(TRAFFIC, 4, cost="attention")


def test_any_iterable_of_lengths_is_accepted():
    import pandas as pd

    want = propose_buckets([3, 5, 8], 2).edges
    assert propose_buckets((n for n in (3, 5, 8)), 2).edges == want
    assert propose_buckets(pd.Series([3, 5, 8]), 2).edges == want
    assert propose_buckets(np.array([3.0, 5.0, 8.0]), max_buckets=2).edges == want


def test_the_optimum_beats_the_nxd_inference_ladder_at_the_same_number_of_graphs():
    p = propose_buckets(TRAFFIC, 8)
    assert TRAFFIC.max() == 8995
    assert isinstance(p, BucketProposal)
    assert p.k == 8 and len(p.edges) == 8 and p.edges[-1] == TRAFFIC.max()
    nxdi = next(b for b in p.baselines if b.name == "nxd-inference")
    # max 8995: round(log2(8995)) = 13, so powers of two stop at 4096
    assert nxdi.edges == [128, 256, 512, 1024, 2048, 4096, int(TRAFFIC.max())]
    assert nxdi.graphs == 7
    assert nxdi.optimal_at_same_k == p.curve[6].overhead
    assert nxdi.optimal_at_same_k.tokens < nxdi.overhead.tokens / 2
    # the 1025..1189 cluster gets its own edge instead of padding to 2048
    assert any(1180 <= e <= 1189 for e in p.edges)


def test_every_baseline_is_reported_with_edges_overheads_and_graphs():
    p = propose_buckets(TRAFFIC, 6)
    assert [b.name for b in p.baselines] == ["nxd-inference", "vllm-doubling", "single-max", "uniform", "quantiles"]
    by_name = {b.name: b for b in p.baselines}
    assert by_name["vllm-doubling"].edges[0] == 16 and by_name["vllm-doubling"].edges[-1] >= TRAFFIC.max()
    assert by_name["single-max"].edges == [TRAFFIC.max()]
    assert by_name["uniform"].graphs == 6 and by_name["quantiles"].graphs <= 6
    for b in p.baselines:
        assert b.graphs == len(b.edges)
        assert b.beyond_last == 0
        # with the tokens objective, no ladder with as many graphs pads fewer tokens than the optimum
        assert b.optimal_at_same_k.tokens <= b.overhead.tokens + 1e-9


def test_max_len_above_the_data_is_the_last_edge_and_below_it_counts_beyond_last():
    above = propose_buckets([10, 20, 30], 2, max_len=64)
    assert above.edges[-1] == 64 and above.beyond_last == 0
    below = propose_buckets([10, 20, 30, 40, 50], 2, max_len=32)
    assert below.edges[-1] == 32
    assert below.beyond_last == 2
    assert any("longer than the last bucket 32" in n for n in below.notes)


def test_multiple_of_rounds_every_edge_to_the_tile_and_the_default_max_up():
    p = propose_buckets(TRAFFIC, 8, multiple_of=128)
    assert all(e % 128 == 0 for e in p.edges)
    assert p.max_len == -(-TRAFFIC.max() // 128) * 128


def test_min_bucket_is_the_smallest_edge():
    p = propose_buckets([5, 6, 7, 300, 310], 3, min_bucket=128)
    assert p.edges[0] >= 128


def test_strict_fit_moves_edges_one_past_the_lengths():
    inclusive = propose_buckets([100, 100, 200], 2)
    strict = propose_buckets([100, 100, 200], 2, fit="strict")
    assert inclusive.edges == [100, 200]
    assert strict.edges == [101, 200]  # NxD Inference sends 100 to the next bucket if 100 is an edge
    assert strict.fit == "strict"


def test_k_larger_than_the_distinct_lengths_is_clamped_and_said_so():
    p = propose_buckets([3, 3, 5, 9], 10)
    assert p.k == 3 and p.max_buckets == 10
    assert p.overhead.tokens == 0
    assert any("--max-buckets 10 is more than the 3" in n for n in p.notes)


def test_compile_cost_picks_the_k_that_minimises_runtime_plus_compile():
    free = propose_buckets(TRAFFIC, 8, compile_seconds=0.0)
    assert free.k == 8 and free.chosen_by == "runtime+compile"
    costly = propose_buckets(TRAFFIC, 8, compile_seconds=6e5, compile_weight=1e6)  # within the ceilings (a week, 1e12)
    assert costly.k == 1
    # in between: the objective column is runtime + weight * seconds * k, and k is its argmin
    # one graph costs 2 * 5e5 = 1e6 tokens: worth it while a bucket saves more than that
    mid = propose_buckets(TRAFFIC, 8, compile_seconds=5e5, compile_weight=2.0)
    objectives = [c.objective for c in mid.curve]
    assert mid.k == 1 + objectives.index(min(objectives))
    runtime_k1 = sum(TRAFFIC.max() for _ in TRAFFIC)
    assert mid.curve[0].objective == pytest.approx(runtime_k1 + 2.0 * 5e5 * 1)
    savings = [a.cost - b.cost for a, b in zip(mid.curve, mid.curve[1:], strict=False)]
    assert mid.k == 1 + sum(1 for s in savings if s > 1e6) == 4


def test_measured_cost_from_step_times():
    lengths = np.array([128, 256, 512, 1024, 2048, 4096])
    seconds = 0.002 + 1e-5 * lengths + 2e-9 * lengths**2
    fitted = fit_step_times(lengths, seconds)
    assert fitted.model.a == pytest.approx(1e-5, rel=1e-6)
    assert fitted.model.b == pytest.approx(2e-9, rel=1e-6)
    p = propose_buckets(TRAFFIC, 4, cost=fitted)
    assert p.cost_model == "measured"
    assert p.cost_params["A"] == pytest.approx(1e-5, rel=1e-6)
    assert any("fitted from 6 step times" in n for n in p.notes)


def test_holdout_fits_on_the_earlier_part_in_time_order():
    # Early traffic is short, late traffic long; timestamps are given out of file order.
    lengths = np.array([50] * 10 + [500] * 10)
    stamps = np.concatenate([np.arange(10, 20), np.arange(0, 10)])  # the 500s came first in time
    data = LengthData(lengths, source="t.csv", column="len", timestamps=stamps, time_column="ts")
    p = propose_buckets(data, 2, holdout=0.5)
    assert p.holdout.order == "time order"
    assert p.holdout.fit_lengths == 10 and p.holdout.test_lengths == 10
    assert p.edges == [500]  # fitted on the 500s only
    assert p.holdout.beyond_last == 0
    assert p.holdout.overhead.tokens == pytest.approx(900.0)
    assert set(p.holdout.baselines) == {b.name for b in p.baselines}


def test_holdout_counts_held_out_lengths_beyond_the_fitted_max():
    p = propose_buckets([10, 20, 30, 40, 90, 95], 2, holdout=1 / 3)
    assert p.holdout.order.startswith("file order")
    assert p.max_len == 40
    assert p.holdout.beyond_last == 2


def test_json_has_the_documented_keys_and_round_trips_through_the_report():
    p = propose_buckets(TRAFFIC, 5, compile_seconds=10.0, holdout=0.25)
    data = json.loads(json.dumps(dataclasses.asdict(p)))
    for key in ("edges", "k", "cost_model", "overhead", "curve", "baselines", "beyond_last", "configs", "histogram"):
        assert key in data
    assert set(data["overhead"]) == {"tokens", "attention"}
    assert set(data["curve"][0]) >= {"k", "edges", "overhead"}
    assert set(data["baselines"][0]) >= {"name", "edges", "overhead", "graphs"}
    report = Report(model="m", target="trn1", buckets=p)
    again = Report.from_json(report.to_json())
    assert again.buckets == p


def test_histogram_is_compact_and_binned_when_there_are_many_distinct_lengths():
    small = propose_buckets([5, 5, 7], 2)
    assert small.histogram == Histogram(values=[5, 7], counts=[2, 1], bin_width=None)
    many = np.arange(1, HISTOGRAM_MAX_DISTINCT * 3)
    big = propose_buckets(many, 4)
    assert len(big.histogram.values) <= 1000
    assert sum(big.histogram.counts) == many.size
    assert big.histogram.bin_width == 6
    assert any("histogram binned" in n for n in big.notes)


def test_configs_are_ready_to_paste():
    p = propose_buckets([100, 200, 300], 3)
    assert p.configs["list"] == "100,200,300\n"
    assert "context_encoding_buckets=[100, 200, 300]" in p.configs["nxd_inference"]
    assert "n_positions=[100, 200, 300]" in p.configs["transformers_neuronx"]
    assert "override_neuron_config" in p.configs["vllm_neuron"]


@pytest.mark.parametrize(
    ("lengths", "kwargs", "message"),
    [
        ([], {}, "no lengths"),
        ([5, 0, 7], {}, "item 1: a length that is not positive"),
        ([5, -3], {}, "item 1: a length that is not positive"),
        ([5, float("nan")], {}, "NaN"),
        ([5, 2.5], {}, "item 1: not an integer length"),
        (["5", "x"], {}, "item 1: not an integer length"),
        ([5, 6], {"max_buckets": 0}, "--max-buckets 0"),
        ([5, 6], {"fit": "loose"}, "--fit 'loose'"),
        ([5, 6], {"cost": "cubic"}, "--cost 'cubic'"),
        ([5, 6], {"cost": "-1,0"}, "non-negative"),
        ([5, 6], {"max_len": 100, "multiple_of": 64}, "not a multiple of --multiple-of 64"),
        ([5, 6], {"max_len": 3}, "every length"),
        ([5, 6], {"holdout": 1.5}, "--holdout 1.5"),
        ([5], {"holdout": 0.5}, "cannot be split"),
        ([5, 6], {"max_len": 64, "min_bucket": 128}, "below --min-bucket"),
    ],
)
def test_bad_input_is_one_clear_input_error(lengths, kwargs, message):
    with pytest.raises(InputError) as info:
        propose_buckets(lengths, **{"max_buckets": 4, **kwargs})
    assert message in str(info.value)
    assert "\n" not in str(info.value)
