"""A decoder whose config lives in a package elsewhere: `buckets --decode --model` imports it with --path (issue 33.2)."""
import torch
from helper import WIDTH
from splitlib.shapes import CONFIG


class SmallLM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.config = CONFIG
        self.embed = torch.nn.Embedding(100, CONFIG.hidden_size)
        self.head = torch.nn.Linear(CONFIG.hidden_size, WIDTH)

    def forward(self, ids):
        return self.head(self.embed(ids))


def get_model():
    return SmallLM()


def get_example_inputs():
    return (torch.zeros(1, 4, dtype=torch.long),)
