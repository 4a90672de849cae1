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

from neuronprobe.vocabulary import Fit

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
        _fit_note(fit, Fit.STRICT, "NxD Inference")
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
        _fit_note(fit, Fit.INCLUSIVE, "transformers-neuronx")
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
        _fit_note(fit, Fit.STRICT, "vllm-neuron (NxD Inference)")
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


def render_decode_configs(
    edges: list[int],
    context_edges: list[int],
    context_top: int,
    batch_buckets: list[int] | None,
    max_batch: int,
    tp_degree: int | None,
    speculation_length: int = 0,
) -> dict[str, str]:
    """JSON configs for decode buckets, one per stack (issue 24).

    NxD Inference ``NeuronConfig`` (models/config.py at 4bcdc54b): ``max_length`` defaults to
    ``seq_len``, the last token-generation bucket must be <= it and the last context bucket
    <= ``max_context_length``; ``token_generation_batches`` must be <= ``tkg_batch_size``
    (= ``batch_size``) and cannot be combined with speculation. vllm-neuron
    (SDK vllm-neuron ``additional-config.md``): ``additional_config["neuron_config"]`` holds
    ``decode_context_length_buckets`` (the edges below ``max_model_len``, multiples of 128; the
    fallback graph is added by the runtime) and ``num_seqs_buckets`` (the batch buckets, the
    largest equal to ``max_num_seqs``). vLLM's NxD Inference path (SDK vllm-user-guide)
    reads ``override_neuron_config`` instead; the ``vllm_nxdi`` snippet has that form.
    """
    top = edges[-1]
    ctx = [e for e in context_edges if e <= context_top] or [context_top]
    seq_len = max(top, ctx[-1])
    batches = sorted(batch_buckets) if batch_buckets and len(batch_buckets) > 1 else None
    nxdi: dict[str, object] = {
        "enable_bucketing": True,
        "context_encoding_buckets": ctx,
        "token_generation_buckets": edges,
        "max_context_length": ctx[-1],
        "seq_len": seq_len,
        "batch_size": max_batch,
    }
    if batches and speculation_length == 0:
        nxdi["token_generation_batches"] = batches
    if speculation_length:
        nxdi["speculation_length"] = speculation_length
    if tp_degree is not None:
        nxdi["tp_degree"] = tp_degree
    override = {k: v for k, v in nxdi.items() if k not in ("seq_len", "batch_size", "tp_degree")}
    plugin: dict[str, object] = {"num_seqs_buckets": batches or [max_batch]}
    below = [e for e in edges if e < top]
    if below:
        plugin["decode_context_length_buckets"] = below
    vllm: dict[str, object] = {"max_model_len": top, "max_num_seqs": max_batch, "additional_config": {"neuron_config": plugin}}
    vllm_nxdi: dict[str, object] = {"max_model_len": top, "max_num_seqs": max_batch, "override_neuron_config": override}
    if tp_degree is not None:
        vllm["tensor_parallel_size"] = tp_degree
        vllm_nxdi["tensor_parallel_size"] = tp_degree
    tnx: dict[str, object] = {"n_positions": edges, "context_length_estimate": ctx, "batch_size": max_batch}
    if tp_degree is not None:
        tnx["tp_degree"] = tp_degree
    # Plain JSON objects, no comment keys: NeuronConfig(**cfg) and LLM(model, **cfg) take them as they are.
    # The runtime whose rule fitted the ladders is named next to them in the console and HTML.
    out = {}
    for name, body in (("nxd_inference", nxdi), ("vllm_neuron", vllm), ("vllm_nxdi", vllm_nxdi), ("transformers_neuronx", tnx)):
        out[name] = json.dumps(body, indent=2) + "\n"
    return out
