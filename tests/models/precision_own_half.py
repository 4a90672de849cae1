"""A submodule the model casts with ``.half()`` itself: its RMSNorm's eps 1e-8 (torch.finfo(float16).tiny is
6.1e-5, the smallest subnormal 6e-8) rounds to 0 in float16. bfloat16 holds 1e-8, so the default served-bf16
emulation alone never finds it; its own dtype does (issue 33.10)."""

import torch


class RMSNorm(torch.nn.Module):
    def __init__(self, dim, eps=1e-8):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return x * torch.rsqrt(variance + self.eps) * self.weight  # EXPECT precision aten::add.Tensor


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)
        self.norm = RMSNorm(8).half()

    def forward(self, x):
        return self.norm(self.proj(x).half()).float()


def get_model():
    torch.manual_seed(0)
    block = Block()
    with torch.no_grad():
        block.proj.bias.zero_()
    return block


def get_example_inputs():
    x = torch.randn(3, 8, generator=torch.Generator().manual_seed(1))
    x[0] = 0.0
    return (x,)
