"""A config with zero attention heads: refused with the field named, not a division by zero."""
from types import SimpleNamespace

import torch


class ZeroHeads(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.config = SimpleNamespace(num_hidden_layers=4, num_attention_heads=0, hidden_size=256)
        self.w = torch.nn.Parameter(torch.empty(256, 256, device="meta"))


def get_model():
    return ZeroHeads()


def get_example_inputs():
    return ()
