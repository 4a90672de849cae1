"""A layer of the package elsewhere; its factor is read from a sibling module (a relative import)."""
import torch

from .factors import FACTOR


class Scale(torch.nn.Module):
    def forward(self, x):
        return x * FACTOR
