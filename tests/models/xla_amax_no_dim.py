"""amax() without dim: a known torch-xla 2.9 defect returns the input unreduced (issue 33.7)."""
import torch


class MaxScaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(6, 6)

    def forward(self, x):
        y = self.proj(x)
        return y / y.abs().amax()  # EXPECT compile_error aten::amax


def get_model():
    return MaxScaled()


def get_example_inputs():
    return (torch.randn(2, 6),)
