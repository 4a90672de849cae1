"""Static and observed disagree, one line each way: export traces the compiling branch, TorchNeuron eager runs the other.

Line A: the capture sees cumsum (a Neuron kernel), eager runs cumprod (no kernel: a CPU fallback).
Line B: the capture sees cumprod (predicted to fall back), eager runs cumsum (a Neuron kernel)."""

import torch


class Branchy(torch.nn.Module):
    def forward(self, x):
        a = torch.cumsum(x, -1) if torch.compiler.is_compiling() else torch.cumprod(x, -1)  # EXPECT lowered aten::cumsum (eager: cumprod falls back)
        b = torch.cumprod(a, -1) if torch.compiler.is_compiling() else torch.cumsum(a, -1)  # EXPECT cpu_fallback aten::cumprod (eager: cumsum runs)
        return b


def get_model():
    return Branchy()


def get_example_inputs():
    return (torch.randn(2, 8),)
