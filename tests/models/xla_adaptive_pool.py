"""An adaptive average pool whose output size (3) does not divide its input (8): torch-xla 2.9
runs _adaptive_avg_pool2d on the CPU for it, while the even pool (4) lowers."""

import torch


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)
        self.even = torch.nn.AdaptiveAvgPool1d(4)
        self.odd = torch.nn.AdaptiveAvgPool1d(3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.proj(x)
        a = self.even(y)
        b = self.odd(y)  # EXPECT cpu_fallback aten::_adaptive_avg_pool2d
        return a.sum() + b.sum()


def get_model() -> torch.nn.Module:
    return Model()


def get_example_inputs() -> tuple:
    return (torch.randn(2, 4, 8),)
