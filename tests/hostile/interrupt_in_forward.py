"""A KeyboardInterrupt raised by the model is the model's failure, not the user pressing Ctrl-C."""
import torch


class Interrupt(torch.nn.Module):
    def forward(self, x):
        raise KeyboardInterrupt  # RAISES


def get_model():
    return Interrupt()


def get_example_inputs():
    return (torch.randn(2, 3),)
