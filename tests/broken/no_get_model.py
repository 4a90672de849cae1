import torch


def get_example_inputs():
    return (torch.randn(2, 2),)
