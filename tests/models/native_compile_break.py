"""A graph break under torch.compile(backend="neuron"): Python dynamo cannot follow (an exception raised only while tracing).

Eagerly the mask is made; while compiling, ``is_compiling()`` is true, the mask stays None and indexing
it raises: export fails and dynamo breaks the graph at the indexing line. fullgraph=True raises there.
"""

import torch


class Gate(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x, mask=None):
        h = self.linear(x)
        if mask is None and not torch.compiler.is_compiling():
            mask = torch.ones(x.shape[0], 8)
        return (h * mask[:, :]).relu()  # EXPECT cpu_fallback <python> (a graph break: fullgraph=True raises here)


def get_model():
    return Gate()


def get_example_inputs():
    return (torch.randn(4, 8),)
