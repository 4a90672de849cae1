"""Mixture-of-experts routing through nonzero, captured by dynamo: the routing op runs between graphs.

The scale helper raises only while tracing (as transformers' mask code does without an
attention mask), so export fails and dynamo captures the model; dynamo breaks the graph
at ``nonzero`` and runs it eagerly between two graphs, where it is in no captured graph.
"""
import torch


class Scale(torch.nn.Module):
    def forward(self, x, scale=None):
        if scale is None and not torch.compiler.is_compiling():
            scale = torch.ones(1)
        return x * scale[0]


class Experts(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.router = torch.nn.Linear(8, 4)
        self.experts = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(4))

    def forward(self, x):
        mask = torch.nn.functional.one_hot(self.router(x).argmax(-1), 4)
        out = torch.zeros_like(x)
        hit = mask.sum(0).nonzero()  # EXPECT dynamic_shape aten::nonzero
        for e in hit:
            rows = mask[:, e[0]].bool()
            out[rows] = self.experts[int(e[0])](x[rows])
        return out


class Routed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = Scale()
        self.moe = Experts()

    def forward(self, x):
        return self.moe(self.scale(x))


def get_model():
    return Routed()


def get_example_inputs():
    return (torch.randn(6, 8),)
