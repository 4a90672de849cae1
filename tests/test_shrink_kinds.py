"""A shrunken config keeps a layer of every kind the full config has (issue 33.4): MoE layers every n-th layer,
alternating local/global attention, cross-attention layers. Real transformers types, built offline from their
configs on the meta device; the report says what changed and never that op kinds hold when they do not."""

from __future__ import annotations

import pytest

from neuronprobe.loaders.hf import build_config, build_model
from neuronprobe.loaders.hf import config as hf_config
from neuronprobe.loaders.hf import shrink as hf_shrink
from neuronprobe.loaders.hf.load import load
from neuronprobe.loaders.hf.shrink import layer_kind, module_classes, shrink_keeping_kinds
from neuronprobe.loaders.resolve import hf_build_scope


@pytest.fixture(autouse=True)
def _offline():
    with hf_build_scope():
        yield


def _built(config):
    return build_model(config, "meta").inner


def test_nllb_moe_keeps_its_every_fourth_moe_layer():
    # NllbMoe: a layer is sparse where (i + 1) % encoder_sparse_step == 0, with the step 4 in the default config:
    # two layers hold no router at all; four hold three dense layers and one MoE layer.
    config = build_config("nllb-moe", [])
    assert (config.encoder_layers, config.encoder_sparse_step, config.decoder_sparse_step) == (12, 4, 4)
    shrunk = shrink_keeping_kinds(config)
    assert (shrunk.config.encoder_layers, shrunk.config.decoder_layers) == (4, 4)
    classes = module_classes(_built(shrunk.config))
    assert {"NllbMoeSparseMLP", "NllbMoeTop2Router", "NllbMoeDenseActDense"} <= classes
    assert shrunk.full_classes <= classes
    sparse = [layer.is_sparse for layer in _built(shrunk.config).model.encoder.layers]
    assert sparse == [False, False, False, True]


def test_nllb_moe_loaded_shrunken_says_what_changed_and_that_every_kind_is_kept():
    loaded = load("nllb-moe", [], seq_len=8, batch=1, device="meta", shrink=True)
    note = next(n for n in loaded.notes if n.startswith("shrunken config"))
    assert "encoder_layers 12->4" in note and "decoder_layers 12->4" in note and "num_experts 128->4" in note
    assert "every layer kind of the full model is kept" in note and "NllbMoeSparseMLP" in note
    assert loaded.kinds_lost == ()


def test_a_qwen_moe_with_a_sparse_step_keeps_a_dense_and_a_sparse_layer():
    # Qwen2Moe: sparse where (i + 1) % decoder_sparse_step == 0 (transformers/models/qwen2_moe/modeling_qwen2_moe.py).
    config = build_config("qwen2_moe", ["decoder_sparse_step=3"])
    shrunk = shrink_keeping_kinds(config)
    assert shrunk.config.num_hidden_layers == 3
    mlps = [type(layer.mlp).__name__ for layer in _built(shrunk.config).model.layers]
    assert mlps == ["Qwen2MoeMLP", "Qwen2MoeMLP", "Qwen2MoeSparseMoeBlock"]


def test_a_qwen_moe_with_dense_only_layers_keeps_both_kinds():
    config = build_config("qwen3_moe", ["mlp_only_layers=[0, 1, 2]"])
    shrunk = shrink_keeping_kinds(config)
    assert shrunk.config.num_hidden_layers == 4
    mlps = {type(layer.mlp).__name__ for layer in _built(shrunk.config).model.layers}
    assert mlps == {"Qwen3MoeMLP", "Qwen3MoeSparseMoeBlock"}


def test_gemma3_keeps_a_global_attention_layer_among_the_sliding_ones():
    # Gemma3: five sliding-window layers, then one global (sliding_window_pattern 6, layer_types); one class for
    # both, told apart by the attention's is_sliding flag.
    config = build_config("gemma3_text", [])
    shrunk = shrink_keeping_kinds(config)
    assert shrunk.config.num_hidden_layers == 6
    sliding = [layer.self_attn.is_sliding for layer in _built(shrunk.config).model.layers]
    assert True in sliding and False in sliding
    assert any("is_sliding" in k for k in shrunk.kinds)


def test_mllama_keeps_its_first_cross_attention_layer():
    # MllamaTextModel: a cross-attention decoder layer at each index of cross_attention_layers ([3, 8, ...]).
    config = build_config("mllama", [])
    shrunk = shrink_keeping_kinds(config)
    assert shrunk.config.text_config.num_hidden_layers == 4
    assert "MllamaCrossAttentionDecoderLayer" in module_classes(_built(shrunk.config))


def test_a_layer_kind_no_known_field_names_is_found_on_the_built_modules(monkeypatch):
    # As if neuronprobe knew no kind field at all: the full-depth build's layer kinds deepen the shrunken config.
    monkeypatch.setattr(hf_config, "kind_depth", lambda config, layers, floor=hf_config.SHRUNK_LAYERS: min(floor, layers))
    config = build_config("nllb-moe", [])
    assert hf_config.shrink_config(config)[0].encoder_layers == 2  # the config alone: no MoE layer left
    shrunk = shrink_keeping_kinds(config)
    assert (shrunk.config.encoder_layers, shrunk.config.decoder_layers) == (4, 4)
    assert "NllbMoeSparseMLP" in module_classes(_built(shrunk.config))


def test_a_kind_the_shrunken_build_still_lacks_is_named_and_op_kinds_are_not_claimed(monkeypatch):
    monkeypatch.setattr(hf_config, "kind_depth", lambda config, layers, floor=hf_config.SHRUNK_LAYERS: min(floor, layers))
    monkeypatch.setattr(hf_shrink, "MAX_DEEPENINGS", 0)  # no deepening: the shrunken build keeps two dense layers
    loaded = load("nllb-moe", [], seq_len=8, batch=1, device="meta", shrink=True)
    note = next(n for n in loaded.notes if n.startswith("shrunken config"))
    assert "NllbMoeSparseMLP" in note and "not in the shrunken build, so their ops are not analysed" in note
    assert "op kinds and lines do not" not in note
    assert "NllbMoeSparseMLP" in loaded.kinds_lost and "NllbMoeTop2Router" in loaded.kinds_lost


def test_kinds_ignore_widths_and_expert_counts():
    # 128 experts and 4 are one kind; a narrowed layer is the same kind as a wide one.
    full = _built(build_config("nllb-moe", []))
    small = _built(shrink_keeping_kinds(build_config("nllb-moe", [])).config)
    assert layer_kind(full.model.encoder.layers[3]) == layer_kind(small.model.encoder.layers[3])
    assert layer_kind(full.model.encoder.layers[0]) != layer_kind(full.model.encoder.layers[3])


def test_a_dense_model_keeps_two_layers():
    shrunk = shrink_keeping_kinds(build_config("llama", []))
    assert shrunk.config.num_hidden_layers == 2 and shrunk.kinds == () and shrunk.missing_kinds == ()


def test_the_shrunken_copy_auto_observes_carries_what_it_lacks():
    from neuronprobe.backends import xla_auto
    from neuronprobe.loaders.model import LoadedModel

    loaded = LoadedModel(name="hf_x", source="hf:x", module=None, on_meta=False, kinds_lost=("NllbMoeSparseMLP",))
    choice = xla_auto.choose(loaded, [], max_memory=1 << 40, train=False)
    assert choice.shrink and choice.kinds_lost == ("NllbMoeSparseMLP",)
