"""A boolean-mask read: x[x > 0] has a data-dependent size, so torch-xla 2.9 runs
aten::nonzero on the CPU to find it (and the graph is cut there)."""

import torch


class Model(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * 2
        picked = y[y > 0]  # EXPECT cpu_fallback aten::nonzero
        return picked.sum()


def get_model() -> torch.nn.Module:
    return Model()


def get_example_inputs() -> tuple:
    return (torch.tensor([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]]),)
