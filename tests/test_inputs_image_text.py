"""Image-text family inputs (neuronprobe/loaders/hf/inputs/ ``IMAGE_TEXT_RECIPES``), the vision image size a
connector can pool (hf ``_pooled_image_size``) and the optional input a forward misreads (``repair_misread_input``).

Pure tests run a recipe on a config namespace and hand-made inputs, or a repair on the message a zoo type raised;
the end-to-end tests take zoo types that failed before through the analysis, one layer each.
"""

from __future__ import annotations

import inspect
from types import SimpleNamespace

import pytest
import torch

from neuronprobe.analysis import AnalyzeOptions, analyze_spec
from neuronprobe.loaders import hf
from neuronprobe.loaders.hf import InputPlan, InputsInfo
from neuronprobe.loaders.hf import config as hf_config
from neuronprobe.loaders.hf.inputs import families, image_text, primitives, repairs
from neuronprobe.loaders.hf.inputs.recipes import RecipeContext


def params(*names: str) -> dict[str, inspect.Parameter]:
    return {n: inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=None) for n in names}


def notes(report: object) -> list[str]:
    return [lim.why for lim in report.not_analysed if lim.what == "model build"]  # type: ignore[attr-defined]


# --- a vision image size the connector can pool -------------------------------------------------


def test_a_patch_grid_the_connector_cannot_pool_becomes_the_smallest_that_fits():
    config = hf.build_config("gemma3", [])  # 224 px in patches of 16: 14 a side, pooled to 256 tokens = 16 a side
    changes = hf_config.pooled_image_size(config)
    assert config.vision_config.image_size == 256 and changes and "pools by 16" in changes[0]
    config = hf.build_config("modernvbert", [])  # 14 patches a side, pixel_shuffle_factor 4
    hf_config.pooled_image_size(config)
    assert config.vision_config.image_size == 256
    config = hf.build_config("paligemma", [])  # a grid that fits is left alone
    size = config.vision_config.image_size
    assert hf_config.pooled_image_size(config) == [] and config.vision_config.image_size == size


def test_a_users_image_size_is_never_replaced():
    """--set vision_config.image_size=448 on gemma3 (28 patches, not a multiple of 16): the user's size is what runs,
    and if the connector cannot pool it, the forward's own error says so; the tool does not quietly take 512."""
    overrides = ["vision_config.image_size=448", "text_config.num_hidden_layers=1", "vision_config.num_hidden_layers=1"]
    from neuronprobe.loaders.resolve import hf_build_scope

    with hf_build_scope():  # transformers' verbosity back as it was
        loaded = hf.load("gemma3", overrides, seq_len=16, batch=1)
    assert tuple(loaded.kwargs["pixel_values"].shape[-2:]) == (448, 448)
    assert not any("does not fit its connector" in note for note in loaded.notes)


# --- llava: an optional input that sends the forward down a path its model lacks -------------------


def test_an_optional_input_the_forward_misreads_is_left_out():
    line = "(torch.as_tensor(image_sizes, device=image_features.device) // self.vision_tower.patch_size)"
    shapes = {"input_ids": (1, 592), "pixel_values": (1, 3, 336, 336), "image_sizes": (1, 2)}
    info = InputsInfo(main_input="input_ids", shapes=shapes, params=tuple(shapes), line=line, optional=frozenset(shapes))
    message = "'CLIPVisionModel' object has no attribute 'patch_size'"
    plan = repairs.repair_misread_input(message, InputPlan(), info)
    assert plan is not None and plan.dropped == ("image_sizes",)
    assert "image_sizes left out" in (plan.describe() or "")
    assert repairs.repair_misread_input(message, plan, info) is None  # once
    assert repairs.repair_misread_input("'NoneType' object has no attribute 'patch_size'", InputPlan(), info) is None
    required = InputsInfo(main_input="input_ids", shapes=shapes, params=tuple(shapes), line=line)
    assert repairs.repair_misread_input(message, InputPlan(), required) is None  # an input the forward requires stays


# --- recipes on hand-made inputs ---------------------------------------------------------------------


