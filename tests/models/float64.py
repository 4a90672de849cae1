"""float64 tensors: torch-xla computes them in float32 on a Neuron device (a precision note, not a compile error)."""
import torch


class Double(torch.nn.Module):
    def forward(self, x):
        y = x.to(torch.float64)  # EXPECT precision aten::to.dtype
        return (y * 3.0).float()


def get_model():
    return Double()


def get_example_inputs():
    return (torch.randn(4, 8),)
