"""torch.nonzero: the output shape depends on the data."""
import torch


class NonZero(torch.nn.Module):
    def forward(self, x):
        idx = torch.nonzero(x > 0)  # EXPECT dynamic_shape aten::nonzero
        return idx.float().sum()


def get_model():
    return NonZero()


def get_example_inputs():
    return (torch.randn(4, 8),)
