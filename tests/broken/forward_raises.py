import torch


class Broken(torch.nn.Module):
    def forward(self, x):
        return x @ torch.randn(3, 3)  # RAISES: shapes (2, 2) and (3, 3) do not multiply


def get_model():
    return Broken()


def get_example_inputs():
    return (torch.randn(2, 2),)
