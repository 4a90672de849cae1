"""A norm the model itself computes in float16 (its own ``.to(torch.float16)``), with eps 1e-12: 0 in float16, so
the zero row divides by zero on every device. Found by a plain ``neuronprobe parity`` (issue 33.10)."""

import torch


class HalfNorm(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(dim))

    def forward(self, x):
        h = x.to(torch.float16)
        variance = h.pow(2).mean(-1, keepdim=True)
        h = h * torch.rsqrt(variance + 1e-12)  # EXPECT precision aten::add.Tensor
        return h.float() * self.weight


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)
        self.norm = HalfNorm(8)

    def forward(self, x):
        return self.norm(self.proj(x))


def get_model():
    torch.manual_seed(0)
    block = Block()
    with torch.no_grad():  # the projection maps the first row to 0: a zero-variance row reaches the norm
        block.proj.bias.zero_()
    return block


def get_example_inputs():
    x = torch.randn(3, 8, generator=torch.Generator().manual_seed(1))
    x[0] = 0.0
    return (x,)
