"""Ops the OpInfo harness saw torch-xla 2.9 run on the CPU while the static rules had them on the device."""
import torch
import torch.nn.functional as F


class Found(torch.nn.Module):
    def forward(self, x):
        low, _ = torch.cummin(x, dim=1)  # EXPECT cpu_fallback aten::cummin
        signed = torch.copysign(x, -1.0)  # EXPECT cpu_fallback aten::copysign.Scalar
        count = torch.norm(x, p=0, dim=1)  # EXPECT cpu_fallback aten::linalg_vector_norm
        noisy = F.rrelu(x, training=False)  # EXPECT cpu_fallback aten::rrelu
        length = torch.norm(x, p=2, dim=1)  # p=2 lowers: no finding
        return low.sum() + signed.sum() + count.sum() + noisy.sum() + length.sum()


def get_model():
    return Found()


def get_example_inputs():
    return (torch.randn(2, 8),)
