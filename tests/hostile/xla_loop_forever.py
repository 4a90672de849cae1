"""A forward that never returns, only on the XLA device: --timeout must stop the xla-cpu worker and name this line."""
import torch


class SpinOnDevice(torch.nn.Module):
    def forward(self, x):
        while x.device.type == "xla": x = x + 1  # RAISES  (one line: the stack dump may catch either statement)
        return x * 2


def get_model():
    return SpinOnDevice()


def get_example_inputs():
    return (torch.randn(2, 3),)
