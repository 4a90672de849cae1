"""One tensor is the output of three module calls (the head's, the block's, the model's), and the model
scales it in place after the block returned it: parity measures a tensor returned twice once, and a tensor
changed in place since it was measured again (issue 35.5, the comparison's shortcuts)."""

import torch


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = torch.nn.Linear(16, 64)
        self.head = torch.nn.Linear(64, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.nn.functional.gelu(self.up(x)))  # the block returns its head's tensor as it is


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(16)
        self.block = Block()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.block(self.norm(x))
        return y.mul_(3.0)  # the same tensor, changed after the head and the block returned it


def get_model() -> torch.nn.Module:
    return Model()


def get_example_inputs() -> tuple[torch.Tensor]:
    return (torch.randn(4, 16, generator=torch.Generator().manual_seed(3)),)
