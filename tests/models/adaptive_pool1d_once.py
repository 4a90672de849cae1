"""One adaptive average pool whose output (3) does not divide its input (8): the capture records
aten::adaptive_avg_pool1d, which decomposes into aten::_adaptive_avg_pool2d, the op torch-xla runs on the CPU."""

import torch


class Model(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.nn.functional.adaptive_avg_pool1d(x, 3)  # EXPECT cpu_fallback aten::adaptive_avg_pool1d
        return y.sum()


def get_model() -> torch.nn.Module:
    return Model()


def get_example_inputs() -> tuple:
    return (torch.randn(2, 4, 8),)
