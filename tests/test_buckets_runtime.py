"""Runtime helpers, cost models, baselines and config snippets."""

from __future__ import annotations

import ast
import json

import numpy as np
import pytest
import torch

from neuronprobe.errors import InputError
from neuronprobe.shape_buckets import BeyondLastBucket, bucket_for, fit_step_times, pad_to_bucket, parse_cost
from neuronprobe.shape_buckets.baselines import nxdi_ladder, quantiles, uniform, vllm_doubling
from neuronprobe.shape_buckets.configs import render_configs
from neuronprobe.shape_buckets.costs import ATTENTION, TOKENS, score

EDGES = [128, 256, 512]


@pytest.mark.parametrize(
    ("length", "inclusive", "strict"),
    [(1, 128, 128), (127, 128, 128), (128, 128, 256), (129, 256, 256), (256, 256, 512), (511, 512, 512), (512, 512, 512)],
)
def test_bucket_for_inclusive_and_strict(length, inclusive, strict):
    assert bucket_for(length, EDGES) == inclusive
    assert bucket_for(length, EDGES, fit="strict") == strict


def test_bucket_for_never_truncates_a_length_beyond_the_last_bucket():
    with pytest.raises(BeyondLastBucket, match="length 513 is beyond the last bucket 512"):
        bucket_for(513, EDGES)
    with pytest.raises(InputError, match="sorted and unique"):
        bucket_for(5, [256, 128])
    with pytest.raises(InputError, match="fit 'nearest'"):
        bucket_for(5, EDGES, fit="nearest")


def test_pad_to_bucket_pads_a_torch_tensor_on_the_right_along_dim():
    ids = torch.ones(2, 130, dtype=torch.long)
    padded = pad_to_bucket(ids, EDGES, value=0)
    assert padded.shape == (2, 256)
    assert padded[:, :130].eq(1).all() and padded[:, 130:].eq(0).all()
    hidden = torch.ones(2, 100, 8)
    assert pad_to_bucket(hidden, EDGES, dim=1).shape == (2, 128, 8)
    exact = torch.ones(1, 128)
    assert pad_to_bucket(exact, EDGES) is exact
    assert pad_to_bucket(exact, EDGES, fit="strict").shape == (1, 256)


def test_pad_to_bucket_numpy_and_overflow():
    arr = np.ones((3, 5))
    out = pad_to_bucket(arr, [8, 16], dim=1, value=-1)
    assert out.shape == (3, 8) and (out[:, 5:] == -1).all()
    with pytest.raises(BeyondLastBucket):
        pad_to_bucket(np.ones(20), [8, 16])


def test_cost_models_parse_and_fit():
    assert parse_cost("tokens") is TOKENS and parse_cost("attention") is ATTENTION
    measured = parse_cost("1.5,0.25")
    assert (measured.name, measured.a, measured.b) == ("measured", 1.5, 0.25)
    for bad in ("0,0", "1", "a,b", "inf,1"):
        with pytest.raises(InputError):
            parse_cost(bad)
    # A step time that only grows quadratically: the fit keeps A at zero rather than negative.
    x = np.array([100, 200, 400, 800])
    fit = fit_step_times(x, 1e-6 * x**2)
    assert fit.model.a >= 0 and fit.model.b == pytest.approx(1e-6, rel=1e-3)
    with pytest.raises(InputError, match="does not grow"):
        fit_step_times(x, 5.0 - 1e-3 * x)


def test_score_counts_tokens_attention_and_beyond_last():
    values, counts = np.array([1, 3, 10]), np.array([2, 1, 1])
    s = score(values, counts, [2, 4], "inclusive", TOKENS)
    # 1->2 twice, 3->4 once; 10 is beyond the last bucket and left out
    assert s.beyond_last == 1
    assert s.tokens == pytest.approx(100 * (2 + 2 + 4 - 5) / 5)
    assert s.attention == pytest.approx(100 * (4 + 4 + 16 - 11) / 11)
    assert s.cost == 3


def test_nxd_inference_ladder_matches_generate_buckets():
    assert nxdi_ladder(640) == [128, 256, 640]
    assert nxdi_ladder(4096) == [128, 256, 512, 1024, 2048, 4096]
    assert nxdi_ladder(14050) == [128, 256, 512, 1024, 2048, 4096, 8192, 14050]
    assert nxdi_ladder(100) == [100]


def test_vllm_uniform_and_quantile_ladders():
    assert vllm_doubling(100) == [16, 32, 64, 128]
    assert uniform(1000, 4) == [250, 500, 750, 1000]
    assert uniform(1000, 3, multiple_of=128) == [384, 768, 1000]
    values, counts = np.array([1, 2, 3, 4]), np.array([1, 1, 1, 1])
    assert quantiles(values, counts, 2, 4) == [2, 4]
    assert quantiles(values, counts, 2, 4, fit="strict") == [3, 4]


def test_config_snippets_parse_and_warn_about_the_runtime_rule():
    configs = render_configs([300, 1200, 4096], "inclusive")
    nxdi = configs["nxd_inference"]
    assert "enable_bucketing=True" in nxdi and "token_generation_buckets=[300, 1200, 4096]" in nxdi
    assert "uses the strict rule at runtime" in nxdi
    assert "proposed with --fit inclusive, the rule transformers-neuronx uses" in configs["transformers_neuronx"]
    vllm = configs["vllm_neuron"]
    python_dict = vllm.split("additional_config=", 1)[1].split(")\n", 1)[0]
    assert ast.literal_eval(python_dict)["override_neuron_config"]["context_encoding_buckets"] == [300, 1200, 4096]
    cli_json = vllm.split("--additional-config '", 1)[1].split("'", 1)[0]
    assert json.loads(cli_json)["override_neuron_config"]["enable_bucketing"] is True
    assert "NEURON_CONTEXT_LENGTH_BUCKETS=300,1200,4096" in vllm
    assert configs["list"] == "300,1200,4096\n"
    assert "uses the strict rule" not in render_configs([5], "strict")["nxd_inference"].split("\n")[0]
