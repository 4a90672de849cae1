"""A small classifier for the frozen-reference round trip: weights from a checkpoint beside this file when there is one."""
from pathlib import Path

import torch

CHECKPOINT = Path(__file__).with_name("parity_reference_weights.pt")


class Classifier(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Linear(8, 16)
        self.block = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Tanh())
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x):
        h = self.embed(x)
        h = self.block(h)
        return self.head(h)


def get_model():
    torch.manual_seed(0)
    model = Classifier()
    if CHECKPOINT.exists():
        model.load_state_dict(torch.load(CHECKPOINT, weights_only=True))
    return model


def get_example_inputs():
    return (torch.randn(4, 8, generator=torch.Generator().manual_seed(1)),)
