"""A forward that allocates without bound: analyze must stop it at --max-memory and name this line."""
import torch

HELD = []


class Hog(torch.nn.Module):
    def forward(self, x):
        while True:
            HELD.append(bytearray(32 * 2**20))  # RAISES
        return x


def get_model():
    return Hog()


def get_example_inputs():
    return (torch.randn(2, 3),)
