"""torch.linalg.qr: one of the linalg ops TorchNeuron registers as a CPU fallback on purpose (cpu_fallback_registrations.py)."""
import torch


class QR(torch.nn.Module):
    def forward(self, x):
        q, r = torch.linalg.qr(x)  # EXPECT cpu_fallback aten::linalg_qr
        return q @ r


def get_model():
    return QR()


def get_example_inputs():
    return (torch.randn(8, 8),)
