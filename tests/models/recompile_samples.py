"""A static-graph model whose model file brings its own traffic: sample_inputs() yields real calls."""
import torch


class Tagger(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(50, 8)
        self.head = torch.nn.Linear(8, 3)

    def forward(self, tokens, scale=1.0):
        return self.head(self.embed(tokens)) * scale


def get_model():
    return Tagger()


def get_example_inputs():
    return (torch.randint(0, 50, (1, 6)),)


SAMPLE_LENGTHS = (6, 9, 6, 12, 9, 6)


def sample_inputs():
    for n in SAMPLE_LENGTHS:
        yield (torch.randint(0, 50, (1, n)),)
    yield (torch.randint(0, 50, (1, 6)), 2.0)  # a scalar input is baked into the graph
