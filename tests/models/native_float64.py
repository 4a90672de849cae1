"""float64 math on the neuron device: TorchNeuron computes it as float32, silently (dtype_autocast.py)."""
import torch


class Double(torch.nn.Module):
    def forward(self, x):
        return x * 3.0  # EXPECT precision aten::mul.Tensor


def get_model():
    return Double()


def get_example_inputs():
    return (torch.randn(4, 8, dtype=torch.float64),)
