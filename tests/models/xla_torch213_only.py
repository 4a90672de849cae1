"""A model that only runs under torch 2.13: F.linear_cross_entropy does not exist in torch 2.9,
the xla-cpu backend's torch. The static backend analyses it; xla-cpu says so, exit 2."""

import torch
import torch.nn.functional as F


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.head = torch.nn.Parameter(torch.randn(10, 8))

    def forward(self, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.linear_cross_entropy(x, self.head, target)


def get_model() -> torch.nn.Module:
    return Model()


def get_example_inputs() -> tuple:
    return (torch.randn(4, 8), torch.tensor([1, 2, 3, 4]))
