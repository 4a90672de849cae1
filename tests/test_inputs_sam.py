"""Segment-anything inputs (neuronprobe/loaders/hf/inputs/ ``SAM_RECIPES``): images at the prompt encoder's
size with a point prompt, prompts for a prompt encoder alone, box prompts for SAM3, video sessions for the
trackers; and EdgeTAM's misspelled default backbone field (hf_config.mend_misspelled_defaults).

Recipe tests make inputs for models built on the meta device (no forward); the end-to-end tests take zoo
types that failed before through the analysis, one layer each.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from neuronprobe.analysis import AnalyzeOptions, analyze_spec
from neuronprobe.loaders import hf
from neuronprobe.loaders.hf import InputPlan
from neuronprobe.loaders.hf import config as hf_config
from neuronprobe.loaders.hf.inputs.recipes import RecipeContext
from neuronprobe.vocabulary import CaptureStrategy


def inputs_for(model_type: str, batch: int = 1) -> dict[str, Any]:
    import transformers

    config = hf.build_config(model_type, [])
    verbosity = transformers.logging.get_verbosity()
    try:
        inner = hf.build_model(config, "meta").inner  # it quiets transformers' advice on heads
    finally:
        transformers.logging.set_verbosity(verbosity)
    return hf.make_inputs(inner, config, batch, 8, "meta")


# --- images and prompts ----------------------------------------------------------------------------


def test_sam2_pixels_at_the_prompt_encoders_size_with_a_point():
    from neuronprobe.loaders.hf.inputs.segmentation import sam_image_and_point

    params = {name: None for name in ("pixel_values", "input_points", "input_labels", "input_boxes", "input_masks")}
    made = sam_image_and_point(RecipeContext(None, hf.build_config("edgetam", []), params, 2, 8, "meta", {}, InputPlan()))
    assert made is not None and made["pixel_values"].shape == (2, 3, 1024, 1024)  # its vision config names no size
    assert made["input_points"].shape == (2, 1, 1, 2) and made["input_labels"].shape == (2, 1, 1)
    assert (
        sam_image_and_point(RecipeContext(None, hf.build_config("sam3_tracker", []), params, 1, 8, "meta", {}, InputPlan()))["pixel_values"].shape[-1] == 1008
    )


def test_a_prompt_encoder_alone_gets_every_prompt_kind():
    inputs = inputs_for("sam2_prompt_encoder")
    assert inputs["input_points"].shape == (1, 1, 1, 2) and inputs["input_points"].is_floating_point()
    assert inputs["input_labels"].shape == (1, 1, 1) and inputs["input_labels"].dtype == torch.long
    assert inputs["input_boxes"].shape == (1, 1, 4)
    assert inputs["input_masks"].shape == (1, 1, 256, 256)  # mask_input_size: 4 x (1024 / 16)


def test_sam_mask_embedding_takes_a_mask_prompt():
    inputs = inputs_for("sam_prompt_encoder", batch=2)  # builds SamMaskEmbedding: SamPromptEncoder takes the whole SamConfig
    assert list(inputs) == ["masks"]
    assert inputs["masks"].shape == (2, 1, 256, 256) and inputs["masks"].is_floating_point()


def test_sam3_gets_a_box_next_to_its_text():
    from neuronprobe.loaders.hf.inputs.segmentation import sam3_box_prompt

    params = {name: None for name in ("pixel_values", "input_ids", "input_boxes", "input_boxes_labels")}
    made = sam3_box_prompt(RecipeContext(None, None, params, 2, 8, "cpu", {}, InputPlan()))
    assert made is not None and made["input_boxes"].shape == (2, 1, 4) and made["input_boxes_labels"].tolist() == [[1], [1]]
    assert sam3_box_prompt(RecipeContext(None, None, {**params, "input_points": None}, 1, 8, "cpu", {}, InputPlan())) is None  # sam2-style: points, not boxes


# --- EdgeTAM's default backbone --------------------------------------------------------------------


def test_one_edit_apart():
    assert hf_config._one_edit_apart("archirecture", "architecture")  # two neighbours swapped
    assert hf_config._one_edit_apart("architectre", "architecture") and hf_config._one_edit_apart("architecture", "architectures")
    assert not hf_config._one_edit_apart("architecture", "architecture") and not hf_config._one_edit_apart("hidden_act", "hidden_size")


def test_edgetam_backbone_is_the_repvit_its_config_misspells():
    config = hf.build_config("edgetam", [])
    backbone = config.vision_config.backbone_config
    assert backbone.architecture == "repvit_m1"  # transformers' default spells it "archirecture": resnet50 otherwise
    note = hf_config.misspelled_note(config)
    assert note is not None and "architecture='repvit_m1'" in note and "'archirecture'" in note
    assert hf_config.misspelled_note(hf.build_config("sam2", [])) is None


def test_a_users_backbone_choice_stays():
    config = hf.build_config("edgetam", ["vision_config.backbone_config.architecture=resnet18"])
    assert config.vision_config.backbone_config.architecture == "resnet18"
    assert hf_config.misspelled_note(config) is None


# --- video sessions --------------------------------------------------------------------------------


def test_a_stateful_input_is_fresh_for_each_call_with_its_tensors_shared():
    class Session:
        def __init__(self) -> None:
            self.frames = {0: torch.zeros(3, 4, 4)}
            self.new_inputs = [1]

    stateful = hf.StatefulInput(Session())
    first = hf.fresh_inputs({"inference_session": stateful, "frame_idx": 0})
    first["inference_session"].new_inputs.remove(1)  # what the forward does with a prompt it used
    second = stateful.fresh()
    assert second.new_inputs == [1]
    assert second.frames[0] is stateful.value.frames[0]
    assert first["frame_idx"] == 0


def test_a_tracker_gets_a_session_with_a_point_on_frame_zero():
    inputs = inputs_for("sam2_video", batch=2)
    assert inputs["frame_idx"] == 0
    session = inputs["inference_session"].value
    assert session.num_frames == 2 and session.processed_frames[0].shape == (3, 1024, 1024)
    assert session.get_obj_num() == 2 and session.obj_with_new_inputs == [1, 2]  # one object per batch item
    point = session.point_inputs_per_obj[0][0]
    assert point["point_coords"].shape == (1, 1, 1, 2) and point["point_labels"].dtype == torch.int32


# --- end to end: zoo types that failed before ----------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "overrides", "ops"),
    [
        ("hf:edgetam", ["mask_decoder_config.num_hidden_layers=1"], 500),  # repvit backbone, 1024 pixels, a point
        ("hf:sam2_prompt_encoder", [], 50),  # points, a box and a mask
        ("hf:sam3_geometry_encoder", ["num_layers=1"], 100),  # recorded from sam3 with a box prompt
    ],
)
def test_sam_types_that_failed_before_are_analysed(spec: str, overrides: list[str], ops: int):
    report = analyze_spec(spec, AnalyzeOptions(backend="static", overrides=overrides))
    assert report.capture.strategy is CaptureStrategy.META, report.capture.strategy_reasons
    assert report.summary.ops_total > ops


def test_the_video_tracker_is_exported_whole():
    overrides = ["vision_config.backbone_config.num_hidden_layers=1", "mask_decoder_config.num_hidden_layers=1"]
    report = analyze_spec("hf:sam3_tracker_video", AnalyzeOptions(backend="static", overrides=overrides))
    assert report.capture.strategy is CaptureStrategy.META, report.capture.strategy_reasons
    assert report.capture.method == "export", report.capture.export_error  # the session is a constant input
    assert report.summary.ops_total > 400
    ops = {op.op for op in report.ops}
    assert "aten::conv2d" in ops and "aten::linear" in ops  # the memory encoder's convolutions, the decoder's attention


def test_the_geometry_encoders_inputs_come_from_sam3():
    report = analyze_spec("hf:sam3_geometry_encoder", AnalyzeOptions(backend="static", overrides=["num_layers=1"]))
    notes = [lim.why for lim in report.not_analysed if lim.what == "model build"]
    assert any("inputs recorded from the parent model hf:sam3 at its call of Sam3GeometryEncoder" in n for n in notes), notes
