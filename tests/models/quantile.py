"""torch.quantile decomposes into sort, which neuronx-cc does not compile: a composite is only as good as its parts."""
import torch


class Median(torch.nn.Module):
    def forward(self, x):
        q = torch.quantile(x, 0.5, dim=-1)  # EXPECT compile_error aten::quantile.scalar
        return x - q.unsqueeze(-1)


def get_model():
    return Median()


def get_example_inputs():
    return (torch.randn(4, 8),)
