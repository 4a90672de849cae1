"""A forward that lowers cleanly whose backward does not: F.glu lowers, its gradient glu_backward falls back.

Measured on torch-xla 2.9 CPU (scripts/measure_training_xla.py): forward no fallback,
backward aten::glu_backward in executed_fallback_ops.
"""
import torch
import torch.nn.functional as F


class GatedMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(16, 64)
        self.down = torch.nn.Linear(32, 4)

    def forward(self, x):
        h = F.glu(self.up(x), dim=-1)  # EXPECT cpu_fallback aten::glu_backward
        return self.down(h)


def get_model():
    return GatedMLP()


def get_example_inputs():
    return (torch.randn(8, 16),)
