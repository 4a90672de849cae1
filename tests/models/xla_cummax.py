"""torch.cummax: torch-xla lowers it to one reduce-window over the values and their indices (four operands)."""
import torch


class RunningMax(torch.nn.Module):
    def forward(self, x):
        values, indices = torch.cummax(x, dim=1)  # EXPECT compile_error aten::cummax
        return values * 2, indices


def get_model():
    return RunningMax()


def get_example_inputs():
    return (torch.randn(2, 8),)
