"""A cast to int64 inside a loop: every cast to or from a 64-bit dtype goes through the host (cast_policy.py)."""
import torch


class Loop(torch.nn.Module):
    def forward(self, x):
        out = x
        for _ in range(3):
            idx = (out * 4).long()  # EXPECT cpu_fallback aten::to.dtype
            out = out + idx.float()
        return out


def get_model():
    return Loop()


def get_example_inputs():
    return (torch.randn(4, 4),)
