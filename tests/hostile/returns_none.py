"""A forward that returns None: nothing to compile, not "runs on Neuron as it is"."""
import torch


class Nothing(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(3, 3)

    def forward(self, x):  # RAISES
        self.proj(x)
        return None


def get_model():
    return Nothing()


def get_example_inputs():
    return (torch.randn(2, 3),)
