"""Vision towers on patch grids (issue 12, group GRID): flattened patches with their grid, the layouts other
families take (per-patch images, channels-last blocks, crops with pooling windows), GLM-V rotary widths, and
captures that stop partway.

Unit tests run the repairs and recipes on the real messages and configs (no model built, or one built on
meta); the end-to-end tests take zoo types that failed before through the analysis, one layer each.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from neuronprobe.analysis import AnalyzeOptions, analyze_spec
from neuronprobe.loaders import hf
from neuronprobe.loaders.hf import InputPlan, InputsInfo, learn_from_error
from neuronprobe.loaders.hf import config as hf_config
from neuronprobe.loaders.hf.inputs import grids, repairs
from neuronprobe.vocabulary import CaptureStrategy


def info(shapes: dict[str, tuple[int, ...]], main: str = "pixel_values", line: str = "", config: object = None) -> InputsInfo:
    floats = frozenset(n for n in shapes if not n.endswith(("input_ids", "grid_thw")))
    return InputsInfo(main_input=main, shapes=shapes, floats=floats, params=tuple(shapes), line=line, config=config)


PATCHES = {"pixel_values": (16, 588), "grid_thw": (1, 3)}
VISION = SimpleNamespace(num_channels=3, patch_size=14)


# --- patch layouts -----------------------------------------------------------------------------------


def test_patch_rows_given_to_a_conv_become_patch_images():
    message = "Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: [16, 588]"
    plan = learn_from_error(message, InputPlan(), info(PATCHES, config=VISION))
    assert plan is not None and plan.shape("pixel_values") == (3, 14, 14)  # kimi_k25: self.proj(pixel_values)


def test_patch_rows_unpacked_as_channels_height_width_become_patch_images():
    line = "batch_size, sequence_len, channel, height, width = pixel_values.shape"
    message = "not enough values to unpack (expected 5, got 2)"
    plan = repairs.repair_patch_rows(message, InputPlan(), info(PATCHES, line=line, config=VISION))
    assert plan is not None and plan.shape("pixel_values") == (3, 14, 14)  # paddleocr_vl
    frames = "batch_size, num_frames, num_channels, height, width = pixel_values.shape"  # videomae's pixels are not patch rows
    assert repairs.repair_patch_rows(message, InputPlan(), info({"pixel_values": (1, 3, 224, 224)}, line=frames)) is None


def test_a_row_that_is_no_square_patch_is_left_alone():
    message = "Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: [16, 500]"
    assert repairs.repair_patch_rows(message, InputPlan(), info({"pixel_values": (16, 500)}, config=VISION)) is None


def test_an_image_given_to_a_linear_patch_embedding_becomes_its_patch_sequence():
    message = "a and b must have same reduction dim, but got [1134, 378] X [588, 1152]."
    plan = learn_from_error(message, InputPlan(), info({"pixel_values": (1, 3, 378, 378)}, config=VISION))
    assert plan is not None and plan.shape("pixel_values") == (729, 588)  # molmo2_vision: 27x27 patches of 14x14x3


def _inputs(model_type: str, overrides: list[str], device: str = "meta", plan: InputPlan | None = None) -> tuple[object, dict]:
    """The config and the inputs make_inputs gives its model built on meta (``device``: where the inputs are made)."""
    from neuronprobe.loaders.resolve import hf_build_scope

    with hf_build_scope():  # transformers' verbosity back as it was
        config = hf.build_config(model_type, overrides)
        inner = hf.build_model(config, "meta").inner
        return config, hf.make_inputs(inner, config, 1, 8 if device == "meta" else 4, device, plan)


def _tower(model_type: str, plan: InputPlan | None = None) -> dict:
    return _inputs(model_type, ["num_hidden_layers=1"], plan=plan)[1]


def test_a_tower_without_a_temporal_patch_gets_rows_of_one_frame():
    inputs = _tower("cosmos3_edge_vision")  # SigLIP patches: 3 * 16 * 16, no temporal patch
    assert tuple(inputs["pixel_values"].shape) == (16, 768) and inputs["grid_thw"].tolist() == [[1, 4, 4]]
    assert tuple(_tower("hunyuan_vl_vision")["pixel_values"].shape) == (16, 768)  # temporal_patch_size 1


def test_a_batch_asked_in_front_of_patch_images():
    plan = InputPlan(shapes=(("pixel_values", (1, 3, 14, 14)),))  # what repair_missing_dims asks after the unpack
    assert tuple(_tower("paddleocr_vl_vision", plan)["pixel_values"].shape) == (1, 16, 3, 14, 14)


def test_a_merge_size_per_image_next_to_the_grid():
    inputs = _tower("video_llama_3_vision")
    assert inputs["merge_sizes"].tolist() == [2] and inputs["grid_thw"].shape == (1, 3)


def test_inkling2_takes_one_channels_last_block_per_image_token():
    inputs = _tower("inkling2_vision")
    assert tuple(inputs["pixel_values"].shape) == (4, 40, 40, 3) and inputs["image_grid_thw"].tolist() == [[1, 2, 2]]


def test_molmo_pooling_windows_cover_each_crop():
    import torch

    windows = grids._pooling_windows(torch.arange(9).reshape(3, 3), 2, 2)
    assert windows.tolist() == [[0, 1, 3, 4], [2, -1, 5, -1], [6, 7, -1, -1], [8, -1, -1, -1]]  # padded after, as arange_for_pooling
    config, inputs = _inputs("molmo2", [], "cpu")  # the VLM: two crops of 27x27 patches (378 / 14), 14x14 windows each
    assert tuple(inputs["pixel_values"].shape) == (2, 729, 588) and inputs["image_grids"].tolist() == [[14, 14, 14, 14]]
    pooling = inputs["image_token_pooling"]
    assert tuple(pooling.shape) == (2 * 14 * 14, 4) and int(pooling.max()) == 2 * 729 - 1
    assert int((inputs["input_ids"] == config.image_token_id).sum()) == 2 * 14 * 14  # one image token per window


def test_an_input_named_as_missing_is_made_as_each_tokens_modality():
    message = (
        "Multimodal data was passed (via `image_grid_thw` or `video_grid_thw`) but `mm_token_type_ids` is missing. "
        "Please pass `mm_token_type_ids` to the model so that multimodal RoPE (M-RoPE) can be computed correctly."
    )
    shapes = {"input_ids": (1, 20), "pixel_values": (16, 588), "image_grid_thw": (1, 3)}
    seen = InputsInfo(main_input="input_ids", shapes=shapes, params=(*shapes, "video_grid_thw", "mm_token_type_ids"))
    plan = repairs.repair_missing_input(message, InputPlan(), seen)
    assert plan is not None and plan.extra == ("mm_token_type_ids",)  # ernie4_5_vl_moe; not video_grid_thw, named first
    _, inputs = _inputs("ernie4_5_vl_moe", ["text_config.num_hidden_layers=1"], "cpu", plan)
    assert inputs["mm_token_type_ids"].tolist() == [[1] * 4 + [0] * 4]  # the 4 image tokens of a 4x4 grid merged 2x2, then text


def test_a_shrunken_multimodal_rotary_keeps_its_head_width():
    config = hf.build_config("ernie4_5_vl_moe", [])  # sections [22, 22, 20] default in the modeling code: a 128 head
    small, _ = hf.shrink_config(config)
    assert small.text_config.head_dim == 128 and small.text_config.num_attention_heads == 4


# --- GLM-V rotaries --------------------------------------------------------------------------------


def test_rotary_sections_the_rotary_does_not_fill_are_learned_from_the_split():
    message = "split_with_sizes expects split_sizes to sum exactly to 64 (input tensor's size at dimension -1), but got split_sizes=[8, 12, 12]"
    line = "freq = torch.cat([m[i % 3] for i, m in enumerate(freq.split(self.mrope_section, dim=-1))], dim=-1)"
    plan = learn_from_error(message, InputPlan(), info({"input_ids": (1, 16)}, "input_ids", line=line))
    assert plan is not None and plan.rope_sections == (64, 8, 12, 12)
    assert InputPlan.from_json(plan.to_json()) == plan  # it travels to the xla-cpu worker
    assert repairs.repair_rope_sections(message, InputPlan(), info({"input_ids": (1, 16)}, "input_ids", line="x = y.split(sizes)")) is None


def test_fit_rotary_sets_the_field_the_default_config_leaves_out():
    text = hf.build_config("glm4v_text", [])  # GLM-4.1V: head_dim 128, partial_rotary_factor 0.5
    assert hf_config.fit_rotary(text, (8, 12, 12), 64) == ["partial_rotary_factor=0.5"]
    moe = hf.build_config("glm4v_moe_text", [])  # GLM-4.5V: partial 0.5 given, head_dim 128 left out (4096 / 96 = 42)
    assert hf_config.fit_rotary(moe, (8, 12, 12), 11) == ["head_dim=128"]
    assert hf_config.fit_rotary(hf.build_config("glm4v_text", []), (8, 12, 12), 99) == []  # no rotary of that width


# --- captures that stop partway ---------------------------------------------------------------------


def _captured(nodes: int, stopped: bool) -> object:
    """A capture of ``nodes`` ops, stopped partway or not (what a strategy hands back; the search reads no more)."""
    graph = SimpleNamespace(stopped="GuardOnDataDependentSymNode: u1" if stopped else None)
    return SimpleNamespace(nodes=nodes, graph=graph, loaded=SimpleNamespace(notes=[]))


def _outcome(nodes: int, stopped: bool) -> object:
    from neuronprobe.capture.strategies import Outcome

    return Outcome(_captured(nodes, stopped), [], [])  # type: ignore[arg-type]


def test_a_capture_that_stopped_early_is_named_and_the_fuller_one_kept():
    from neuronprobe.capture.strategies import fuller, stopped_early

    thin, full = _outcome(2, True), _outcome(97, False)
    assert stopped_early(thin.graph) == "GuardOnDataDependentSymNode: u1" and stopped_early(full.graph) is None
    assert fuller(full, thin) is full and fuller(thin, full) is full and fuller(thin, None) is thin


def test_a_complete_capture_beats_one_that_stopped_with_more_ops(monkeypatch: pytest.MonkeyPatch):
    """meta stops partway at 2000 ops of the full-size model, fake fails, cpu-shrunk runs the shrunken copy to its
    end in 300: the complete capture is the result, and the reasons say how the others went."""
    from neuronprobe.capture import strategies as cs
    from neuronprobe.loaders import hf as hf_loader

    monkeypatch.setattr(hf_loader, "load", lambda *a, **k: SimpleNamespace(notes=[], module=SimpleNamespace(model=None), kwargs={}))
    monkeypatch.setattr(cs, "to_fake", lambda loaded: loaded)
    monkeypatch.setattr(hf_loader, "inputs_info", lambda *a: None)
    monkeypatch.setattr(cs, "capture_learner", lambda *a, **k: lambda *b: None)  # a failure teaches nothing here
    devices = iter([(_captured(2000, True), None), (None, RuntimeError("fake says no")), (_captured(300, False), None)])
    monkeypatch.setattr(cs, "try_capture", lambda capture, loaded: next(devices))
    outcome = cs.capture_hf("llama", [], 8, 1, capture=lambda loaded: None)  # type: ignore[arg-type,return-value]
    assert outcome.strategy is cs.CPU_SHRUNK and outcome.captured.nodes == 300  # type: ignore[union-attr]
    assert [a.strategy for a in outcome.attempts] == [cs.META, cs.FAKE]
    assert "stopped after 2000 ops" in outcome.attempts[0].reason


def test_when_every_way_stops_partway_the_fullest_is_kept_with_every_reason(monkeypatch: pytest.MonkeyPatch):
    from neuronprobe.capture import strategies as cs
    from neuronprobe.loaders import hf as hf_loader

    monkeypatch.setattr(hf_loader, "load", lambda *a, **k: SimpleNamespace(notes=[], module=None, kwargs={}))
    monkeypatch.setattr(cs, "to_fake", lambda loaded: loaded)
    runs = iter([(_captured(12, True), None), (_captured(40, True), None), (_captured(9, True), None)])
    monkeypatch.setattr(cs, "try_capture", lambda capture, loaded: next(runs))
    outcome = cs.capture_hf("llama", [], 8, 1, capture=lambda loaded: None)  # type: ignore[arg-type,return-value]
    assert outcome.strategy is cs.FAKE and outcome.captured.nodes == 40  # type: ignore[union-attr]
    assert [a.strategy for a in outcome.attempts] == [cs.META, cs.FAKE, cs.CPU_SHRUNK]


# --- end to end: zoo types that failed before -------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "strategy", "ops"),
    [
        ("hf:hy_v4_vl_vision", CaptureStrategy.META, 100),  # flattened patches of one frame with their grid
        ("hf:glm4v_text", CaptureStrategy.META, 100),  # the rotary fitted to mrope_section
        ("hf:molmo2_vision", CaptureStrategy.META, 20),  # the image as its patch sequence
        ("hf:inkling2_vision", CaptureStrategy.META, 100),  # channels-last blocks per image token
    ],
)
def test_grid_types_that_failed_before_are_analysed(spec: str, strategy: CaptureStrategy, ops: int):
    report = analyze_spec(spec, AnalyzeOptions(backend="static", overrides=["num_hidden_layers=1"]))
    assert report.capture.strategy is strategy, report.capture.strategy_reasons
    assert report.summary.ops_total > ops


def test_a_tower_that_stops_on_fake_tensors_is_captured_in_full_on_the_cpu():
    report = analyze_spec("hf:qwen2_vl_vision", AnalyzeOptions(backend="static", overrides=["depth=1"]))
    assert report.capture.strategy is CaptureStrategy.CPU_SHRUNK, report.capture.strategy_reasons
    assert report.summary.ops_total > 50  # 1 op before: the fake capture stopped at its first grid read
    assert any("stopped after" in r.reason for r in report.capture.strategy_reasons)


def test_raw_audio_that_stops_on_meta_is_captured_in_full_on_the_cpu():
    report = analyze_spec("hf:encodec", AnalyzeOptions(backend="static"))  # was test_input_repairs' meta case: 15 ops
    assert report.capture.strategy is CaptureStrategy.CPU_SHRUNK, report.capture.strategy_reasons
    assert report.summary.ops_total > 100
    assert any("input_values as (batch, 1, 16000)" in lim.why for lim in report.not_analysed)  # raw audio (B, channels, T) still
