"""scaled_dot_product_attention: on CPU tensors torch picks its CPU flash kernel, a choice the neuron device does
not make; the native-cpu stand-in runs it unrecorded and names it as a limitation instead of a fallback."""

import torch


class Attend(torch.nn.Module):
    def forward(self, q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v)  # EXPECT no observed fallback


def get_model():
    return Attend()


def get_example_inputs():
    return tuple(torch.randn(1, 2, 4, 8) for _ in range(3))
