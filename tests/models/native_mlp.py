"""Linear + GELU + softmax: every op has a Neuron kernel in TorchNeuron's April-2026 source: no finding."""
import torch


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(16, 32)
        self.down = torch.nn.Linear(32, 16)

    def forward(self, x):
        return torch.softmax(self.down(torch.nn.functional.gelu(self.up(x))), dim=-1)


def get_model():
    return MLP()


def get_example_inputs():
    return (torch.randn(2, 16),)
