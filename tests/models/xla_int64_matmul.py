"""A matmul on int64 tensors: torch-xla lowers it to an HLO dot on s64 operands,
which neuronx-cc rejects (NCC_EVRF035). No op falls back: only the HLO shows it."""

import torch


class Model(torch.nn.Module):
    def forward(self, counts: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        scores = counts @ weights  # EXPECT compile_error aten::mm
        return scores + 1


def get_model() -> torch.nn.Module:
    return Model()


def get_example_inputs() -> tuple:
    return (torch.arange(12).reshape(3, 4), torch.ones(4, 2, dtype=torch.long))
