"""A wrapper around a complex-valued selective scan from an imported model package: the complex
multiply is at np_model_pkg/scan.py's step line (run once per step), not at this wrapper's line."""

import torch
from np_model_pkg import SelectiveScan


class Wrapper(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scan = SelectiveScan()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.scan(x).sum(-1)  # CALLER


def get_model() -> torch.nn.Module:
    return Wrapper()


def get_example_inputs() -> tuple:
    return (torch.randn(2, 5, 4, 2),)
