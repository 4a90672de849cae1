"""An adaptive pool lowers in torch-xla only when the output size divides the input size."""
import torch


class Pools(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.even = torch.nn.AdaptiveAvgPool2d((4, 4))
        self.uneven = torch.nn.AdaptiveAvgPool2d((3, 3))

    def forward(self, x):
        a = self.even(x)  # 8 -> 4: divides, lowers (no finding)
        b = self.uneven(x)  # EXPECT cpu_fallback aten::adaptive_avg_pool2d
        return a.sum() + b.sum()


def get_model():
    return Pools()


def get_example_inputs():
    return (torch.randn(1, 3, 8, 8),)
