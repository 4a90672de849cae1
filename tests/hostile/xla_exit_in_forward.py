"""sys.exit(0) in forward, only on the XLA device: the model's own exit under --backend xla-cpu, not a compile error."""
import sys

import torch


class QuitOnDevice(torch.nn.Module):
    def forward(self, x):
        if x.device.type == "xla":
            sys.exit(0)  # RAISES
        return x * 2


def get_model():
    return QuitOnDevice()


def get_example_inputs():
    return (torch.randn(2, 3),)
