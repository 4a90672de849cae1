"""--train on a model whose output has no gradient path (argmax of the logits)."""
import torch


class Argmax(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 4)

    def forward(self, x):
        return self.proj(x).argmax(-1)


def get_model():
    return Argmax()


def get_example_inputs():
    return (torch.randn(2, 8),)
