import torch


def get_model():
    raise ValueError("checkpoint path not set")  # RAISES


def get_example_inputs():
    return (torch.randn(2, 2),)
