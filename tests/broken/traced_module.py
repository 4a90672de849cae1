"""An eval-only model: a torch.jit.trace'd module cannot be trained."""
import torch


def get_model():
    return torch.jit.trace(torch.nn.Linear(8, 4).eval(), torch.randn(2, 8))


def get_example_inputs():
    return (torch.randn(2, 8),)
