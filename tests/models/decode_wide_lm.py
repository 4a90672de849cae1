"""A 30-billion-parameter decoder shape for the memory fit: parameters on the meta device, a transformers-style config."""

from types import SimpleNamespace

import torch


class WideLM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.config = SimpleNamespace(num_hidden_layers=48, num_attention_heads=56, num_key_value_heads=8, hidden_size=7168, head_dim=128)
        self.blocks = torch.nn.Parameter(torch.empty(30_000, 1_000_000, device="meta"))

    def forward(self, x):
        return x


def get_model():
    return WideLM()


def get_example_inputs():
    return (torch.zeros(1, 4),)
