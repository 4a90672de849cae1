"""An int64 range beyond int32 (large position ids): TorchNeuron computes int64 as int32 and the values wrap."""
import torch


class Positions(torch.nn.Module):
    def forward(self, x):
        pos = torch.arange(2**31, 2**31 + 8)  # EXPECT precision aten::arange.start
        return x + pos.to(x.dtype)


def get_model():
    return Positions()


def get_example_inputs():
    return (torch.randn(8),)
