"""Meta weights, a router that converts itself to float32 in forward, and routing through nonzero.

nonzero has no meta kernel, so the fake strategy runs the model; its
``self.router = self.router.to(torch.float32)`` (switch_transformers' router does
the same) must not stop it: the routing line is the finding.
"""
import torch


class Router(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.router = torch.nn.Linear(8, 4)

    def forward(self, x):
        self.router = self.router.to(torch.float32)
        mask = self.router(x).argmax(-1)
        hit = torch.nn.functional.one_hot(mask, 4).sum(0).nonzero()  # EXPECT dynamic_shape aten::nonzero
        return x.sum() + hit.shape[0]


def get_model():
    with torch.device("meta"):
        return Router()


def get_example_inputs():
    return (torch.randn(6, 8),)
