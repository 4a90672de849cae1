"""torch.unique: data-dependent output size, no XLA lowering."""
import torch


class Unique(torch.nn.Module):
    def forward(self, ids):
        vocab = torch.unique(ids)  # EXPECT dynamic_shape aten::_unique2
        return vocab.float().mean()


def get_model():
    return Unique()


def get_example_inputs():
    return (torch.tensor([[3, 1, 3, 7], [1, 1, 2, 9]]),)
