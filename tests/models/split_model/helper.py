"""Beside model.py: imported as `from helper import WIDTH, Block`, as `python model.py` would."""
import torch

WIDTH = 12


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(WIDTH, WIDTH)

    def forward(self, x):
        return torch.relu(self.proj(x))
