import torch

CONFIG = {"layers": 2}
DEPTH = CONFIG["depth"]  # RAISES: KeyError at import time


def get_model():
    return torch.nn.Linear(2, 2)


def get_example_inputs():
    return (torch.randn(2, 2),)
