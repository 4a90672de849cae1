"""A model whose output (and so its training loss) is NaN: the parity report must still be JSON."""
import torch


class NanNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(2, 2)

    def forward(self, x):
        return self.fc(x) * float("nan")  # RAISES no error: every value is NaN


def get_model():
    return NanNet()


def get_example_inputs():
    return (torch.ones(2, 2),)
