"""Audio and speech inputs for ``hf:`` models: the AUDIO family recipes (neuronprobe/loaders/hf/inputs/)
and the repairs learned from audio models' errors (codebook ids, refused ids, a None conv input).

Unit tests run the repairs on the messages real zoo types raised and the recipes on small stand-in
modules (no transformers model built); the end-to-end tests take zoo types that failed before through
the analysis, one layer each.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from neuronprobe.analysis import AnalyzeOptions, analyze_spec
from neuronprobe.loaders import hf
from neuronprobe.loaders.hf import InputPlan, InputsInfo, learn_from_error
from neuronprobe.loaders.hf.inputs import repairs
from neuronprobe.loaders.hf.inputs.families import registered
from neuronprobe.vocabulary import CaptureStrategy


def info(shapes: dict[str, tuple[int, ...]], ints: tuple[str, ...] = (), line: str = "", params: tuple[str, ...] = ()) -> InputsInfo:
    return InputsInfo(
        main_input=next(iter(shapes)),
        shapes=shapes,
        floats=frozenset(n for n in shapes if n not in ints),
        params=params or tuple(shapes),
        line=line,
    )


# --- repairs -------------------------------------------------------------------------------------


def test_ids_a_per_codebook_offset_is_added_to_get_a_codebook_dim():
    message = (
        "Attempting to broadcast a dimension of length 33 at -1! Mismatching argument at index 1 had torch.Size([33]); "
        "but expected shape should be broadcastable to [1, 32]"
    )
    plan = learn_from_error(message, InputPlan(), info({"input_ids": (1, 32)}, ints=("input_ids",)))
    assert plan is not None and plan.shape("input_ids") == (32, 33)  # kyutai_speech_to_text: text + 32 codebooks


def test_codebook_ids_from_the_real_tensor_wording_and_a_dim_of_one_put_in_before():
    message = "The size of tensor a (32) must match the size of tensor b (9) at non-singleton dimension 2"
    line = "tokens = (audio_codes + self.offsets.to(audio_codes.device)).view("
    plan = repairs.repair_codebook_ids(message, InputPlan(), info({"input_ids": (1, 1, 32)}, ints=("input_ids",), line=line))
    assert plan is not None and plan.shape("input_ids") == (32, 9)  # dia_decoder's 9 channels


def test_a_size_mismatch_not_at_an_offset_is_not_a_codebook_error():
    message = "The size of tensor a (32) must match the size of tensor b (9) at non-singleton dimension 2"
    assert repairs.repair_codebook_ids(message, InputPlan(), info({"input_ids": (1, 32)}, ints=("input_ids",), line="x = a + b")) is None


def test_float_features_are_not_codebook_ids():
    message = (
        "Attempting to broadcast a dimension of length 80 at -1! Mismatching argument at index 1 had torch.Size([80]); "
        "but expected shape should be broadcastable to [1, 32]"
    )
    assert repairs.repair_codebook_ids(message, InputPlan(), info({"input_features": (1, 32)})) is None


def test_refused_ids_give_way_to_embeddings():
    shapes = {"input_ids": (1, 32)}
    plan = learn_from_error("`input_ids` is expected to be `None`", InputPlan(), info(shapes, ints=("input_ids",), params=("input_ids", "inputs_embeds")))
    assert plan is not None and plan.dropped == ("input_ids",) and plan.extra == ("inputs_embeds",)  # qwen3_omni_moe code predictor
    assert plan.describe() == "inputs remade after the forward's own errors: inputs_embeds added; input_ids left out"

    class Predictor(torch.nn.Module):
        def forward(self, input_ids: torch.Tensor | None = None, inputs_embeds: torch.Tensor | None = None) -> torch.Tensor:
            raise AssertionError("not called")

    inputs = hf.make_inputs(Predictor(), SimpleNamespace(hidden_size=16, vocab_size=100), 1, 5, "cpu", plan)
    assert set(inputs) == {"inputs_embeds"} and inputs["inputs_embeds"].shape == (1, 5, 16)


def test_a_none_conv_input_is_named_by_the_line():
    message = "conv1d() received an invalid combination of arguments - got (NoneType, Parameter, Parameter, tuple, tuple, tuple, int), but expected one of:"
    shapes = {"input_ids": (1, 32)}
    found = info(shapes, ints=("input_ids",), line="mel_spec = self.mel_conv(input_features)", params=("input_ids", "input_features"))
    plan = learn_from_error(message, InputPlan(), found)
    assert plan is not None and plan.extra == ("input_features",)  # clvp


# --- recipes on stand-in modules --------------------------------------------------------------------


def test_every_audio_recipe_names_the_transformers_source_it_was_learned_from():
    audio_recipes = [r for r in registered() if r.family == "audio"]
    assert len(audio_recipes) == 17
    for recipe in audio_recipes:
        assert any(s.startswith("transformers/models/") for s in recipe.sources), recipe.name


def test_joined_frames_come_with_each_clips_length():
    class Encoder(torch.nn.Module):
        main_input_name = "input_features"

        def forward(self, input_features=None, feature_lens=None, aftercnn_lens=None):  # type: ignore[no-untyped-def]
            raise AssertionError("not called")

    inputs = hf.make_inputs(Encoder(), SimpleNamespace(num_mel_bins=128, max_source_positions=100), 2, 8, "cpu")
    assert inputs["input_features"].shape == (128, 2 * 200)  # (mel, total frames) as qwen2.5-omni's thinker joins them
    assert inputs["feature_lens"].tolist() == [200, 200] and inputs["aftercnn_lens"].tolist() == [100, 100]


def test_chunk_sample_lengths_are_frames_times_the_hop():
    class Encoder(torch.nn.Module):
        main_input_name = "input_features"

        def forward(self, input_features: torch.Tensor, chunk_sample_lengths: torch.Tensor) -> torch.Tensor:
            raise AssertionError("not called")

    inputs = hf.make_inputs(Encoder(), SimpleNamespace(feature_size=128, hop_length=160), 1, 8, "cpu")
    assert inputs["input_features"].shape == (1, 128, 128) and inputs["chunk_sample_lengths"].tolist() == [128 * 160]  # dots3


def test_a_frame_mask_follows_time_major_features():
    class Encoder(torch.nn.Module):
        main_input_name = "input_features"

        def forward(self, input_features: torch.Tensor, input_features_mask: torch.Tensor) -> torch.Tensor:
            raise AssertionError("not called")

    inputs = hf.make_inputs(Encoder(), SimpleNamespace(num_mel_bins=560), 1, 8, "cpu", InputPlan(audio_time_major=True))
    assert inputs["input_features"].shape == (1, 128, 560) and inputs["input_features_mask"].shape == (1, 128)  # fun_asr_nano


def test_codec_features_have_one_frame_per_hop_of_the_raw_audio():
    class Codec(torch.nn.Module):
        main_input_name = "input_values"

        def forward(self, input_values: torch.Tensor, input_features: torch.Tensor, input_features_mask: torch.Tensor | None = None) -> torch.Tensor:
            raise AssertionError("not called")

    config = SimpleNamespace(hop_length=320, semantic_model_config=SimpleNamespace(feature_projection_input_dim=160))
    inputs = hf.make_inputs(Codec(), config, 1, 8, "cpu")
    samples = inputs["input_values"].shape[-1]
    assert inputs["input_values"].shape[:2] == (1, 1) and samples % 320 == 0  # xcodec2, neucodec
    assert inputs["input_features"].shape == (1, samples // 320, 160) and inputs["input_features_mask"].shape == (1, samples // 320)


def test_codebooks_flattened_into_the_batch_for_one_table_per_codebook():
    class Decoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tables = torch.nn.ModuleList(torch.nn.Embedding(10, 4) for _ in range(4))

        def get_input_embeddings(self) -> torch.nn.ModuleList:
            return self.tables

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
            raise AssertionError("not called")

    inputs = hf.make_inputs(Decoder(), SimpleNamespace(num_codebooks=4, vocab_size=10), 2, 6, "cpu")
    assert inputs["input_ids"].shape == (2 * 4, 6) and int(inputs["input_ids"].max()) < 10  # musicgen_decoder


# --- end to end: zoo types that failed before --------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "overrides", "strategy"),
    [
        ("hf:dots3_note_audio_encoder", ["num_hidden_layers=1"], CaptureStrategy.META),  # chunk_sample_lengths
        # joined frames with feature_lens; meta stops partway at a size it cannot make concrete, the CPU runs the rest
        ("hf:qwen3_omni_moe_audio_encoder", ["encoder_layers=1"], CaptureStrategy.CPU_SHRUNK),
        ("hf:musicgen_decoder", ["num_hidden_layers=1"], CaptureStrategy.META),  # codebooks in the batch
        ("hf:speech-encoder-decoder", ["encoder.num_hidden_layers=1", "decoder.num_hidden_layers=1"], CaptureStrategy.META),
        ("hf:qwen3_omni_moe_talker_code_predictor", ["num_hidden_layers=1"], CaptureStrategy.META),  # embeddings, not ids
        ("hf:xcodec2", [], CaptureStrategy.META),  # raw audio and semantic features one frame per hop
    ],
)
def test_audio_zoo_types_that_failed_before_are_analysed(spec: str, overrides: list[str], strategy: CaptureStrategy):
    report = analyze_spec(spec, AnalyzeOptions(backend="static", overrides=overrides))
    assert report.capture.strategy is strategy, report.capture.strategy_reasons
    assert report.summary.ops_total > 50
