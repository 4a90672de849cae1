"""Capture that does not give up (issue 12): meta -> fake -> cpu-shrunk, a head fallback, and exit 4 when nothing works."""

from __future__ import annotations

import json
import sys

from helpers import MODELS, ROOT, CliRun, cli_in_process

from neuronprobe.analysis import AnalyzeOptions, analyze_spec
from neuronprobe.report.model import Report

sys.path.insert(0, str(MODELS))
import hf_strategy_models  # noqa: F401  (registers the np-* model types)

FIXTURE = "tests/models/hf_strategy_models.py"


def _line(marker: str) -> int:
    text = (ROOT / FIXTURE).read_text().splitlines()
    return next(i for i, line in enumerate(text, 1) if marker in line)


def _cli(*args: str) -> CliRun:
    """The command in this process, where this module registered the np-* model types (a new process would not have them)."""
    return cli_in_process(*args)


def test_moe_routing_with_nonzero_falls_back_to_fake_tensors_and_finds_the_routing_line():
    report = analyze_spec("hf:np-moe", AnalyzeOptions(backend="static"))
    assert report.capture.strategy == "fake"
    assert [r.strategy for r in report.capture.strategy_reasons] == ["meta"]
    assert "nonzero" in report.capture.strategy_reasons[0].reason  # the root error, not "the forward raised"
    hits = [(f.verdict, f.file, f.line) for f in report.findings if f.op == "aten::nonzero"]
    assert hits == [("dynamic_shape", FIXTURE, _line("NP-NONZERO"))]
    again = Report.from_json(report.to_json())  # the strategy survives the JSON round trip
    assert again.capture.strategy == "fake" and again.capture.strategy_reasons[0].strategy == "meta"


def test_value_reads_fall_back_to_real_cpu_weights_on_a_shrunken_config():
    report = analyze_spec("hf:np-read", AnalyzeOptions(backend="static"))
    assert report.capture.strategy == "cpu-shrunk"
    assert [r.strategy for r in report.capture.strategy_reasons] == ["meta", "fake"]
    notes = [lim.why for lim in report.not_analysed if lim.what == "model build"]
    assert any("num_hidden_layers 3->2" in n and "op kinds and lines do not" in n for n in notes)
    assert report.summary.ops_total > 0


def test_the_ways_load_and_capture_only_and_the_winner_is_analysed_once(monkeypatch):
    """Issue 35.2: on np-read meta and fake fail and cpu-shrunk captures; classification, the backend and the
    report run once, on the cpu-shrunk capture, and the report says why the others failed."""
    import neuronprobe.analysis as analysis

    captures, analysed = [], []
    capture, report_of = analysis.capture_model, analysis._report_of
    monkeypatch.setattr(analysis, "capture_model", lambda loaded, options: captures.append(loaded) or capture(loaded, options))
    monkeypatch.setattr(analysis, "_report_of", lambda captured, *rest: analysed.append(captured) or report_of(captured, *rest))
    report = analyze_spec("hf:np-read", AnalyzeOptions(backend="static"))
    assert report.capture.strategy == "cpu-shrunk" and [r.strategy for r in report.capture.strategy_reasons] == ["meta", "fake"]
    assert len(captures) >= 3 and len(analysed) == 1
    assert analysed[0].loaded is captures[-1] and not analysed[0].loaded.on_meta  # the real-weight shrunken copy
    assert report.capture.nodes == len(analysed[0].graph.calls) > 0 and report.summary.ops_total > 0


def test_a_head_that_refuses_the_config_falls_back_to_the_base_model_and_says_so():
    report = analyze_spec("hf:np-headless", AnalyzeOptions(backend="static"))
    assert report.capture.strategy == "meta"
    notes = [lim.why for lim in report.not_analysed if lim.what == "model build"]
    assert len(notes) == 1 and "head refused the config" in notes[0] and "HeadlessModel" in notes[0]


