"""sys.exit(0) in forward: once ended neuronprobe with exit 0 and no report."""
import sys

import torch


class Quit(torch.nn.Module):
    def forward(self, x):
        sys.exit(0)  # RAISES


def get_model():
    return Quit()


def get_example_inputs():
    return (torch.randn(2, 3),)
