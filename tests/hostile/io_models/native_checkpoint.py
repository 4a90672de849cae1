"""Reads its weights with safetensors: Rust opens the file, so no audit event tells the result cache.

Its width comes from the checkpoint beside it: a changed checkpoint is a changed model.
"""
import os

import torch
from safetensors.torch import load_file

HERE = os.path.dirname(os.path.abspath(__file__))


def get_model():
    weight = load_file(os.path.join(HERE, "w.safetensors"))["w"]
    layer = torch.nn.Linear(4, weight.shape[0])
    with torch.no_grad():
        layer.weight.copy_(weight)
    return layer


def get_example_inputs():
    return (torch.zeros(2, 4),)
