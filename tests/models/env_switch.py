"""A model whose forward reads an environment variable: the request's `env` must reach the analysis worker."""
import os

import torch


class EnvSwitch(torch.nn.Module):
    def forward(self, x):
        if os.environ.get("NEURONPROBE_TEST_SWITCH") == "nonzero":
            return torch.nonzero(x > 0).float().sum()  # EXPECT dynamic_shape aten::nonzero
        return (x * 2).sum()


def get_model():
    return EnvSwitch()


def get_example_inputs():
    return (torch.randn(4, 8),)
