"""A plain MLP: everything lowers."""
import torch


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32), torch.nn.Linear(32, 4)
        )

    def forward(self, x):
        return torch.softmax(self.net(x), dim=-1)


def get_model():
    return MLP()


def get_example_inputs():
    return (torch.randn(2, 16),)


def make_inputs(batch_size, seq_len):
    return (torch.randn(batch_size, 16),)
