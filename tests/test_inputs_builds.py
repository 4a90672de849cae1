"""Default configs transformers cannot build as they are (neuronprobe/loaders/hf/ ``complete_for_build``,
``_build_base``, ``built_by_parent``) and the family recipes that then feed them (hf_families.py, OTHER).

Unit tests run each fill on the error a real zoo type raised, on that type's default config (no model built);
the end-to-end tests take zoo types that did not build before through the analysis and check the report says
what the build was given.
"""

from __future__ import annotations

import pytest

from neuronprobe.analysis import AnalyzeOptions, analyze_spec
from neuronprobe.loaders import hf
from neuronprobe.loaders.hf import build as hf_build
from neuronprobe.loaders.hf import config as hf_config
from neuronprobe.vocabulary import CaptureStrategy


def test_enclosing_config_gives_a_nested_config_its_field():
    config = hf.build_config("dbrx", [])
    error = AttributeError("'DbrxAttentionConfig' object has no attribute 'rope_theta'")
    assert hf_config.fill_from_enclosing(config, error) == ["DbrxAttentionConfig.rope_theta=10000.0 (as its enclosing DbrxConfig holds it)"]
    assert config.attn_config.rope_theta == 10000.0


def test_unset_or_undeclared_kv_heads_follow_the_attention_heads():
    nemotron = hf.build_config("nemotron", [])
    assert hf_config.complete_for_build(nemotron, TypeError("unsupported operand type(s) for //: 'int' and 'NoneType'"))
    assert nemotron.num_key_value_heads == nemotron.num_attention_heads
    moonshine = hf.build_config("moonshine_streaming", [])
    error = AttributeError("'MoonshineStreamingConfig' object has no attribute 'num_key_value_heads'")
    assert hf_config.complete_for_build(moonshine, error)
    assert moonshine.num_key_value_heads == moonshine.num_attention_heads
    # another missing field is not this fill's
    assert hf_config._derived_defaults(hf.build_config("nemotron", []), AttributeError("'NemotronConfig' object has no attribute 'x'")) == []


def test_forecast_horizon_and_context():
    config = hf.build_config("time_series_transformer", [])
    changes = hf_config.complete_for_build(config, ValueError("The `prediction_length` config needs to be specified."))
    assert config.prediction_length == 24 and config.context_length == 24
    assert changes[0] == "prediction_length=24"
    # a config that sets it keeps its own
    mine = hf.build_config("informer", ["prediction_length=12"])
    assert hf_config.fill_forecast_horizon(mine, ValueError("The `prediction_length` config needs to be specified.")) == []


def test_tuples_become_lists_only_for_the_concatenation_error():
    config = hf.build_config("vitmatte", [])
    assert hf_config.lists_for_tuples(config, TypeError("unrelated")) == []
    assert hf_config.lists_for_tuples(config, TypeError('can only concatenate list (not "tuple") to list'))
    assert isinstance(config.fusion_hidden_sizes, list)


def test_rope_per_layer_type_where_the_config_declares_none():
    config = hf.build_config("cohere_compass_text", [])
    assert hf_config.rope_per_layer_type(config, KeyError("sliding_attention")) == []  # not one of its layer types
    assert hf_config.rope_per_layer_type(config, KeyError("full_attention"))
    assert config.rope_parameters == {"full_attention": {"rope_type": "default", "rope_theta": 10000.0}}


def test_docstring_example_size_and_timm_name():
    esm = hf.build_config("esm", [])
    error = TypeError("empty(): argument 'size' (position 1) must be tuple of ints, but found element of type NoneType at pos 0")
    assert hf_config.docstring_example_values(esm, error) == ["EsmConfig.vocab_size=33 (its docstring's example)"]
    timm = hf.build_config("timm_backbone", [])
    assert hf_config.timm_model_name(timm, ValueError("backbone is not set in the config. Please set it to a timm model name.")) == [
        "backbone='resnet50' (transformers' TimmWrapperConfig default)"
    ]


@pytest.mark.parametrize(
    ("spec", "overrides", "strategy", "said"),
    [
        ("hf:autoformer", ["encoder_layers=1", "decoder_layers=1"], CaptureStrategy.META, "prediction_length=24"),
        ("hf:nemotron", ["num_hidden_layers=1"], CaptureStrategy.META, "num_key_value_heads=48"),
        ("hf:musicgen", ["decoder.num_hidden_layers=1", "text_encoder.num_layers=1"], CaptureStrategy.META, None),
        ("hf:voxtral_realtime_text", ["num_hidden_layers=1"], CaptureStrategy.META, None),
        ("hf:funnel", [], CaptureStrategy.META, "architectures=[]"),
        ("hf:timm_backbone", [], CaptureStrategy.META, "resnet50"),
        ("hf:vibevoice_diffusion", [], CaptureStrategy.META, "as hf:vibevoice builds it"),
        # a parent type without modeling modules of its own builds another type's classes (the zoo lost it)
        ("hf:pp_chart2table_vision", ["num_hidden_layers=1"], CaptureStrategy.META, "GotOcr2VisionEncoder was built as hf:pp_chart2table builds it"),
    ],
)
def test_types_that_did_not_build_are_analysed(spec: str, overrides: list[str], strategy: CaptureStrategy, said: str | None):
    report = analyze_spec(spec, AnalyzeOptions(backend="static", overrides=overrides))
    assert report.capture.strategy is strategy, report.capture.strategy_reasons
    assert report.summary.ops_total > 40
    if said:
        assert any(said in lim.why for lim in report.not_analysed if lim.what == "model build"), [lim.why for lim in report.not_analysed]


def test_a_built_by_parent_component_is_its_parents_module():
    import torch
    import transformers

    config = hf.build_config("gemma4_unified_audio", [])
    verbosity = transformers.logging.get_verbosity()
    try:
        with torch.device("meta"):
            module = hf_build.built_by_parent(config)
    finally:
        transformers.logging.set_verbosity(verbosity)  # the build quiets transformers
    assert type(module).__name__ == "Gemma4UnifiedMultimodalEmbedder"
    assert module.embedding_projection.in_features == config.output_proj_dims


def test_moe_layer_kinds_follow_the_deepseek_dense_count():
    config = hf.build_config("deepseek_ocr2_text", ["num_hidden_layers=3"])
    assert hf_config.mlp_layer_types_from_dense_count(config, TypeError("unrelated")) == []
    assert hf_config.mlp_layer_types_from_dense_count(config, TypeError("'NoneType' object is not subscriptable"))
    assert config.mlp_layer_types == ["sparse", "sparse", "sparse"]  # first_k_dense_replace: DeepseekV2Config's 0
