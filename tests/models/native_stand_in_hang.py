"""A forward that never returns on the native-cpu stand-in (a stand-in for a host loop that hangs there):
the worker must be killed at --timeout and the run end with one sentence."""
import time

import torch
from torch.utils._python_dispatch import _get_current_dispatch_mode


class Model(torch.nn.Module):
    def forward(self, x):
        if type(_get_current_dispatch_mode()).__name__ == "NeuronStandIn":
            time.sleep(3600)  # EXPECT the worker is killed
        return x * 2


def get_model():
    return Model()


def get_example_inputs():
    return (torch.randn(2, 3),)
