"""A model file that starts a thread that never ends: the command must still end, with its reports."""
import threading
import time

import torch


def _forever():
    while True:
        time.sleep(0.05)


threading.Thread(target=_forever, name="never-ends").start()


class Double(torch.nn.Module):
    def forward(self, x):
        return x * 2


def get_model():
    return Double()


def get_example_inputs():
    return (torch.randn(2, 3),)
