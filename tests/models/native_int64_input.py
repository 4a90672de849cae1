"""Token offsets beyond int32 in the example inputs: TorchNeuron computes int64 as int32 and the values wrap."""
import torch


class Offsets(torch.nn.Module):
    def forward(self, x, offsets):
        return x + (offsets % 1000).to(x.dtype)  # EXPECT precision aten::remainder.Scalar


def get_model():
    return Offsets()


def get_example_inputs():
    return (torch.randn(4), torch.tensor([3_000_000_000, 5, 7, 2**40]))
