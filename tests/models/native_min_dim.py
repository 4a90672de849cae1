"""min over a dim on TorchNeuron (April 2026): 'min' is registered, min.dim writes through min.dim_min, which has no kernel."""
import torch


class MinMax(torch.nn.Module):
    def forward(self, x):
        low = x.min(dim=-1).values  # EXPECT cpu_fallback aten::min.dim
        high = x.max(dim=-1).values
        return high - low


def get_model():
    return MinMax()


def get_example_inputs():
    return (torch.randn(4, 16),)