def test_pixel_shuffle_images_get_their_mask_and_the_tokens_the_shuffle_leaves():
    vision = SimpleNamespace(image_size=256, patch_size=32)
    config = SimpleNamespace(vision_config=vision, scale_factor=2, image_token_id=7)
    made = primitives.image_token_count(config, vision)  # what make_inputs put in front of the text
    inputs = {"pixel_values": torch.zeros(1, 1, 3, 256, 256), "input_ids": torch.cat([torch.full((1, made), 7), torch.ones(1, 16, dtype=torch.long)], dim=1)}
    found = image_text.pixel_shuffle_images(RecipeContext(None, config, params("pixel_attention_mask"), 1, 16, "cpu", inputs, InputPlan()))
    assert found is not None and found["pixel_attention_mask"].shape == (1, 1, 256, 256)
    assert int((found["input_ids"] == 7).sum()) == (256 // 32 // 2) ** 2 and found["input_ids"].shape[1] == 16 + 16


def test_kosmos2_text_has_the_image_embedding_positions_its_mask_marks():
    config = SimpleNamespace(latent_query_num=64)
    inputs = {"pixel_values": torch.zeros(1, 3, 224, 224), "input_ids": torch.ones(1, 32, dtype=torch.long)}
    found = image_text.image_positions_mask(RecipeContext(None, config, params("image_embeds_position_mask"), 1, 32, "cpu", inputs, InputPlan()))
    assert found is not None and found["input_ids"].shape == found["image_embeds_position_mask"].shape == (1, 98)
    mask = found["image_embeds_position_mask"][0]
    assert int(mask.sum()) == 64 and mask[0] == 0 and mask[1] == 1 and mask[65] == 0


def test_mllama_tiles_padded_with_their_aspect_ratio():
    config = SimpleNamespace(supported_aspect_ratios=[[1, 1], [1, 2]], max_num_tiles=4, image_size=448, num_channels=3)
    found = image_text.aspect_ratio_tiles(
        RecipeContext(
            None,
            config,
            params("pixel_values", "aspect_ratio_ids", "aspect_ratio_mask"),
            1,
            16,
            "cpu",
            {"pixel_values": torch.zeros(1, 3, 448, 448)},
            InputPlan(),
        )
    )
    assert found is not None and found["pixel_values"].shape == (1, 1, 4, 3, 448, 448)
    assert found["aspect_ratio_ids"].tolist() == [[1]] and found["aspect_ratio_mask"].tolist() == [[[1, 0, 0, 0]]]


def test_gemma4_patches_padded_with_minus_one_positions():
    config = SimpleNamespace(pooling_kernel_size=3, patch_size=16, num_channels=3)
    found = image_text.padded_patch_positions(
        RecipeContext(None, config, params("pixel_values", "pixel_position_ids"), 1, 16, "cpu", {"pixel_values": torch.zeros(1)}, InputPlan())
    )
    assert found is not None and found["pixel_values"].shape == (1, 2520, 768)
    positions = found["pixel_position_ids"][0]
    assert positions[0].tolist() == [0, 0] and positions[1].tolist() == [1, 0] and positions[48].tolist() == [0, 1]
    assert int((positions == -1).all(dim=-1).sum()) == 2520 - 48 * 48


def test_a_second_vision_tower_gets_pixels_at_its_own_size():
    config = SimpleNamespace(high_res_vision_config=SimpleNamespace(image_size=1024, num_channels=3))
    found = image_text.second_vision_tower(
        RecipeContext(None, config, params("pixel_values", "high_res_pixel_values"), 1, 16, "cpu", {"pixel_values": torch.zeros(1)}, InputPlan())
    )
    assert found is not None and found["high_res_pixel_values"].shape == (1, 3, 1024, 1024)


def test_recipes_leave_other_families_alone():
    config = SimpleNamespace(vision_config=SimpleNamespace(image_size=224, patch_size=14), image_token_id=3)
    inputs = {"pixel_values": torch.zeros(1, 3, 224, 224), "input_ids": torch.ones(1, 16, dtype=torch.long)}
    assert families.family_inputs(RecipeContext(None, config, params("input_ids", "pixel_values", "attention_mask"), 1, 16, "cpu", inputs, InputPlan())) == {}


# --- end to end: zoo types that failed before -------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "overrides", "note"),
    [
        ("hf:idefics3", ["vision_config.num_hidden_layers=1", "text_config.num_hidden_layers=1"], "image_size=256"),  # pixel shuffle of 7 patches
        ("hf:gemma3", ["vision_config.num_hidden_layers=1", "text_config.num_hidden_layers=1"], "image_size=256"),  # AvgPool2d of kernel 0
        ("hf:kosmos-2", ["vision_config.num_hidden_layers=1", "text_config.layers=1"], None),  # image_embeds_position_mask
        ("hf:granite_docling", ["text_config.num_hidden_layers=1", "vision_config.num_hidden_layers=1"], None),  # tiles and their mask
    ],
)
def test_image_text_zoo_types_are_analysed_on_meta(spec: str, overrides: list[str], note: str | None):
    report = analyze_spec(spec, AnalyzeOptions(backend="static", overrides=overrides))
    assert report.capture.strategy == "meta", report.capture.strategy_reasons
    assert report.summary.ops_total > 100
    if note:
        assert any("does not fit its connector" in n and note in n for n in notes(report)), notes(report)


def test_llava_with_a_clip_tower_is_analysed_without_image_sizes():
    report = analyze_spec("hf:llava", AnalyzeOptions(backend="static", overrides=["vision_config.num_hidden_layers=1", "text_config.num_hidden_layers=1"]))
    assert report.capture.strategy == "meta" and report.summary.ops_total > 100
    assert any("image_sizes left out" in n for n in notes(report)), notes(report)


def test_minicpm_slices_in_one_row_with_their_grids_and_precomputed_positions():
    config = SimpleNamespace(patch_size=14, image_size=224, num_channels=3)  # a vision tower's own config: no vision_config
    found = image_text.navit_row_patches(
        RecipeContext(None, config, params("pixel_values", "target_sizes"), 2, 16, "meta", {"pixel_values": torch.zeros(1)}, InputPlan())
    )
    assert found is not None and found["pixel_values"].shape == (1, 3, 14, 2 * 16 * 16 * 14)  # 16 patches a side: a multiple of 4
    assert found["target_sizes"].device.type == "cpu" and found["target_sizes"].tolist() == [[16, 16], [16, 16]]  # read as values
    assert found["position_ids"].shape == (2 * 16 * 16,)
    parent = SimpleNamespace(vision_config=config, patch_size=14, image_size=224)  # the full model keeps its own inputs
    assert (
        image_text.navit_row_patches(
            RecipeContext(None, parent, params("pixel_values", "target_sizes"), 1, 16, "meta", {"pixel_values": torch.zeros(1)}, InputPlan())
        )
        is None
    )
