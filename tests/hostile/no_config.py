"""A model file with make_inputs and no config: lengths are bounded by neuronprobe's ceiling (2^20)."""
import torch


class Embed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(100, 4)

    def forward(self, ids):
        return self.emb(ids)


def get_model():
    return Embed()


def get_example_inputs():
    return (torch.zeros(1, 8, dtype=torch.long),)


def make_inputs(batch_size, seq_len):
    return (torch.zeros(batch_size, seq_len, dtype=torch.long),)
