"""A Python branch on the sequence length: one graph below the threshold, another above it."""
import torch

LONG = 64


class BranchOnLength(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)
        self.long_proj = torch.nn.Linear(8, 8)

    def forward(self, x):
        y = self.proj(x)
        if x.shape[1] > LONG:  # RECOMPILE branch
            y = self.long_proj(y).relu()
        return y.sum(dim=1)


def get_model():
    return BranchOnLength()


def get_example_inputs():
    return (torch.randn(1, 16, 8),)


def make_inputs(batch_size, seq_len):
    return (torch.randn(batch_size, seq_len, 8),)
