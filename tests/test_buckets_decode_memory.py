"""Memory fit per tensor-parallel degree (issue 24, point 4)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from neuronprobe.cli import app
from neuronprobe.shape_buckets.decode import propose_decode_buckets
from neuronprobe.shape_buckets.memory import GIB, ModelShape, kv_heads_per_rank, load_model_shape, memory_fit

runner = CliRunner()
WIDE = Path(__file__).parent / "models" / "decode_wide_lm.py"


@pytest.mark.parametrize(
    ("tp", "heads", "kv", "expected"),
    [
        (8, 32, 8, (1, "divided")),  # TP divides the KV heads
        (2, 32, 8, (4, "divided")),
        (16, 32, 8, (1, "replicated")),  # fewer KV heads than ranks, TP a multiple: one per rank
        (32, 64, 8, (1, "replicated")),
        (8, 40, 12, (5, "padded")),  # neither divides: converted to MHA, padded heads / TP
        (24, 32, 8, (1, "replicated")),  # inf2 TP 24 is a multiple of 8 KV heads
        (24, 64, 16, (3, "padded")),  # 16 KV heads at TP 24: MHA with 72 padded heads / 24
        (8, 32, 32, (4, "divided")),  # MHA
    ],
)
def test_kv_heads_per_rank_in_every_sharding_case(tp, heads, kv, expected):
    assert kv_heads_per_rank(tp, heads, kv) == expected


def test_a_model_that_fits_at_tp8_but_not_tp2():
    shape = load_model_shape(str(WIDE))
    assert shape.parameters == 30_000_000_000 and shape.kv_heads == 8 and shape.head_dim == 128
    fit = memory_fit(shape, "trn1", bucket=4096, batch=4)
    rows = {r.tp_degree: r for r in fit.rows}
    assert list(rows) == [1, 2, 8, 16, 32]
    assert not rows[2].fits and rows[8].fits and fit.smallest_tp == 8
    assert rows[2].weights_bytes > 16 * GIB  # the weights alone overflow a 16 GiB core at TP 2
    # K and V, 48 layers, one KV head of 128 per rank at TP 8, bf16, for 4096 tokens x batch 4
    assert rows[8].kv_bytes == 2 * 48 * 1 * 128 * 2 * 4096 * 4
    assert rows[8].total_bytes == rows[8].weights_bytes + rows[8].kv_bytes + rows[8].reserve_bytes
    free = rows[8].hbm_bytes - rows[8].weights_bytes - rows[8].reserve_bytes
    assert rows[8].longest_bucket == free // (2 * 48 * 128 * 2 * 4) and rows[8].largest_batch == free // (2 * 48 * 128 * 2 * 4096)
    assert rows[2].longest_bucket is None and rows[2].largest_batch is None


def test_the_reserve_can_be_given():
    shape = ModelShape("m", 1_000_000, 2, 4, 4, 8, 32)
    fit = memory_fit(shape, "trn2", bucket=128, batch=2, reserve_bytes=0)
    assert fit.reserve_source == "--reserve-gib" and all(r.reserve_bytes == 0 for r in fit.rows)
    assert fit.rows[0].total_bytes == fit.rows[0].weights_bytes + fit.rows[0].kv_bytes
    assert fit.rows[0].hbm_bytes == 24 * GIB and [r.tp_degree for r in fit.rows] == [1, 2, 4, 8, 16, 32, 64]


def test_a_model_that_fits_nowhere_says_so_with_numbers():
    shape = ModelShape("huge", 2_000_000_000_000, 120, 128, 8, 128, 16384)
    fit = memory_fit(shape, "inf2", bucket=8192, batch=1)
    assert fit.smallest_tp is None and not any(r.fits for r in fit.rows)
    assert fit.notes and "fits at no TP degree inf2 allows" in fit.notes[0] and "GiB" in fit.notes[0]


def test_cli_memory_table_and_tp_in_the_config(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("ContextTokens,GeneratedTokens\n" + "".join(f"{100 + i},{20 + i}\n" for i in range(30)), encoding="utf-8")
    result = runner.invoke(app, ["buckets", str(trace), "--decode", "--model", str(WIDE), "--target", "trn1", "-k", "2"])
    assert result.exit_code == 0, result.output
    assert "smallest TP that fits: 8" in result.output and '"tp_degree": 8' in result.output
    p = propose_decode_buckets(([100, 200], [30, 40]), 2, model=str(WIDE), target="trn2")
    assert p.memory.smallest_tp == 4 and p.step_overhead is not None  # 24 GiB per core on trn2
    bad = runner.invoke(app, ["buckets", str(trace), "--decode", "--model", str(WIDE), "--target", "trn9"])
    assert bad.exit_code == 2 and "trn9" in bad.output
