"""Ready-to-paste bucket configuration for the Neuron serving stacks.

Keys and where they are read (facts from the upstream sources, see
../shared/research/anchors.md A.2):

- NxD Inference ``NeuronConfig``: ``enable_bucketing``, ``context_encoding_buckets``,
  ``token_generation_buckets``, ``max_context_length``, ``seq_len``. Its runtime picks the
  first bucket strictly greater than the length (``--fit strict``).
- transformers-neuronx ``from_pretrained``/model kwargs: ``n_positions`` (token-generation
  buckets, a list) and ``context_length_estimate`` (context buckets, a list); it picks the
  first bucket ``>=`` the length (``--fit inclusive``).
- vLLM on Neuron (vllm-neuron plugin, NxD Inference underneath): ``additional_config`` with
  ``override_neuron_config``; the legacy transformers-neuronx path read the
  ``NEURON_CONTEXT_LENGTH_BUCKETS`` / ``NEURON_TOKEN_GEN_BUCKETS`` environment variables.
"""

from __future__ import annotations

import json

CONFIG_NAMES: tuple[str, ...] = ("nxd_inference", "transformers_neuronx", "vllm_neuron", "list")

_TKG_NOTE = (
    "# token_generation_buckets cover prompt + generated tokens: these edges assume the lengths\n"
    "# you gave are total lengths; otherwise run `neuronprobe buckets` on prompt+output lengths.\n"
)


def _fit_note(fit: str, runtime_fit: str, stack: str) -> str:
    if fit == runtime_fit:
        return f"# proposed with --fit {fit}, the rule {stack} uses at runtime\n"
    return (
        f"# note: proposed with --fit {fit}, but {stack} uses the {runtime_fit} rule at runtime;\n# rerun with --fit {runtime_fit} for exact padding numbers\n"
    )


def render_configs(edges: list[int], fit: str) -> dict[str, str]:
    """One snippet per stack in :data:`CONFIG_NAMES`, for the proposed ``edges``."""
    listed = json.dumps(edges)
    top = edges[-1]
    nxdi = (
        _fit_note(fit, "strict", "NxD Inference")
        + _TKG_NOTE
        + "neuron_config = NeuronConfig(\n"
        + "    enable_bucketing=True,\n"
        + f"    context_encoding_buckets={listed},\n"
        + f"    token_generation_buckets={listed},\n"
        + f"    max_context_length={top},\n"
        + f"    seq_len={top},\n"
        + "    # ... your other settings (tp_degree, batch_size, torch_dtype)\n"
        + ")\n"
    )
    tnx = (
        _fit_note(fit, "inclusive", "transformers-neuronx")
        + "model = LlamaForSampling.from_pretrained(  # or your model class\n"
        + "    model_path,\n"
        + f"    n_positions={listed},  # token-generation buckets (prompt + generated)\n"
        + f"    context_length_estimate={listed},  # context-encoding buckets\n"
        + "    # ... batch_size, tp_degree, amp\n"
        + ")\n"
    )
    override = {
        "override_neuron_config": {
            "enable_bucketing": True,
            "context_encoding_buckets": edges,
            "token_generation_buckets": edges,
        }
    }
    csv = ",".join(str(e) for e in edges)
    vllm = (
        _fit_note(fit, "strict", "vllm-neuron (NxD Inference)")
        + _TKG_NOTE
        + f"llm = LLM(model=model_path, max_model_len={top},\n"
        + f"          additional_config={override!r})\n"
        + "# vllm serve: --additional-config '"
        + json.dumps(override)
        + "'\n"
        + "# legacy vLLM Neuron path (transformers-neuronx backend):\n"
        + f"# NEURON_CONTEXT_LENGTH_BUCKETS={csv} NEURON_TOKEN_GEN_BUCKETS={csv}\n"
    )
    return {"nxd_inference": nxdi, "transformers_neuronx": tnx, "vllm_neuron": vllm, "list": csv + "\n"}
