"""A model that imports a package from a root elsewhere (tests/models/split_pkgroot): --path or PYTHONPATH (issue 33.2)."""
import torch
from helper import WIDTH
from splitlib.layers import Scale


class WithPackage(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(WIDTH, WIDTH)
        self.scale = Scale()

    def forward(self, x):
        return self.scale(self.proj(x))


def get_model():
    return WithPackage()


def get_example_inputs():
    return (torch.randn(2, WIDTH),)