def test_a_model_no_strategy_can_run_is_a_limitation_and_exit_4(tmp_path):
    result = _cli("analyze", "hf:np-broken", "--backend", "static", "-o", str(tmp_path))
    assert result.returncode == 4, result.stderr
    assert "Traceback" not in result.stderr
    assert "could not analyse hf_np-broken" in result.stderr
    data = json.loads((tmp_path / "hf_np-broken.json").read_text())
    assert data["capture"]["strategy"] == "none"
    assert [r["strategy"] for r in data["capture"]["strategy_reasons"]] == ["meta", "fake", "cpu-shrunk"]
    why = data["not_analysed"][0]["why"]
    assert why.count("needs a kernel neuronprobe cannot run") == 3


def test_a_config_no_device_can_build_is_bad_input_naming_set():
    result = _cli("analyze", "hf:np-unbuildable", "--backend", "static")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "num_experts must equal 3" in lines[0] and "--set KEY=VALUE" in lines[0]


def test_set_reaches_nested_sub_configs():
    from neuronprobe.loaders.hf import build_config

    config = build_config("llava", ["text_config.num_hidden_layers=1"])
    assert config.text_config.num_hidden_layers == 1


def test_a_sub_config_model_type_builds_the_class_whose_config_class_it_is():
    # AutoModel has no entry for align_vision_model: its class is found by its config class.
    report = analyze_spec("hf:align_vision_model", AnalyzeOptions(backend="static", overrides=["num_hidden_layers=1"]))
    assert report.capture.strategy == "meta" and report.summary.ops_total > 0
    assert not [lim for lim in report.not_analysed if lim.what == "model build"]  # no head note: there is no head to refuse


def test_a_vision_tower_gets_the_pixels_its_forward_requires():
    # Idefics2VisionTransformer's main_input_name is input_ids but its forward requires pixel_values.
    import transformers

    from neuronprobe.loaders.hf import build_config, build_model, make_inputs

    config = build_config("idefics2_vision", ["num_hidden_layers=1"])
    verbosity = transformers.logging.get_verbosity()
    try:
        built = build_model(config, "meta")
    finally:
        transformers.logging.set_verbosity(verbosity)
    assert type(built.inner).__name__ == "Idefics2VisionTransformer"
    inputs = make_inputs(built.inner, config, 1, 8, "meta")
    assert list(inputs) == ["pixel_values"] and tuple(inputs["pixel_values"].shape[-2:]) == (config.image_size, config.image_size)
    report = analyze_spec("hf:idefics2_vision", AnalyzeOptions(backend="static", overrides=["num_hidden_layers=1"]))
    assert report.capture.strategy == "meta" and report.summary.ops_total > 0


def test_a_spectrogram_encoder_gets_frames_by_mel_bins():
    report = analyze_spec("hf:audio-spectrogram-transformer", AnalyzeOptions(backend="static", overrides=["num_hidden_layers=1"]))
    assert report.capture.strategy == "meta" and report.summary.ops_total > 0


def test_shrinking_keeps_cross_config_widths_and_heads_divisible():
    from neuronprobe.loaders.hf import build_config, shrink_config

    config = build_config("blip-2", [])
    small, changes = shrink_config(config)
    assert small.qformer_config.encoder_hidden_size == small.vision_config.hidden_size < config.vision_config.hidden_size
    assert any(c.startswith("encoder_hidden_size ") for c in changes)
    odd = build_config("bert", ["hidden_size=120", "num_attention_heads=7"])
    small, _ = shrink_config(odd)
    assert small.hidden_size % small.num_attention_heads == 0


def test_a_component_gets_the_inputs_its_parent_passes_it():
    # SamMaskDecoder's forward takes image and prompt embeddings only SamModel computes: recorded at SamModel's call.
    report = analyze_spec("hf:sam_mask_decoder", AnalyzeOptions(backend="static", overrides=["num_hidden_layers=1"]))
    assert report.capture.strategy == "meta" and report.summary.ops_total > 0
    notes = [lim.why for lim in report.not_analysed if lim.what == "model build"]
    assert any("inputs recorded from the parent model hf:sam at its call of SamMaskDecoder" in n for n in notes)
    assert report.summary.support_percentage == 100.0


