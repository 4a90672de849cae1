"""A classifier trained on 1000 examples in batches of 64: the last batch has 40 rows, a new shape."""
import torch


def get_model():
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def get_example_inputs():
    return (torch.randn(64, 16),)


def make_inputs(batch_size, seq_len):
    return (torch.randn(batch_size, 16),)
