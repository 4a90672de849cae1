"""Inputs for the "other" families (neuronprobe/loaders/hf/inputs/ ``OTHER_RECIPES``) and the general fixes
found with them: the return_dict repair, config fields a parent config or a detector leaves unset, backbone image
sizes, bundled dataclass inputs under fake tensors.

Unit tests run each recipe or fix on a config of the shape transformers gives (no model built); the end-to-end
tests take zoo types that failed before through the analysis, one layer each.
"""

from __future__ import annotations

import dataclasses
import inspect
from types import SimpleNamespace

import pytest
import torch

from neuronprobe.analysis import AnalyzeOptions, analyze_spec
from neuronprobe.capture.strategies import fake_value
from neuronprobe.loaders import hf
from neuronprobe.loaders.hf import InputPlan, InputsInfo
from neuronprobe.loaders.hf import config as hf_config
from neuronprobe.loaders.hf.inputs import other, primitives, repairs
from neuronprobe.loaders.hf.inputs.recipes import RecipeContext
from neuronprobe.vocabulary import CaptureStrategy


def params(*names: str) -> dict[str, inspect.Parameter]:
    return {n: inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names}


def recipe(fn, config, names, inputs=None, batch=1, seq=32, device="meta"):
    return fn(RecipeContext(None, config, params(*names), batch, seq, device, inputs or {}, InputPlan()))


# --- recipes ---------------------------------------------------------------------------------


def test_xmod_gets_the_first_language_adapter_per_sequence():
    made = recipe(other.language_adapter_inputs, SimpleNamespace(languages=("en_XX",)), ["input_ids", "lang_ids"], batch=2)
    assert made is not None and made["lang_ids"].shape == (2,) and made["lang_ids"].dtype == torch.long
    assert recipe(other.language_adapter_inputs, SimpleNamespace(), ["input_ids", "lang_ids"]) is None  # no adapters: not X-MOD


def test_a_trajectory_has_three_tokens_a_step_within_the_position_table():
    config = SimpleNamespace(state_dim=17, act_dim=4, n_positions=30, max_ep_len=4096)
    made = recipe(other.trajectory_inputs, config, ["states", "actions", "returns_to_go", "timesteps"], device="cpu")
    assert made is not None
    assert made["states"].shape == (1, 10, 17) and made["actions"].shape == (1, 10, 4) and made["returns_to_go"].shape == (1, 10, 1)
    assert made["timesteps"].tolist() == [list(range(10))]


def test_a_decision_head_reads_one_question_at_the_last_token():
    ids = torch.zeros(1, 32, dtype=torch.long)
    names = ["input_ids", "marks", "num_options", "question_type_ids"]
    made = recipe(other.decision_inputs, SimpleNamespace(), names, {"input_ids": ids}, device="cpu")
    assert made is not None and made["marks"].tolist() == [[32]] and made["num_options"].tolist() == [[2]] and made["question_type_ids"].tolist() == [[0]]


def test_rag_gets_n_docs_contexts_and_their_scores():
    config = SimpleNamespace(n_docs=5, max_combined_length=300, generator=SimpleNamespace(vocab_size=50265))
    made = recipe(other.retrieved_docs_inputs, config, ["input_ids", "context_input_ids", "doc_scores"], batch=2)
    assert made is not None
    assert made["context_input_ids"].shape == (10, 32) and made["context_attention_mask"].shape == (10, 32) and made["doc_scores"].shape == (2, 5)


def test_omdet_class_structure_stays_on_the_cpu_next_to_meta_weights():
    config = SimpleNamespace(text_config=SimpleNamespace(vocab_size=49408, max_position_embeddings=77))
    names = ["pixel_values", "classes_input_ids", "classes_attention_mask", "tasks_input_ids", "tasks_attention_mask", "classes_structure"]
    made = recipe(other.class_prompt_inputs, config, names)
    assert made is not None and made["classes_input_ids"].shape == (2, 77) and made["tasks_input_ids"].shape == (1, 77)
    assert made["classes_structure"].device.type == "cpu" and made["classes_structure"].tolist() == [2]


def test_draft_context_is_the_targets_selected_layers_side_by_side():
    config = SimpleNamespace(target_layer_ids=[1, 13, 25], hidden_size=64, block_size=16)
    made = recipe(other.draft_context_inputs, config, ["noise_embeds", "context_hidden_states"])
    assert made is not None and made["noise_embeds"].shape == (1, 16, 64) and made["context_hidden_states"].shape == (1, 32, 192)


def test_rf_detr_pixels_tile_into_its_windows():
    config = SimpleNamespace(backbone_config=SimpleNamespace(num_windows=4, patch_size=14))
    made = recipe(other.windowed_backbone_pixels, config, ["pixel_values"], {"pixel_values": torch.zeros(1, 3, 518, 518, device="meta")})
    assert made is not None and made["pixel_values"].shape == (1, 3, 560, 560)
    lw_detr = SimpleNamespace(backbone_config=SimpleNamespace(num_windows=16, num_windows_side=4, patch_size=16))
    assert recipe(other.windowed_backbone_pixels, lw_detr, ["pixel_values"], {"pixel_values": torch.zeros(1, 3, 1024, 1024)}) is None


