"""Dilated max pools: torch-xla 2.9 has no lowering for max_pool2d_with_indices with dilation != 1
and runs it on the CPU from its autograd kernel (above the Python dispatch key). nn.MaxPool2d reaches
it through F.max_pool2d (torch's boolean_dispatch wrapper), and so does the direct functional call."""

import torch
import torch.nn.functional as F


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, kernel_size=3, padding=1)
        self.pool = torch.nn.MaxPool2d(kernel_size=2, stride=2, dilation=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        z = self.pool(y)  # EXPECT cpu_fallback aten::max_pool2d
        w = F.max_pool2d(y, kernel_size=3, stride=1, dilation=2)  # EXPECT cpu_fallback aten::max_pool2d
        return z.sum() + w.sum()


def get_model() -> torch.nn.Module:
    return Model()


def get_example_inputs() -> tuple:
    return (torch.randn(1, 3, 16, 16),)
