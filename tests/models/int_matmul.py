"""An int64 matmul lowers in torch-xla to a dot on s64, which neuronx-cc rejects (NCC_EVRF035)."""
import torch


class CountPairs(torch.nn.Module):
    def forward(self, a, b):
        counts = a @ b  # EXPECT compile_error aten::matmul
        return counts + 1


def get_model():
    return CountPairs()


def get_example_inputs():
    return (torch.randint(0, 5, (4, 6)), torch.randint(0, 5, (6, 3)))
