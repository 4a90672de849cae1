"""A Python branch on a tensor value: export cannot trace it, a Neuron trace freezes one branch."""
import torch


class Branchy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):
        x = self.proj(x)
        if x.sum() > 0:  # EXPECT control_flow
            return x * 2
        return x - 1


def get_model():
    return Branchy()


def get_example_inputs():
    return (torch.randn(4, 8),)
