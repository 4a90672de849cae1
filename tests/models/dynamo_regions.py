"""A @torch.no_grad() forward that torch.export cannot capture (a Python branch on a tensor value), so the
dynamo fallback capture runs it, with a torch.cond region inside (issue 33): the ops of both branches are
found at their own lines, and the branch on the value is a graph break at its line."""
import torch


class NoGradBranches(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def _high(self, t):
        return torch.cummin(self.proj(t), dim=1)[0]  # EXPECT cpu_fallback aten::cummin

    def _low(self, t):
        return torch.copysign(t, -1.0)  # EXPECT cpu_fallback aten::copysign.Scalar

    @torch.no_grad()
    def forward(self, x):
        if x.max() > 100:  # EXPECT control_flow
            x = x / 100
        return torch.cond(x.sum() > 0, self._high, self._low, (x,))


def get_model():
    return NoGradBranches()


def get_example_inputs():
    return (torch.randn(4, 8),)
