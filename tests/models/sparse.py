"""Sparse tensors: no Neuron lowering, the ops run on the host."""
import torch


class SparseMM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(8, 4))

    def forward(self, adj):
        sparse = adj.to_sparse()  # EXPECT cpu_fallback aten::to_sparse
        return torch.sparse.mm(sparse, self.weight)  # EXPECT cpu_fallback aten::_sparse_mm


def get_model():
    return SparseMM()


def get_example_inputs():
    return (torch.eye(8),)
