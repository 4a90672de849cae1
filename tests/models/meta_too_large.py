"""A model file whose weights live on the meta device: one 32768 x 32768 float32 projection (4 GiB)
that nothing allocates. The static analysis needs only its shapes; torch-xla would need real weights."""

import torch


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(32768, 32768, bias=False, device="meta")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.proj(x))


def get_model() -> torch.nn.Module:
    return Model()


def get_example_inputs() -> tuple:
    return (torch.randn(2, 32768, device="meta"),)
