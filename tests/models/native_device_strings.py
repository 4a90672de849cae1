"""A forward written for TorchNeuron's device: `.to("neuron")` and a factory with device="neuron".
On the native-cpu stand-in the neuron device is the CPU; the sort still reaches the device key without a kernel."""

import torch


class OnNeuron(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(16, 16)

    def forward(self, x):
        x = x.to("neuron")
        positions = torch.arange(x.shape[-1], device="neuron")
        values, _ = torch.sort(self.linear(x) + positions, dim=-1)  # EXPECT cpu_fallback aten::sort
        return values


def get_model():
    return OnNeuron()


def get_example_inputs():
    return (torch.randn(4, 16),)
