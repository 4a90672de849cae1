"""--train through a boolean mask: a data-dependent size in the forward, an index_put in the backward."""
import torch


class Masked(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.lin(x)
        return h[h > 0].sum()  # EXPECT dynamic_shape aten::index.Tensor


def get_model():
    return Masked()


def get_example_inputs():
    return (torch.randn(4, 8),)
