"""A forward that never returns: analyze must stop it at --timeout and name this line."""
import torch


class Spin(torch.nn.Module):
    def forward(self, x):
        while True: x = x + 1  # RAISES  (one line: the stack dump may catch either statement)


def get_model():
    return Spin()


def get_example_inputs():
    return (torch.randn(2, 3),)
