"""A forward that returns a string: nothing to compile."""
import torch


class Words(torch.nn.Module):
    def forward(self, x):  # RAISES
        return "done"


def get_model():
    return Words()


def get_example_inputs():
    return (torch.randn(2, 3),)
