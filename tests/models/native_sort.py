"""torch.sort on TorchNeuron (April 2026 source): no Neuron kernel for sort's overloads, so each call runs through the CPU fallback."""
import torch


class Sorter(torch.nn.Module):
    def forward(self, x):
        values, _ = torch.sort(x, dim=-1)  # EXPECT cpu_fallback aten::sort
        return values * 2


def get_model():
    return Sorter()


def get_example_inputs():
    return (torch.randn(4, 16),)
