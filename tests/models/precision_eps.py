"""A hand-written RMSNorm with eps 1e-12: 0 in float16, so a zero row divides by zero (issue 25)."""
import torch


class RMSNorm(torch.nn.Module):
    def __init__(self, dim, eps=1e-12):
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
        self.norm = RMSNorm(8)

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
