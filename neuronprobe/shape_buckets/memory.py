"""Does the compiled model fit in device memory, per tensor-parallel degree? Bytes per NeuronCore.

Per core at TP degree t (a defensible sum; no formula is published, see
shared/research/serving.md "Memory fit"):

- weights: attention Q/O projections with the heads padded to a multiple of t
  (NxD Inference ``get_number_of_extra_heads``), K/V projections for the KV heads each
  rank holds (below), everything else / t. Norms and biases are counted as sharded too
  (they are a rounding error next to the matrices); what every rank holds whole is listed.
- KV cache: K and V, each ``[batch, kv_heads_per_rank, bucket, head_dim]`` per layer
  (NxD Inference ``kvcache/kv_cache_manager.py``), for the largest token-generation
  bucket x the largest batch bucket.
- reserve: runtime microcode (96 MiB per physical core), one 512 MiB scratchpad page
  (SDK ``neuron-runtime/explore/device-memory.rst``: the scratchpad is the largest of any
  loaded graph and grows in 512 MB pages) and a 10% margin of the core's HBM for DMA
  rings, per-graph code and constants, and collectives (not published as a figure:
  transformers-neuronx#49 saw 6.5 GB of DMA rings on a 16 GB core, vllm-neuron's
  ``determine_available_memory`` design asks for an explicit headroom for the same parts).
  ``reserve_bytes`` replaces it when you know better.

KV heads per rank (NxD Inference ``modules/attention/gqa.py`` ``determine_sharding_strategy``
and ``get_shardable_head_counts`` at 4bcdc54b): MHA (KV heads == heads) shards the padded
heads; t divides the KV heads: KV heads / t ("divided"); KV heads < t and t % KV heads == 0:
replicated to t, one per rank ("replicated"); otherwise converted to MHA, padded heads / t
per rank ("padded").

HBM per core and the TP degrees each target allows: SDK NxD Inference api-guide
(``tp_degree``) and the architecture pages: Trn1 and Inf2 have 32 GiB and 2 NeuronCore-v2
per chip (16 GiB per core); Trn2 has 96 GiB per chip, 24 GiB per logical core at LNC=2.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neuronprobe.errors import InputError
from neuronprobe.limits import MAX_CONFIG_SIZE, MAX_MODULE_COUNT
from neuronprobe.report.model import MemoryFit, MemoryRow

GIB = 2**30
MIB = 2**20


@dataclass(frozen=True)
class TargetMemory:
    hbm_bytes_per_core: int
    tp_degrees: tuple[int, ...]


TARGET_MEMORY: dict[str, TargetMemory] = {
    "trn1": TargetMemory(16 * GIB, (1, 2, 8, 16, 32)),
    "inf2": TargetMemory(16 * GIB, (1, 2, 4, 8, 24)),
    "trn2": TargetMemory(24 * GIB, (1, 2, 4, 8, 16, 32, 64)),
}
MICROCODE_BYTES = 96 * MIB
SCRATCHPAD_PAGE_BYTES = 512 * MIB
MARGIN_SHARE = 0.10
RESERVE_SOURCE = (
    "96 MiB runtime microcode + one 512 MiB scratchpad page (SDK neuron-runtime device-memory.rst) + 10% of the core's HBM "
    "for DMA rings, per-graph code and constants, collectives (an assumed margin: no figure is published; "
    "transformers-neuronx#49 saw 6.5 GB of DMA rings on a 16 GB core)"
)
DTYPE_BYTES: dict[str, int] = {"float32": 4, "bfloat16": 2, "float16": 2, "float8": 1, "int8": 1}
# NxD Inference's NeuronConfig torch_dtype when none is given (models/config.py).
DEFAULT_DTYPE = "bfloat16"


@dataclass(frozen=True)
class ModelShape:
    """What the memory fit needs from a model: its size and attention shape, no weights."""

    name: str
    parameters: int
    layers: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    hidden: int

    def kv_bytes_per_token(self, dtype_bytes: int) -> int:
        """K and V of one token, every layer, every KV head (before sharding)."""
        return 2 * self.layers * self.kv_heads * self.head_dim * dtype_bytes


def _attr(config: Any, *names: str) -> Any:
    for name in names:
        value = getattr(config, name, None)
        if value is not None:
            return value
    return None


def _named(config: Any, *names: str) -> tuple[str, Any]:
    """The first of ``names`` the config sets, and its value (the first name and None when none is set)."""
    for name in names:
        value = getattr(config, name, None)
        if value is not None:
            return name, value
    return names[0], None


def shape_from_config(config: Any, parameters: int, name: str) -> ModelShape:
    """Layers, heads, KV heads and head size from a transformers-style config (text config of a multimodal one).

    Every count is checked (at least 1, at most neuronprobe's ceiling) with the config field named:
    zero heads would divide by zero, negative layers would give negative sizes that "fit".
    """
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    layers_field, layers = _named(text, "num_hidden_layers", "n_layer", "num_layers")
    heads_field, heads = _named(text, "num_attention_heads", "n_head", "num_heads")
    hidden_field, hidden = _named(text, "hidden_size", "n_embd", "d_model")
    if not isinstance(layers, int) or not isinstance(heads, int) or not isinstance(hidden, int):
        raise InputError(
            f"{name}: the config does not say its layers, attention heads and hidden size "
            "(num_hidden_layers, num_attention_heads, hidden_size); the memory fit needs them"
        )
    kv_field, kv = _named(text, "num_key_value_heads", "num_kv_heads", "n_head_kv")
    head_dim = _attr(text, "head_dim")
    _check_config_count(name, layers_field, layers, MAX_MODULE_COUNT)
    _check_config_count(name, heads_field, heads, MAX_CONFIG_SIZE)
    _check_config_count(name, hidden_field, hidden, MAX_CONFIG_SIZE)
    if isinstance(kv, int):
        _check_config_count(name, kv_field, kv, MAX_CONFIG_SIZE)
    if isinstance(head_dim, int):
        _check_config_count(name, "head_dim", head_dim, MAX_CONFIG_SIZE)
    elif hidden < heads:
        raise InputError(f"{name}: the config's {hidden_field} {hidden} is smaller than its {heads_field} {heads}; each head needs at least 1")
    return ModelShape(
        name, int(parameters), layers, heads, int(kv) if isinstance(kv, int) else heads, int(head_dim) if isinstance(head_dim, int) else hidden // heads, hidden
    )


def _check_config_count(name: str, field: str, value: int, ceiling: int) -> None:
    """A count of the config (layers, heads, sizes) from 1 to ``ceiling``: zero heads or -4 layers is no model."""
    if isinstance(value, bool) or value < 1:
        raise InputError(f"{name}: the config's {field} is {value}; a count of the model must be at least 1")
    if value > ceiling:
        raise InputError(f"{name}: the config's {field} is {value}; neuronprobe's ceiling for it is {ceiling}")


def load_model_shape(spec: str, overrides: tuple[str, ...] = (), paths: tuple[str, ...] = ()) -> ModelShape:
    """``hf:<model_type>`` (its default config with ``--set`` values) or a model file, built on the meta device.

    ``paths``: ``--path`` folders the model file imports packages from (its own folder comes first).
    """
    import torch

    from neuronprobe.loaders.resolve import HF_PREFIX, hf_build_scope, load_hf, load_model_file

    if spec.startswith(HF_PREFIX):
        model_type = spec[len(HF_PREFIX) :]
        with hf_build_scope():
            loaded = load_hf(model_type, overrides, device="meta")
        module = loaded.module
    else:
        path = Path(spec)
        if path.suffix != ".py":
            raise InputError(f"--model {spec}: give hf:<model_type> or a model file ending in .py")
        with torch.device("meta"):
            module = load_model_file(path, paths=paths).module
    config = getattr(module, "config", None)
    if config is None:
        inner = getattr(module, "inner", None) or getattr(module, "model", None)
        config = getattr(inner, "config", None)
    if config is None:
        raise InputError(
            f"--model {spec}: the model has no .config with its attention shape (num_hidden_layers, num_attention_heads, "
            "num_key_value_heads, hidden_size); give a transformers model or attach such a config"
        )
    params = sum(int(p.numel()) for p in module.parameters())
    return shape_from_config(config, params, spec)


def padded_heads(heads: int, tp: int) -> int:
    """Attention heads padded up to a multiple of the TP degree (NxD Inference ``get_number_of_extra_heads``)."""
    return -(-heads // tp) * tp


def kv_heads_per_rank(tp: int, heads: int, kv_heads: int) -> tuple[int, str]:
    """(KV heads each rank holds, how): "divided", "replicated" or "padded" (module docstring)."""
    if kv_heads == heads:  # MHA: K/V follow the (padded) attention heads
        return padded_heads(heads, tp) // tp, "divided" if heads % tp == 0 else "padded"
    if kv_heads % tp == 0:
        return kv_heads // tp, "divided"
    if tp % kv_heads == 0:  # REPLICATE_TO_TP_DEGREE: kv_heads < tp
        return 1, "replicated"
    return padded_heads(heads, tp) // tp, "padded"  # CONVERT_TO_MHA


def default_reserve(hbm: int) -> int:
    return MICROCODE_BYTES + SCRATCHPAD_PAGE_BYTES + int(MARGIN_SHARE * hbm)


def memory_fit(
    shape: ModelShape,
    target: str,
    bucket: int,
    batch: int,
    dtype: str = DEFAULT_DTYPE,
    reserve_bytes: int | None = None,
) -> MemoryFit:
    """Bytes per core at every TP degree ``target`` allows (module docstring), and the smallest that fits."""
    if target not in TARGET_MEMORY:
        raise InputError(f"--target {target!r}: the memory fit knows {', '.join(TARGET_MEMORY)}")
    if dtype not in DTYPE_BYTES:
        raise InputError(f"--dtype {dtype!r}: use {', '.join(DTYPE_BYTES)}")
    mem = TARGET_MEMORY[target]
    nbytes = DTYPE_BYTES[dtype]
    reserve = default_reserve(mem.hbm_bytes_per_core) if reserve_bytes is None else int(reserve_bytes)
    h, kv, d, hidden, layers = shape.attention_heads, shape.kv_heads, shape.head_dim, shape.hidden, shape.layers
    attn_q_o = layers * 2 * h * d * hidden  # Q and O projections, unpadded
    attn_k_v = layers * 2 * kv * d * hidden
    rest = max(0, shape.parameters - attn_q_o - attn_k_v)
    rows: list[MemoryRow] = []
    replicated: set[str] = set()
    for tp in mem.tp_degrees:
        kv_rank, how = kv_heads_per_rank(tp, h, kv)
        if how == "replicated":
            replicated.add(f"K/V projections and cache at TP >= {tp} ({kv} KV heads: one whole head per rank)")
        weights = (rest // tp + layers * 2 * (padded_heads(h, tp) // tp) * d * hidden + layers * 2 * kv_rank * d * hidden) * nbytes
        per_token_rank = 2 * layers * kv_rank * d * nbytes  # K and V, every layer, this rank's heads
        kv_bytes = per_token_rank * bucket * batch
        total = weights + kv_bytes + reserve
        free = mem.hbm_bytes_per_core - weights - reserve
        longest = free // (per_token_rank * batch) if free > 0 else 0
        largest = free // (per_token_rank * bucket) if free > 0 else 0
        rows.append(
            MemoryRow(
                tp_degree=tp,
                weights_bytes=int(weights),
                kv_bytes=int(kv_bytes),
                reserve_bytes=int(reserve),
                total_bytes=int(total),
                hbm_bytes=mem.hbm_bytes_per_core,
                fits=total <= mem.hbm_bytes_per_core,
                kv_heads_per_rank=kv_rank,
                kv_sharding=how,
                longest_bucket=int(longest) if longest > 0 else None,
                largest_batch=int(largest) if largest > 0 else None,
            )
        )
    smallest = next((r.tp_degree for r in rows if r.fits), None)
    notes = []
    if smallest is None:
        best = min(rows, key=lambda r: r.total_bytes)
        notes.append(
            f"fits at no TP degree {target} allows: at TP {best.tp_degree} a core needs {best.total_bytes / GIB:.2f} GiB "
            f"({best.weights_bytes / GIB:.2f} weights + {best.kv_bytes / GIB:.2f} KV + {best.reserve_bytes / GIB:.2f} reserve) of "
            f"{mem.hbm_bytes_per_core / GIB:.0f} GiB"
        )
    return MemoryFit(
        model=shape.name,
        target=target,
        hbm_bytes_per_core=mem.hbm_bytes_per_core,
        dtype=dtype,
        layers=layers,
        attention_heads=h,
        kv_heads=kv,
        head_dim=d,
        parameters=shape.parameters,
        kv_bytes_per_token=shape.kv_bytes_per_token(nbytes),
        bucket=int(bucket),
        batch=int(batch),
        reserve_bytes=int(reserve),
        reserve_source=RESERVE_SOURCE if reserve_bytes is None else "--reserve-gib",
        rows=rows,
        smallest_tp=smallest,
        replicated=sorted(replicated),
        notes=notes,
    )


def step_bytes(fit: MemoryFit, tp: int) -> tuple[float, float]:
    """(weight bytes, KV bytes per token of one sequence) a core reads per decode step at ``tp``."""
    row = next(r for r in fit.rows if r.tp_degree == tp)
    per_token = 2 * fit.layers * row.kv_heads_per_rank * fit.head_dim * DTYPE_BYTES[fit.dtype]
    return float(row.weights_bytes), float(per_token)
