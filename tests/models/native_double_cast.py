"""A cast to float64 and back: eagerly both go through the host (cast_policy.py); in a torch.compile graph the
dtype-conversion pass makes float64 float32, so the casts stay on the device and are a precision note."""

import torch


class Promote(torch.nn.Module):
    def forward(self, x):
        wide = x.double() * 1e-3  # EXPECT cpu_fallback aten::to.dtype (eager), precision (compile)
        return wide.float()


def get_model():
    return Promote()


def get_example_inputs():
    return (torch.randn(4, 8),)
