"""A Python loop over the sequence length: the traced graph unrolls it, so it differs per length.

Buckets bound the number of graphs, but every bucket compiles a different (longer) graph.
"""
import torch


class LoopOverLength(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = torch.zeros_like(x[:, 0])
        for i in range(x.shape[1]):  # RECOMPILE specialization
            h = torch.tanh(self.cell(x[:, i]) + h)
        return h


def get_model():
    return LoopOverLength()


def get_example_inputs():
    return (torch.randn(1, 4, 8),)


def make_inputs(batch_size, seq_len):
    return (torch.randn(batch_size, seq_len, 8),)
