"""Input repairs for ``hf:`` models (neuronprobe/loaders/hf/ ``REPAIRS``): each learns from the
forward's own error message how its inputs should change.

Unit tests run each repair on a message a real zoo type raised (pure, no model built); the end-to-end
tests take four zoo types that failed before the repairs through the analysis, one layer each.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from neuronprobe.analysis import AnalyzeOptions, analyze_spec
from neuronprobe.loaders import hf
from neuronprobe.loaders.hf import InputPlan, InputsInfo, learn_from_error
from neuronprobe.loaders.hf.inputs import primitives, repairs
from neuronprobe.vocabulary import CaptureStrategy

PIXELS = {"pixel_values": (1, 3, 224, 224)}
AUDIO = {"input_values": (1, 16000)}


def info(
    shapes: dict[str, tuple[int, ...]],
    main: str = "pixel_values",
    line: str = "",
    params: tuple[str, ...] = (),
    config: object = None,
    ints: tuple[str, ...] = (),
) -> InputsInfo:
    return InputsInfo(
        main_input=main,
        shapes=shapes,
        floats=frozenset(n for n in shapes if n not in ints and not n.endswith("input_ids")),
        params=params or tuple(shapes),
        line=line,
        config=config,
    )


# --- video and multi-image pixels, image pairs ------------------------------------------------


def test_video_pixels_get_the_config_frame_count_from_the_unpacking_line():
    config = SimpleNamespace(num_frames=16, tubelet_size=2)
    message = "not enough values to unpack (expected 5, got 4)"
    line = "batch_size, num_frames, num_channels, height, width = pixel_values.shape"
    plan = repairs.repair_missing_dims(message, InputPlan(), info(PIXELS, line=line, config=config))
    assert plan is not None and plan.shape("pixel_values") == (16, 3, 224, 224)  # videomae


def test_multi_image_pixels_get_one_image():
    line = "batch_size, num_images, num_channels, height, width = pixel_values.shape"
    plan = repairs.repair_missing_dims("not enough values to unpack (expected 5, got 4)", InputPlan(), info(PIXELS, line=line, config=SimpleNamespace()))
    assert plan is not None and plan.shape("pixel_values") == (1, 3, 224, 224)  # idefics2, smolvlm


def test_pixels_flattened_by_the_forward_before_its_unpack_get_a_dim_of_one():
    line = "batch_size, num_channels, height, width = pixel_values.shape"
    plan = repairs.repair_missing_dims("not enough values to unpack (expected 4, got 3)", InputPlan(), info(PIXELS, line=line))
    assert plan is not None and plan.shape("pixel_values") == (1, 3, 224, 224)  # idefics: (B, images, C, H, W)


def test_an_image_pair_is_read_from_the_stated_shape():
    message = "Input must be a 5D tensor of shape (batch_size, 2, num_channels, height, width)"
    plan = repairs.repair_missing_dims(message, InputPlan(), info(PIXELS, line='raise ValueError("Input must be a 5D tensor")'))
    assert plan is not None and plan.shape("pixel_values") == (2, 3, 224, 224)  # superglue, lightglue, efficientloftr


def test_raw_audio_gets_its_channel_dim_from_the_unpacking_line():
    config = SimpleNamespace(audio_channels=1)
    line = "_, channels, input_length = input_values.shape"
    plan = repairs.repair_missing_dims("not enough values to unpack (expected 3, got 2)", InputPlan(), info(AUDIO, "input_values", line, config=config))
    assert plan is not None and plan.shape("input_values") == (1, 16000)  # encodec, mimi


def test_a_repair_already_in_the_plan_teaches_nothing():
    line = "batch_size, num_images, num_channels, height, width = pixel_values.shape"
    plan = InputPlan(shapes=(("pixel_values", (1, 3, 224, 224)),))
    assert repairs.repair_missing_dims("not enough values to unpack (expected 5, got 4)", plan, info({"pixel_values": (1, 1, 3, 224, 224)}, line=line)) is None


# --- raw audio -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "message",
    [
        "Dimension out of range (expected to be in range of [-2, 1], but got 2)",  # omniasr_ctc, vibevoice_acoustic_tokenizer
        "Audio must be mono, but got 16000",  # xcodec
        "Attempting to broadcast a dimension of length 16000 at -2! Mismatching argument at index 1 had torch.Size([64, 16000, 1]); "
        "but expected shape should be broadcastable to [1, 64, 1]",  # dac, pe_audio
    ],
)
def test_raw_audio_becomes_batch_channels_time(message: str):
    plan = repairs.repair_audio_channels(message, InputPlan(), info(AUDIO, "input_values", config=SimpleNamespace()))
    assert plan is not None and plan.shape("input_values") == (1, 16000)


def test_a_broadcast_of_another_length_is_not_an_audio_layout_error():
    message = "Attempting to broadcast a dimension of length 2048 at -1! Mismatching argument at index 1 had torch.Size([2048])"
    assert repairs.repair_audio_channels(message, InputPlan(), info(AUDIO, "input_values")) is None


# --- sizes and lengths the error states --------------------------------------------------------


def test_the_image_size_the_model_states():
    message = "Input image size (224*224) doesn't match model (256*192)."
    plan = repairs.repair_stated_size(message, InputPlan(), info(PIXELS))
    assert plan is not None and plan.shape("pixel_values") == (3, 256, 192)  # vitpose


def test_pixels_joined_to_a_prompt_are_scaled_with_the_prompt():
    shapes = {"pixel_values": (1, 3, 896, 448), "prompt_pixel_values": (1, 3, 896, 448), "prompt_masks": (1, 3, 896, 448)}
    plan = repairs.repair_stated_size("Input image size (1792*448) doesn't match model (896*448).", InputPlan(), info(shapes))
    assert plan is not None and {n: plan.shape(n) for n in shapes} == dict.fromkeys(shapes, (3, 448, 448))  # seggpt


def test_one_side_at_a_time_from_a_timm_assertion():
    plan = repairs.repair_stated_size(
        "Input height (224) doesn't match model (336).", InputPlan(), info({"pixel_values_videos": (1, 1, 3, 224, 224)}, "pixel_values_videos")
    )
    assert plan is not None and plan.shape("pixel_values_videos") == (1, 3, 336, 224)  # pe_video


def test_an_image_too_small_for_its_smallest_scale():
    message = "Image size 224x224 is too small to be scaled with scaled_images_ratios=(0.25, 0.5, 1) when patch_size=384."
    plan = repairs.repair_stated_size(message, InputPlan(), info(PIXELS))
    assert plan is not None and plan.shape("pixel_values") == (3, 1536, 1536)  # depth_pro


def test_channels_of_our_own_input_not_of_a_feature_map_inside():
    message = "Given groups=1, weight of size [1536, 80, 7], expected input[1, 1, 32] to have 80 channels, but got 1 channels instead"
    plan = repairs.repair_stated_size(message, InputPlan(), info({"mel_spectrogram": (1, 1, 32)}, "mel_spectrogram"))
    assert plan is not None and plan.shape("mel_spectrogram") == (80, 32)
    inside = "Given groups=1, weight of size [256, 384, 1, 1], expected input[1, 1024, 14, 14] to have 384 channels, but got 1024 channels instead"
    assert repairs.repair_stated_size(inside, InputPlan(), info(PIXELS)) is None  # edgetam: a feature map, not the pixels


def test_a_sequence_length_the_model_configuration_states():
    message = "Input sequence length (16) doesn't match model configuration (32)."
    plan = repairs.repair_stated_length(message, InputPlan(), info({"past_values": (1, 16, 7)}, "past_values"))
    assert plan is not None and plan.shape("past_values") == (32, 7)  # patchtst, patchtsmixer


def test_a_length_rounded_up_to_the_multiple_the_model_needs():
    message = "`input_values` length 16000 is not a multiple of 1920. Prepare the audio with `MuseSparkFeatureExtractor`"
    plan = repairs.repair_stated_length(message, InputPlan(), info(AUDIO, "input_values"))
    assert plan is not None and plan.shape("input_values") == (17280,)  # muse_spark_audio
    message = "Qwen3ASREncoder expects `padded_feature_length` to be a multiple of `n_window * 2` (100), but got 128."
    plan = repairs.repair_stated_length(message, InputPlan(), info({"input_features": (1, 128, 128)}, "input_features"))
    assert plan is not None and plan.shape("input_features") == (128, 200)


# --- inputs the forward says it needs ----------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "params", "needed"),
    [
        ("You have to specify bbox", ("input_ids", "bbox", "attention_mask"), "bbox"),  # bros
        ("Bbox is required for horizontal relative position bias", ("input_ids", "attention_mask", "bbox"), "bbox"),  # udop
        ("`visual_feats` cannot be `None`", ("input_ids", "visual_feats", "visual_pos"), "visual_feats"),  # lxmert
        ("You have to specify either pixel_values or image_embeds", ("input_ids", "pixel_values", "image_embeds"), "pixel_values"),  # vilt
    ],
)
def test_an_input_the_forward_says_it_needs(message: str, params: tuple[str, ...], needed: str):
    plan = repairs.repair_needed_input(message, InputPlan(), info({"input_ids": (1, 32)}, "input_ids", params=params))
    assert plan is not None and plan.extra == (needed,)


def test_the_next_named_input_when_the_first_is_already_asked_for():
    message = "You have to specify either pixel_values or image_embeds"
    plan = InputPlan(extra=("pixel_values",))
    better = repairs.repair_needed_input(message, plan, info({"input_ids": (1, 32)}, "input_ids", params=("input_ids", "pixel_values", "image_embeds")))
    assert better is not None and better.extra == ("pixel_values", "image_embeds")


def test_giving_two_at_once_is_not_a_missing_input():
    message = "You cannot specify both input_ids and inputs_embeds at the same time"
    assert repairs.repair_needed_input(message, InputPlan(), info({"input_ids": (1, 32)}, "input_ids", params=("input_ids", "inputs_embeds"))) is None


def test_an_input_read_without_a_none_check_is_named_by_the_line():
    message = "'NoneType' object has no attribute 'size'"
    params = ("input_ids", "pixel_values", "image_attention_mask")
    plan = repairs.repair_none_input(
        message,
        InputPlan(),
        info({"input_ids": (1, 32), "pixel_values": (1, 1, 3, 224, 224)}, "input_ids", "num_images = image_attention_mask.size(-1)", params),
    )
    assert plan is not None and plan.extra == ("image_attention_mask",)  # idefics
    message = "embedding(): argument 'indices' (position 2) must be Tensor, not NoneType"
    line = "inputs_embeds = self.language_model.get_input_embeddings()(input_ids)"
    plan = repairs.repair_none_input(message, InputPlan(), info(PIXELS, line=line, params=("pixel_values", "input_ids", "inputs_embeds")))
    assert plan is not None and plan.extra == ("input_ids",)  # instructblip: what the line reads, not what it assigns


def test_integer_boxes_the_forward_averages_become_floats():
    message = "mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: Long"
    shapes = {"input_ids": (1, 32), "bbox": (1, 32, 4)}
    plan = repairs.repair_float_input(
        message, InputPlan(), info(shapes, "input_ids", "horizontal_position: Tensor = bbox[:, :, [0, 2]].mean(dim=-1)", ints=("bbox",))
    )
    assert plan is not None and plan.floats == ("bbox",)  # udop


# --- the chain ---------------------------------------------------------------------------------


def test_learn_from_error_takes_the_first_repair_that_answers_and_none_when_none_does():
    config = SimpleNamespace(num_frames=8)
    line = "batch_size, num_frames, num_channels, height, width = pixel_values.shape"
    plan = learn_from_error("not enough values to unpack (expected 5, got 4)", InputPlan(), info(PIXELS, line=line, config=config))
    assert plan == InputPlan(shapes=(("pixel_values", (8, 3, 224, 224)),))
    assert learn_from_error("Tensor.item() cannot be called on meta tensors", InputPlan(), info(PIXELS)) is None
    # the older call with only the main input's name still flips the audio layout, once
    assert learn_from_error("anything", InputPlan(), "input_features") == InputPlan(audio_time_major=True)
    assert learn_from_error("anything", InputPlan(audio_time_major=True), "input_features") is None


def test_every_repair_names_the_model_types_it_was_learned_from():
    for repair in hf.REPAIRS:
        assert repair.__doc__ and "(" in repair.__doc__, repair.__name__


def test_make_inputs_applies_the_plan_to_a_built_model():
    import torch

    class Video(torch.nn.Module):
        main_input_name = "pixel_values"

        def forward(self, pixel_values: torch.Tensor, bbox: torch.Tensor | None = None) -> torch.Tensor:
            return pixel_values

    config = SimpleNamespace(image_size=32, num_channels=3)
    plan = InputPlan(shapes=(("pixel_values", (4, 3, 32, 32)),), extra=("bbox",), floats=("bbox",))
    inputs = hf.make_inputs(Video(), config, 2, 5, "cpu", plan)
    assert inputs["pixel_values"].shape == (2, 4, 3, 32, 32)
    boxes = inputs["bbox"]
    assert boxes.shape == (2, 5, 4) and boxes.is_floating_point()
    assert bool((boxes[..., 0] <= boxes[..., 2]).all()) and bool((boxes[..., 1] <= boxes[..., 3]).all()) and float(boxes.max()) <= 1000


# --- end to end: zoo types that failed before ----------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "overrides"),
    [
        ("hf:videomae", ["num_hidden_layers=1"]),  # video pixels (B, frames, C, H, W)
        ("hf:patchtst", ["num_hidden_layers=1"]),  # a time series by name: past_values (B, context, channels)
        ("hf:seggpt", ["num_hidden_layers=1"]),  # prompt images and masks by name, then the size the model states
    ],
)
def test_zoo_types_that_needed_repaired_inputs_are_analysed(spec: str, overrides: list[str]):
    report = analyze_spec(spec, AnalyzeOptions(backend="static", overrides=overrides))
    assert report.capture.strategy is CaptureStrategy.META, report.capture.strategy_reasons
    assert report.summary.ops_total > 10


# --- feature widths and text lengths --------------------------------------------------------------


def test_features_get_the_width_their_first_norm_takes():
    message = "Given normalized_shape=[160], expected input with shape [160], but got input of size torch.Size([1, 80, 10000])"
    plan = repairs.repair_feature_width(message, InputPlan(), info({"input_features": (1, 80, 10000)}, "input_features"))
    assert plan is not None and plan.shape("input_features") == (80, 160)  # wav2vec2-bert


def test_features_get_the_width_their_first_linear_takes():
    message = "a and b must have same reduction dim, but got [80, 128] X [320, 1024]."
    plan = repairs.repair_feature_width(message, InputPlan(), info({"input_features": (1, 80, 128)}, "input_features"))
    assert plan is not None and plan.shape("input_features") == (80, 320)  # granite_speech5_ctc
    assert repairs.repair_feature_width("a and b must have same reduction dim, but got [256, 3072] X [5632, 4096].", InputPlan(), info(PIXELS)) is None


def test_text_no_longer_than_the_position_table():
    message = (
        "Attempting to broadcast a dimension of length 16 at -2! Mismatching argument at index 1 had torch.Size([1, 16, 512]); "
        "but expected shape should be broadcastable to [1, 32, 512]"
    )
    plan = repairs.repair_feature_width(message, InputPlan(), info({"input_ids": (1, 32), "pixel_values": (1, 3, 768, 768)}, "input_ids"))
    assert plan is not None and plan.shape("input_ids") == (16,)  # owlvit, owlv2


def test_spectrogram_features_get_a_channel_dim_of_one():
    message = "Dimension out of range (expected to be in range of [-3, 2], but got 3)"
    plan = repairs.repair_audio_channels(message, InputPlan(), info({"input_features": (1, 64, 128)}, "input_features"))
    assert plan is not None and plan.shape("input_features") == (1, 64, 128)  # clap_audio_model: (B, 1, T, mel)


def test_a_long_time_series_context_is_cut_to_whole_patches_of_the_sequence():
    config = SimpleNamespace(context_length=16384, patch_length=32)
    assert tuple(primitives.input_by_name("past_values", config, 1, 40, "meta", {}).shape) == (1, 64)  # timesfm2_5
    short = SimpleNamespace(context_length=32, num_input_channels=7)
    assert tuple(primitives.input_by_name("past_values", short, 1, 8, "meta", {}).shape) == (1, 32, 7)  # patchtst checks its context


def test_channels_of_our_input_with_its_time_padded_by_the_forward():
    message = "Given groups=1, weight of size [32, 1, 7], expected input[1, 32, 70] to have 1 channels, but got 32 channels instead"
    plan = repairs.repair_stated_size(message, InputPlan(), info({"hidden_states": (1, 32, 64)}, "hidden_states"))
    assert plan is not None and plan.shape("hidden_states") == (1, 64)  # vibevoice_acoustic_tokenizer_encoder


def test_a_parameter_sized_for_our_inputs_trailing_dims():
    message = (
        "Attempting to broadcast a dimension of length 448 at -1! Mismatching argument at index 1 had torch.Size([448, 448]); "
        "but expected shape should be broadcastable to [1, 3, 224, 224]"
    )
    plan = repairs.repair_stated_size(message, InputPlan(), info({"input_ids": (1, 32), "pixel_values": (1, 3, 224, 224)}, "input_ids"))
    assert plan is not None and plan.shape("pixel_values") == (3, 448, 448)  # tvp


def test_ids_where_the_forward_wants_features_become_features():
    message = "Last dimension of the inputs: 32 doesn't correspond to config.d_model: 768. Make sure to set config.d_model appropriately."
    plan = repairs.repair_feature_width(message, InputPlan(), info({"inputs": (1, 32)}, "inputs", ints=("inputs",)))
    assert plan is not None and plan.shape("inputs") == (32, 768) and plan.floats == ("inputs",)  # perceiver


def test_the_layer_norm_message_in_its_cpu_wording():
    message = "Given normalized_shape=[160], expected input with shape [*, 160], but got input of size[1, 80, 128]"
    plan = repairs.repair_feature_width(message, InputPlan(), info({"input_features": (1, 80, 128)}, "input_features"))
    assert plan is not None and plan.shape("input_features") == (80, 160)


def test_a_keyword_the_forward_passes_on_itself_is_dropped_from_the_wrapper():
    from neuronprobe.loaders.hf import InputPlan, InputsInfo
    from neuronprobe.loaders.hf.inputs.repairs import repair_duplicate_keyword

    message = "MimiEncoder.forward() got multiple values for keyword argument 'use_cache'"
    plan = repair_duplicate_keyword(message, InputPlan(), InputsInfo())
    assert plan is not None and plan.dropped == ("use_cache",)
    assert repair_duplicate_keyword(message, plan, InputsInfo()) is None  # learned once
    assert repair_duplicate_keyword("got multiple values for keyword argument 'input_ids'", InputPlan(), InputsInfo()) is None
    assert InputPlan.from_json(plan.to_json()) == plan  # it travels to the xla-cpu worker
