"""A model whose output is a sparse tensor: its reference is saved by its values and compared (a sparse output was an internal error)."""
import torch


class SparseOut(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x).to_sparse()


def get_model():
    return SparseOut()


def get_example_inputs():
    return (torch.eye(4),)
