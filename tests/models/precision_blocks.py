"""Two blocks share one RMSNorm line (eps 1e-12); only the second gets a zero row, so only there it matters in fp16 (issue 25)."""
import torch


class RMSNorm(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-12) * self.weight  # EXPECT precision aten::add.Tensor


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norms = torch.nn.ModuleList([RMSNorm(8), RMSNorm(8)])
        self.gate = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.norms[0](x)
        return self.norms[1](self.gate(h))


def get_model():
    model = Model()
    with torch.no_grad():  # the gate closes: the second norm sees only zero rows
        model.gate.weight.zero_()
        model.gate.bias.zero_()
    return model


def get_example_inputs():
    return (torch.randn(2, 8, generator=torch.Generator().manual_seed(1)),)
