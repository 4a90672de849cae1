"""index_put_ with accumulate=True: an XLA scatter-add, rejected by neuronx-cc."""
import torch


class ScatterAdd(torch.nn.Module):
    def forward(self, x, idx, y):
        x = x.clone()
        x.index_put_((idx,), y, accumulate=True)  # EXPECT compile_error aten::index_put_
        return x * 2


def get_model():
    return ScatterAdd()


def get_example_inputs():
    return (torch.randn(4, 8), torch.tensor([0, 2, 0]), torch.randn(3, 8))
