"""An integer matmul on TorchNeuron: mm has a Neuron kernel, but neuronx-cc computes an integer dot in f32 (NCC_EVRF035 when refused)."""
import torch


class Counts(torch.nn.Module):
    def forward(self, a, b):
        return (a @ b) + 1  # EXPECT compile_error aten::matmul


def get_model():
    return Counts()


def get_example_inputs():
    return (torch.randint(0, 5, (4, 6), dtype=torch.int32), torch.randint(0, 5, (6, 3), dtype=torch.int32))
