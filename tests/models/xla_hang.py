"""A model that hangs only on the XLA device (a stand-in for a lowering or a host loop that
never returns there): the xla-cpu worker must be stopped by --op-timeout, the report kept."""

import time

import torch


class Model(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.device.type == "xla":
            time.sleep(3600)
        return x * 2


def get_model() -> torch.nn.Module:
    return Model()


def get_example_inputs() -> tuple:
    return (torch.randn(2, 3),)
