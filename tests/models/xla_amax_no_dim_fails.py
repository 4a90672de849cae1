"""amax() without dim, then a shape only a reduced value has: the XLA run fails after the known defect (issue 33.7)."""
import torch


class PeakToken(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(6, 6)

    def forward(self, x):
        y = self.proj(x)
        peak = y.amax()  # EXPECT compile_error aten::amax
        return y * peak.reshape(1, 1)  # RAISES compile_error <forward on the XLA device>


def get_model():
    return PeakToken()


def get_example_inputs():
    return (torch.randn(2, 6),)
