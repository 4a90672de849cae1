"""Code that runs only eagerly (guarded by torch.compiler.is_compiling(), as transformers guards its checks):
export and dynamo never see the cumprod, TorchNeuron eager runs it, through the CPU fallback."""

import torch


class Decayed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.linear(x)
        if not torch.compiler.is_compiling():
            h = h * torch.cumprod(torch.full_like(h, 0.9), dim=-1)  # EXPECT cpu_fallback aten::cumprod (observed only)
        return h


def get_model():
    return Decayed()


def get_example_inputs():
    return (torch.randn(2, 8),)
