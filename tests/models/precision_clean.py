"""The same norm and mask written to survive float16: eps 1e-5, torch.finfo(dtype).min, softmax in float32 (issue 25)."""
import torch


class Model(torch.nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.weight = torch.nn.Parameter(torch.ones(dim))
        self.eps = 1e-5

    def forward(self, x, mask):
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = (q @ k.transpose(-1, -2)).masked_fill(mask[:, None, :] == 0, torch.finfo(x.dtype).min)
        return scores.softmax(dim=-1, dtype=torch.float32).to(x.dtype) @ v


def get_model():
    torch.manual_seed(0)
    return Model()


def get_example_inputs():
    x = torch.randn(2, 4, 8, generator=torch.Generator().manual_seed(1))
    x[0, 0] = 0.0
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    return (x, mask)
