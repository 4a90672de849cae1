"""A classifier whose top-1 flips when matmul inputs are rounded to bf16 (--auto-cast matmult), and not without it.

The score is a difference of two large activations (1001 - 1000): bf16 keeps 8 significant bits,
so 1001 rounds to 1000 and the difference vanishes; the bias then decides the class.
"""
import torch


class Scorer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.pre = torch.nn.ReLU()
        self.score = torch.nn.Linear(2, 2)
        with torch.no_grad():
            self.score.weight.copy_(torch.tensor([[1.0, -1.0], [-1.0, 1.0]]))
            self.score.bias.copy_(torch.tensor([0.0, 0.5]))

    def forward(self, x):
        h = self.pre(x)
        return self.score(h)


def get_model():
    return Scorer()


def get_example_inputs():
    return (torch.tensor([[1001.0, 1000.0]]),)
