"""A model split across files: its folder must be first on sys.path (issue 33.2)."""
import torch
from helper import WIDTH, Block


class Split(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.head = torch.nn.Linear(WIDTH, 3)

    def forward(self, x):
        return self.head(self.block(x))


def get_model():
    return Split()


def get_example_inputs():
    return (torch.randn(2, WIDTH),)
