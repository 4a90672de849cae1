"""x[mask] = v: a boolean-mask write becomes nonzero() on the host under torch-xla (data-dependent)."""
import torch


class ClampNegatives(torch.nn.Module):
    def forward(self, x):
        y = x.clone()
        y[y < 0] = 0.0  # EXPECT dynamic_shape aten::index_put_
        return y * 2


def get_model():
    return ClampNegatives()


def get_example_inputs():
    return (torch.randn(4, 8),)