def test_oneformer_task_prompt_is_padded_to_the_task_length():
    made = recipe(other.task_prompt_inputs, SimpleNamespace(task_seq_len=77, text_encoder_vocab_size=49408), ["pixel_values", "task_inputs"])
    assert made is not None and made["task_inputs"].shape == (1, 77)


# --- general fixes ---------------------------------------------------------------------------


def test_return_dict_is_dropped_when_the_forward_reads_its_inner_output_by_attribute():
    line = "hidden_states = self.model(input_ids=input_ids, use_cache=False, **kwargs).last_hidden_state[0]"
    info = InputsInfo(main_input="input_ids", shapes={"input_ids": (1, 32)}, line=line)
    plan = repairs.repair_tuple_output("'tuple' object has no attribute 'last_hidden_state'", InputPlan(), info)
    assert plan is not None and plan.dropped == ("return_dict",)  # jev
    assert repairs.repair_tuple_output("'tuple' object has no attribute 'last_hidden_state'", plan, info) is None
    assert repairs.repair_tuple_output("'tuple' object has no attribute 'shape'", InputPlan(), InputsInfo(line="x = y.shape")) is not None
    assert repairs.repair_tuple_output("'tuple' object has no attribute 'logits'", InputPlan(), InputsInfo(line="x = out[0]")) is None


def test_a_field_only_the_parent_config_sets_is_filled_from_it():
    config = hf.build_config("t5gemma2_text", [])
    assert not hasattr(config, "dropout_rate")
    changes = hf_config.fill_from_parent(config, AttributeError("'T5Gemma2TextConfig' object has no attribute 'dropout_rate'"))
    assert config.dropout_rate == 0.0 and changes and "hf:t5gemma2" in changes[0]
    assert hf_config.fill_from_parent(config, AttributeError("'T5Gemma2TextConfig' object has no attribute 'no_such_field'")) == []


def test_a_detector_without_an_image_size_takes_its_backbones():
    assert primitives._image_size(SimpleNamespace(backbone_config=SimpleNamespace(image_size=1024))) == (1024, 1024)
    assert primitives._image_size(SimpleNamespace(image_size=384, backbone_config=SimpleNamespace(image_size=1024))) == (384, 384)
    assert primitives._image_size(SimpleNamespace()) == (hf.DEFAULT_IMAGE_SIZE, hf.DEFAULT_IMAGE_SIZE)


def test_unset_detector_fields_get_one_value_per_class():
    config = hf.build_config("pp_doclayout_v2", [])
    changes = hf.complete_config(config)
    assert config.class_thresholds == [0.5] * config.num_labels and config.class_order == list(range(config.num_labels))
    assert any(c.startswith("class_order=") for c in changes)


def test_fake_inputs_reach_into_a_bundled_dataclass():
    from neuronprobe._torch.fake_tensor import fake_mode_with_shapes, is_fake

    @dataclasses.dataclass
    class Atoms:
        ref_pos: torch.Tensor
        mask: torch.Tensor

    value = fake_value(fake_mode_with_shapes(), Atoms(torch.zeros(1, 4, 3, device="meta"), torch.ones(1, 4, dtype=torch.bool, device="meta")))
    assert isinstance(value, Atoms) and is_fake(value.ref_pos) and is_fake(value.mask) and value.ref_pos.shape == (1, 4, 3)


# --- end to end: zoo types that failed before --------------------------------------------------


@pytest.mark.parametrize(
    ("model_type", "overrides", "min_ops"),
    [
        ("xmod", ["num_hidden_layers=1"], 70),  # lang_ids
        ("decision_transformer", ["n_layer=1"], 60),  # states, actions, returns_to_go, timesteps
        ("muse_glimmer_assistant", ["num_hidden_layers=1"], 100),  # noise_embeds, context_hidden_states
        ("rag", ["question_encoder.num_hidden_layers=1", "generator.encoder_layers=1", "generator.decoder_layers=1"], 120),
        ("blt_local_encoder", [], 80),  # patch ids and cross-attention mask
        ("t5gemma2_decoder", [], 200),  # dropout_rate from hf:t5gemma2
        ("diffusion_gemma", ["text_config.num_hidden_layers=1", "vision_config.num_hidden_layers=1"], 400),  # unset expert sizes
        ("pi0", ["vlm_config.vision_config.num_hidden_layers=1", "vlm_config.text_config.num_hidden_layers=1", "dit_config.num_hidden_layers=1"], 250),
    ],
)
def test_zoo_types_of_other_families_are_analysed(model_type: str, overrides: list[str], min_ops: int):
    report = analyze_spec(f"hf:{model_type}", AnalyzeOptions(backend="static", overrides=overrides))
    assert report.capture.strategy != CaptureStrategy.NONE
    assert report.summary.ops_total >= min_ops
