"""torch.compile(backend="neuron") on traffic whose batch size varies: dynamic=True is rejected, so each (batch, length) is its own graph."""

import torch


class Scorer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(64, 8)
        self.head = torch.nn.Linear(8, 2)

    def forward(self, tokens):
        return self.head(self.embed(tokens)).mean(dim=1)


def get_model():
    return Scorer()


def get_example_inputs():
    return (torch.randint(0, 64, (1, 8)),)


# Three batch sizes at length 8, two at 16: 5 signatures, 2 if the batch dim could be freed (it cannot on TorchNeuron).
SAMPLE_SHAPES = ((1, 8), (2, 8), (4, 8), (1, 16), (2, 16), (1, 8))


def sample_inputs():
    for batch, length in SAMPLE_SHAPES:
        yield (torch.randint(0, 64, (batch, length)),)
