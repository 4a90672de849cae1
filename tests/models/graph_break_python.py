"""A graph break on Python dynamo cannot follow: an exception raised only while tracing (transformers' pattern).

Eagerly the mask is made; under export and dynamo ``is_compiling()`` is true, the
mask stays None and indexing it raises. Export fails, dynamo breaks the graph at
the indexing line and runs the frames the exception passes through eagerly (the
submodules they call are compiled on their own): the break is the finding.
"""
import torch


class Mask(torch.nn.Module):
    def forward(self, x, mask=None):
        if mask is None and not torch.compiler.is_compiling():
            mask = torch.ones(x.shape[0], 8)
        return x * mask[:, :]  # EXPECT cpu_fallback <python the graph capture cannot follow>


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x):
        return self.linear(x).relu()


class Masked(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = Block()
        self.mask = Mask()
        self.head = Block()

    def forward(self, x):
        return self.head(self.mask(self.proj(x)))


def get_model():
    return Masked()


def get_example_inputs():
    return (torch.randn(4, 8),)
