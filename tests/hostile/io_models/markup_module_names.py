"""Module names holding Rich markup and HTML, one of them past the tolerance: parity names it on the console."""
import torch


class Cancel(torch.nn.Module):
    def forward(self, x):
        return (x + 1000.0) - 1000.0  # in bf16 (auto-cast all) x is lost: this module is past the tolerance


class Marked(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.add_module("[/bold][red]x<img src=x onerror=alert(1)>", Cancel())
        self.add_module("[link=javascript:x]y[/link]", torch.nn.Linear(8, 8))

    def forward(self, x):
        for m in self.children():
            x = m(x)
        return x


def get_model():
    return Marked()


def get_example_inputs():
    return (torch.randn(4, 8),)
