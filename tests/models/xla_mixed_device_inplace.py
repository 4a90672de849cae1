"""An in-place op on an XLA tensor with a CPU tensor argument (torch.ones without device=):
torch-xla runs it, but not under an aten-level Python dispatch mode (functionalization
rejects it there), so neuronprobe observes this model at the torch-function level and
still places the unique fallback at its line."""

import torch


class Model(torch.nn.Module):
    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        counts = torch.zeros(16, device=ids.device)
        counts.index_put_((ids.flatten(),), torch.ones(ids.numel()), accumulate=True)
        distinct = torch.unique(ids)  # EXPECT cpu_fallback aten::_unique2
        return counts.sum() + distinct.numel()


def get_model() -> torch.nn.Module:
    return Model()


def get_example_inputs() -> tuple:
    return (torch.tensor([[1, 2, 2, 5]]),)
