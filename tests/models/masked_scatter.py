"""masked_scatter: lowered by torch-xla 2.9 with a dynamically sized source (set-dimension-size), which neuronx-cc
rejects (NCC_EMOD025) although the output shape is static (issue 33.9)."""

import torch


class Fill(torch.nn.Module):
    def forward(self, x, source):
        return x.masked_scatter(x > 0, source)  # EXPECT compile_error aten::masked_scatter


def get_model():
    return Fill()


def get_example_inputs():
    g = torch.Generator().manual_seed(0)
    return (torch.randn(4, 8, generator=g), torch.randn(4, 8, generator=g))
