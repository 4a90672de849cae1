"""Constants the graph holds as tensors (torch.tensor(-1e9), torch.tensor(1e-12)): read from the user's line (issue 25)."""
import torch


class Model(torch.nn.Module):
    def forward(self, x, mask):
        scores = x.masked_fill(mask == 0, torch.tensor(-1e9))  # EXPECT precision aten::masked_fill.Tensor
        return scores * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + torch.tensor(1e-12))  # EXPECT precision aten::add.Tensor


def get_model():
    return Model()


def get_example_inputs():
    return (torch.randn(2, 4, generator=torch.Generator().manual_seed(1)), torch.tensor([[1.0, 1.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0]]))
