"""A forward that allocates without bound, only on the XLA device: --max-memory counts the xla-cpu worker too."""
import torch

HELD = []


class HogOnDevice(torch.nn.Module):
    def forward(self, x):
        while x.device.type == "xla":
            HELD.append(bytearray(32 * 2**20))  # RAISES
        return x * 2


def get_model():
    return HogOnDevice()


def get_example_inputs():
    return (torch.randn(2, 3),)
