"""Complex tensors: rejected by the Neuron compiler (NCC_EVRF004) in every release the torch-xla path runs on (issue 33.9)."""
import torch


class Rotate(torch.nn.Module):
    def forward(self, x):
        z = torch.view_as_complex(x)  # EXPECT compile_error aten::view_as_complex
        return torch.view_as_real(z * 1j)  # EXPECT compile_error aten::mul.Tensor


def get_model():
    return Rotate()


def get_example_inputs():
    return (torch.randn(4, 8, 2),)
