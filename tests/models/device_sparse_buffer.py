"""A sparse buffer: the model cannot move to the XLA device (issue 33.7)."""
import torch


class SparseAdjacency(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("adj", torch.eye(8).to_sparse())  # EXPECT compile_error <model.to(device)>
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.proj(torch.sparse.mm(self.adj, x))


def get_model():
    return SparseAdjacency()


def get_example_inputs():
    return (torch.randn(8, 4),)
