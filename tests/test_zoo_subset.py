"""A fast subset of the architecture zoo (scripts/zoo.py): real transformers types, one layer each.

The zoo itself is a benchmark (benchmarks/zoo.md); these three stand for its families in the
suite: a mixture-of-experts model, a vision-language model and an encoder-decoder. The
MoE routing of this transformers release sorts and histograms the expert ids (its
grouped-matmul path); `tests/test_capture_strategies.py` covers routing through `nonzero`.
"""

from __future__ import annotations

from pathlib import Path

from neuronprobe.analysis import AnalyzeOptions, analyze_spec
from neuronprobe.loaders.resolve import load_model
from neuronprobe.vocabulary import CaptureStrategy, Verdict


def _analyse(spec: str, overrides: list[str]):
    return analyze_spec(spec, AnalyzeOptions(backend="static", overrides=overrides))


def test_a_mixture_of_experts_model_has_its_routing_ops_found_in_its_modeling_file():
    report = _analyse("hf:mixtral", ["num_hidden_layers=1"])
    assert report.capture.strategy is CaptureStrategy.META
    found = {(f.op, f.verdict) for f in report.findings}
    assert ("aten::sort", Verdict.COMPILE_ERROR) in found
    assert ("aten::histc", Verdict.CPU_FALLBACK) in found
    assert {Path(f.file).name for f in report.findings} == {"modeling_mixtral.py"}
    assert all(f.line for f in report.findings)


def test_a_vision_language_model_gets_pixels_and_text_and_is_analysed():
    overrides = ["vision_config.num_hidden_layers=1", "text_config.num_hidden_layers=1"]
    loaded = load_model("hf:paligemma", overrides)
    assert {"pixel_values", "input_ids"} <= set(loaded.kwargs)
    report = _analyse("hf:paligemma", overrides)
    assert report.capture.strategy is CaptureStrategy.META
    ops = {r.op for r in report.ops}
    assert any(op.startswith("aten::conv2d") for op in ops)  # the vision tower's patch embedding ran
    assert "aten::masked_scatter" in ops  # image features merged into the text at the image tokens
    assert any(op.startswith("aten::embedding") for op in ops)  # and so did the language model


def test_an_encoder_decoder_model_is_analysed_clean():
    report = _analyse("hf:bart", ["encoder_layers=1", "decoder_layers=1"])
    assert report.capture.strategy is CaptureStrategy.META
    assert [f for f in report.findings if f.verdict in (Verdict.CPU_FALLBACK, Verdict.COMPILE_ERROR)] == []
    assert report.summary.ops_total > 100


def _zoo():
    import importlib.util

    spec = importlib.util.spec_from_file_location("zoo", Path(__file__).resolve().parent.parent / "scripts" / "zoo.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_zoo_finds_mixture_of_experts_types_by_their_config_and_keeps_every_layer_kind():
    zoo = _zoo()
    assert zoo.moe_fields("switch_transformers") and zoo.moe_fields("nllb-moe") and zoo.moe_fields("mixtral")
    assert zoo.moe_fields("gpt2") == [] and zoo.moe_fields("llama") == []
    # One layer would drop a layer kind (issue 33.4): a sparse step of 4 (switch_transformers, nllb-moe) keeps 4
    # layers, three dense and one MoE; deepseek_v3's three dense layers come before its first MoE layer; gemma3's
    # global attention is every 6th layer, mllama's first cross-attention layer is at index 3. Nothing is rewritten.
    assert zoo.small_layer_overrides("switch_transformers") == ["num_layers=4", "num_decoder_layers=4"]
    assert zoo.small_layer_overrides("nllb-moe") == ["encoder_layers=4", "decoder_layers=4"]
    assert zoo.small_layer_overrides("deepseek_v3") == ["num_hidden_layers=4"]
    assert zoo.small_layer_overrides("gemma3_text") == ["num_hidden_layers=6"]
    assert "text_config.num_hidden_layers=4" in zoo.small_layer_overrides("mllama")
    assert zoo.small_layer_overrides("gpt2") == ["n_layer=1"]
