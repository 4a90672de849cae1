"""A model whose boolean-mask write lives in an imported model package (np_model_pkg/prompt.py),
four calls below this forward: the finding belongs there, with this line in its call chain."""

import torch
from np_model_pkg import PromptEncoder


class Segmenter(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.prompt = PromptEncoder()

    def forward(self, points: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.prompt(points, labels) * 2  # CALLER


def get_model() -> torch.nn.Module:
    return Segmenter()


def get_example_inputs() -> tuple:
    return (torch.randn(4, 8), torch.tensor([1, -1, 1, -1]))
