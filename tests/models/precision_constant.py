"""Float32 constants in a low-precision path: 1e5 overflows float16, 1.0001 is 1 in both float16 and bfloat16 (issue 25)."""
import torch


class Scale(torch.nn.Module):
    def forward(self, x):
        y = x * 1e5  # EXPECT precision aten::mul.Tensor
        return y.tanh() * 1.0001  # EXPECT precision aten::mul.Tensor


def get_model():
    return Scale()


def get_example_inputs():
    return (torch.randn(2, 8, generator=torch.Generator().manual_seed(1)),)
