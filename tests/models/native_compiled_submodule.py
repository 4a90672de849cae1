"""A submodule compiled with torch.compile(backend="neuron") inside an eager model, as a TorchNeuron user writes it:
the sort in the compiled head reaches the neuron device without a kernel and falls back, inside the graph."""

import torch


class Head(torch.nn.Module):
    def forward(self, x):
        values, _ = torch.sort(x, dim=-1)  # EXPECT cpu_fallback aten::sort
        return values.cumsum(-1)


class Ranked(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(16, 16)
        self.head = torch.compile(Head(), backend="neuron")

    def forward(self, x):
        return self.head(self.linear(x))


def get_model():
    return Ranked()


def get_example_inputs():
    return (torch.randn(4, 16),)