def test_recorded_inputs_follow_the_parent_and_say_why_when_no_parent_reaches_the_component():
    import pytest
    import torch

    from neuronprobe.loaders import hf
    from neuronprobe.loaders.hf import parent as hf_parent
    from neuronprobe.loaders.resolve import hf_build_scope

    with hf_build_scope():
        config = hf.build_config("sam_mask_decoder", [])
        component = hf.build_model(config, "meta").inner
        recorder = hf_parent.recorder_for("sam_mask_decoder", config, component, "meta", 1, 8)
        inputs = recorder.inputs(1, 8)
    assert recorder.parent_type == "sam" and type(recorder.target).__name__ == "SamMaskDecoder"
    assert inputs["image_embeddings"].shape == (1, config.hidden_size, 64, 64) and inputs["image_embeddings"].is_meta
    assert isinstance(inputs["multimask_output"], bool)
    # For a real-CPU capture the meta recordings become real tensors of the same shapes; CPU-made integers keep their values.
    grid = torch.tensor([[1, 4, 4]])
    real = hf_parent._materialise({"x": torch.empty(2, 3, device="meta"), "grid": grid}, "cpu")
    assert real["x"].device.type == "cpu" and real["x"].shape == (2, 3) and real["grid"] is grid
    # SamModel calls its mask embedding only for mask prompts: the reason names the parent and what it did not reach.
    with hf_build_scope():
        config = hf.build_config("sam_prompt_encoder", [])
        component = hf.build_model(config, "meta").inner
        with pytest.raises(hf_parent.NoParentInputs, match=r"hf:sam did not reach SamMaskEmbedding \(its forward never called the component\)"):
            hf_parent.recorder_for("sam_prompt_encoder", config, component, "meta", 1, 8)


def test_a_default_config_that_leaves_a_needed_field_unset_gets_a_value_and_says_so():
    # deepseek_ocr2_text's default config has num_experts_per_tok=None; its routing calls topk(k=None).
    # Its whole text model (mlp_layer_types filled at the build): the MoE routing reads a value, so fake tensors.
    report = analyze_spec("hf:deepseek_ocr2_text", AnalyzeOptions(backend="static", overrides=["num_hidden_layers=1"]))
    assert report.capture.strategy == "fake" and report.summary.ops_total > 100
    notes = [lim.why for lim in report.not_analysed if lim.what == "model build"]
    # Filled at the build now, when the constructor is what raises on it (hf_config.complete_for_build).
    assert any("unset" in n and "num_experts_per_tok=2" in n for n in notes), notes


def test_a_model_without_a_forward_of_its_own_is_analysed_through_its_encode():
    # chameleon's VQ image tokenizer only encodes (the vision-language model calls encode): that is what is captured.
    report = analyze_spec("hf:chameleon_vqgan", AnalyzeOptions(backend="static"))
    assert report.capture.strategy == "meta" and report.summary.ops_total > 0
    notes = [lim.why for lim in report.not_analysed if lim.what == "model build"]
    assert "ChameleonVQVAE has no forward of its own; its encode() was analysed" in notes


def test_an_unset_image_token_is_an_id_the_text_never_uses():
    from neuronprobe.loaders.hf import TEXT_ID_LIMIT, build_config, complete_config

    config = build_config("blip-2", [])  # image_token_index=None: ids == None is False, and the merge of query outputs fails
    assert config.image_token_index is None
    changes = complete_config(config)
    assert config.image_token_index == config.text_config.vocab_size - 1 > TEXT_ID_LIMIT
    assert f"image_token_index={config.image_token_index}" in changes
