"""A training step on TorchNeuron: cumprod has no Neuron kernel: its forward falls back, and its backward reaches the device key too."""

import torch


class Ranker(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(16, 16)

    def forward(self, x):
        h = torch.cumprod(self.linear(x), dim=-1)  # EXPECT cpu_fallback aten::cumprod (forward and backward)
        return h


def get_model():
    return Ranker()


def get_example_inputs():
    return (torch.randn(4, 16),)
