"""x[x > 0]: boolean-mask indexing has a data-dependent size."""
import torch


class BoolMask(torch.nn.Module):
    def forward(self, x):
        picked = x[x > 0]  # EXPECT dynamic_shape aten::index.Tensor
        return picked.sum()


def get_model():
    return BoolMask()


def get_example_inputs():
    return (torch.randn(4, 8),)
