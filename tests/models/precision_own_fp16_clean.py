"""The same float16 norm with eps 1e-5, which float16 holds: no finding in the model's own dtype (issue 33.10)."""

import torch


class HalfNorm(torch.nn.Module):
    def forward(self, x):
        h = x.to(torch.float16)
        variance = h.pow(2).mean(-1, keepdim=True)
        return (h * torch.rsqrt(variance + 1e-5)).float()


def get_model():
    return HalfNorm()


def get_example_inputs():
    x = torch.randn(3, 8, generator=torch.Generator().manual_seed(1))
    x[0] = 0.0
    return (x,)
