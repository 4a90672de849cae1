"""A clean model with a traffic stream: five calls, four distinct shapes. torch-xla compiles
one graph per distinct shape (UncachedCompile 4) and reuses it for the repeat."""

import torch


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.proj(x)).sum(dim=-1)


def get_model() -> torch.nn.Module:
    return Model()


def get_example_inputs() -> tuple:
    return (torch.randn(1, 4, 8),)


def sample_inputs():
    for seq in (4, 8, 16, 8, 32):
        yield (torch.randn(1, seq, 8),)
