"""transformers architectures built from their configs, offline, on the meta device: no false alarms."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from neuronprobe.analysis import AnalyzeOptions, analyze_spec
from neuronprobe.errors import InputError

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.mark.parametrize(
    ("spec", "overrides"),
    [
        ("hf:gpt2", []),
        ("hf:bert", []),
        ("hf:llama", ["num_hidden_layers=2", "hidden_size=256", "intermediate_size=512", "num_attention_heads=4", "num_key_value_heads=2"]),
    ],
)
def test_transformers_models_lower_cleanly(spec, overrides):
    report = analyze_spec(spec, AnalyzeOptions(backend="static", overrides=overrides))
    bad = [f for f in report.findings if f.verdict in ("cpu_fallback", "compile_error")]
    assert bad == [], [(f.op, f.verdict, f.file, f.line) for f in bad]
    assert report.summary.support_percentage == 100.0
    # Attention captured on a CPU machine is not counted as a CPU-only kernel.
    assert any("scaled_dot_product_attention" in r.op for r in report.ops)
    assert report.summary.ops_total > 100


@pytest.mark.parametrize(
    ("spec", "overrides", "main_input"),
    [
        ("hf:t5", ["num_layers=1", "num_decoder_layers=1"], "input_ids"),  # encoder-decoder
        ("hf:vit", ["num_hidden_layers=1"], "pixel_values"),  # images
        ("hf:whisper", ["encoder_layers=1", "decoder_layers=1"], "input_features"),  # audio features
    ],
)
def test_other_architectures_get_their_own_inputs(spec, overrides, main_input):
    from neuronprobe.loaders.resolve import load_model

    loaded = load_model(spec, overrides)
    assert main_input in loaded.kwargs
    report = analyze_spec(spec, AnalyzeOptions(backend="static", overrides=overrides))
    assert [f for f in report.findings if f.verdict in ("cpu_fallback", "compile_error")] == []


def test_set_overrides_change_the_architecture():
    small = analyze_spec("hf:gpt2", AnalyzeOptions(backend="static", overrides=["n_layer=1"]))
    two = analyze_spec("hf:gpt2", AnalyzeOptions(backend="static", overrides=["n_layer=2"]))
    assert two.summary.ops_total > small.summary.ops_total
    assert small.model == "hf_gpt2"


def test_hf_module_paths_and_user_lines_point_into_the_modeling_file():
    report = analyze_spec("hf:gpt2", AnalyzeOptions(backend="static", overrides=["n_layer=1"]))
    attn = next(r for r in report.ops if "scaled_dot_product_attention" in r.op)
    assert any(m.startswith("transformer.h.0") for m in attn.modules), attn.modules


def test_unknown_architecture_and_field_are_input_errors():
    with pytest.raises(InputError, match="unknown transformers model_type"):
        analyze_spec("hf:no_such_arch", AnalyzeOptions(backend="static"))
    with pytest.raises(InputError, match="has no field 'bogus'"):
        analyze_spec("hf:gpt2", AnalyzeOptions(backend="static", overrides=["bogus=1"]))


def test_a_7b_config_allocates_no_weights():
    """Llama's default config is ~6.7B parameters; on the meta device it costs no memory."""
    code = (
        "import resource, neuronprobe\n"
        "r = neuronprobe.analyze('hf:llama', backend='static')\n"
        "print(r.summary.support_percentage, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, r.capture.strategy)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr
    support, rss_kib, strategy = proc.stdout.split()
    assert float(support) == 100.0
    # 6.7B float32 weights would be 27 GB: far below that proves nothing was allocated. The strategy is
    # named so that a run that left the meta device (about 0.5 GB there) says so.
    assert int(rss_kib) < 4 * 1024 * 1024, (strategy, rss_kib, proc.stderr[-2000:])
