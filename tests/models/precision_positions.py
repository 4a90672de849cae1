"""Rotary angles from arange(512) cast to the model's dtype: bfloat16 holds integers exactly only up to 256 (issue 25)."""
import torch


class Rotary(torch.nn.Module):
    def __init__(self, dim=8, max_positions=512):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim)))
        self.max_positions = max_positions

    def forward(self, x):
        t = torch.arange(self.max_positions).to(x.dtype)  # EXPECT precision aten::to.dtype
        angles = torch.outer(t, self.inv_freq.to(x.dtype))[: x.shape[1]]
        return x[..., : angles.shape[-1]] * angles.cos() + x[..., angles.shape[-1] :] * angles.sin()


def get_model():
    return Rotary()


def get_example_inputs():
    return (torch.randn(1, 4, 8, generator=torch.Generator().manual_seed(1)),)
