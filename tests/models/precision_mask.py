"""An additive attention mask of -1e9: -inf in float16, so a fully masked row's softmax is nan (issue 25)."""
import torch


class Attention(torch.nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.qkv = torch.nn.Linear(dim, 3 * dim)

    def forward(self, x, mask):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = q @ k.transpose(-1, -2) / 8**0.5
        bias = (1.0 - mask[:, None, :]) * -1e9  # EXPECT precision aten::mul.Tensor
        weights = (scores + bias).softmax(dim=-1, dtype=torch.float32).to(x.dtype)
        return weights @ v


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = Attention()

    def forward(self, x, mask):
        return self.attn(x, mask)


def get_model():
    torch.manual_seed(0)
    return Model()


def get_example_inputs():
    x = torch.randn(2, 4, 8, generator=torch.Generator().manual_seed(1))
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0]])  # the second sequence is all padding
    return (x, mask)
