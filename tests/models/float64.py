"""float64 tensors: not a Neuron data type."""
import torch


class Double(torch.nn.Module):
    def forward(self, x):
        y = x.to(torch.float64)  # EXPECT compile_error aten::to.dtype
        return (y * 3.0).float()


def get_model():
    return Double()


def get_example_inputs():
    return (torch.randn(4, 8),)
