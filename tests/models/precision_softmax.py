"""A softmax and a 4096-term sum computed in the model's dtype, without an upcast (issue 25)."""
import torch


class Pool(torch.nn.Module):
    def forward(self, x):
        weights = x.softmax(dim=-1)  # EXPECT precision aten::softmax.int
        total = x.sum(dim=-1, keepdim=True)  # EXPECT precision aten::sum.dim_IntList
        return weights * total


def get_model():
    return Pool()


def get_example_inputs():
    return (torch.randn(2, 4096, generator=torch.Generator().manual_seed(1)),)
