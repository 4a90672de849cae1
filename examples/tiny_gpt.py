"""A tiny GPT-style language model with three habits that hurt on Neuron.

Run ``neuronprobe analyze examples/tiny_gpt.py`` to see them found:
- a token-frequency feature built with ``torch.unique`` (data-dependent shape),
- a scatter-add with ``index_put_(..., accumulate=True)`` (rejected by neuronx-cc),
- a float64 normaliser (compiles, but the device computes it in float32: results differ).
The rest (embeddings, attention, MLP, layer norms) lowers cleanly.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

VOCAB = 512
D_MODEL = 64
N_HEADS = 4
N_LAYERS = 2
MAX_LEN = 256


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(D_MODEL)
        self.qkv = nn.Linear(D_MODEL, 3 * D_MODEL)
        self.proj = nn.Linear(D_MODEL, D_MODEL)
        self.ln2 = nn.LayerNorm(D_MODEL)
        self.mlp = nn.Sequential(nn.Linear(D_MODEL, 4 * D_MODEL), nn.GELU(), nn.Linear(4 * D_MODEL, D_MODEL))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(D_MODEL, dim=-1)
        q, k, v = (z.view(b, t, N_HEADS, D_MODEL // N_HEADS).transpose(1, 2) for z in (q, k, v))
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attn.transpose(1, 2).reshape(b, t, D_MODEL))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tok = nn.Embedding(VOCAB, D_MODEL)
        self.pos = nn.Embedding(MAX_LEN, D_MODEL)
        self.blocks = nn.ModuleList(Block() for _ in range(N_LAYERS))
        self.ln_f = nn.LayerNorm(D_MODEL)
        self.head = nn.Linear(D_MODEL, VOCAB, bias=False)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = self.tok(input_ids) + self.pos(positions)
        # How many distinct tokens each batch uses, as a scalar feature.
        distinct = torch.unique(input_ids).numel()
        x = x * (1.0 + 0.0 * distinct)
        # Count token occurrences with a scatter-add.
        counts = torch.zeros(VOCAB, device=input_ids.device)
        counts.index_put_((input_ids.flatten(),), torch.ones(input_ids.numel()), accumulate=True)
        for block in self.blocks:
            x = block(x)
        scale = x.double().pow(2).mean().sqrt()
        x = x / scale.float()
        return self.head(self.ln_f(x)) + counts.log1p()


def get_model() -> nn.Module:
    torch.manual_seed(0)
    return TinyGPT().eval()


def get_example_inputs() -> tuple[torch.Tensor]:
    return (torch.randint(0, VOCAB, (1, 32)),)


def make_inputs(batch_size: int, seq_len: int) -> tuple[torch.Tensor]:
    return (torch.randint(0, VOCAB, (batch_size, seq_len)),)
