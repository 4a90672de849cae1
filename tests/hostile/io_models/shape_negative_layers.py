"""A config with a negative layer count: refused with the field named, not negative sizes that "fit"."""
from types import SimpleNamespace

import torch


class NegativeLayers(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.config = SimpleNamespace(num_hidden_layers=-4, num_attention_heads=8, hidden_size=256)
        self.w = torch.nn.Parameter(torch.empty(256, 256, device="meta"))


def get_model():
    return NegativeLayers()


def get_example_inputs():
    return ()
