"""A static-graph model: the same ops at every shape; only the input shape changes.

Every distinct (batch, length) is one more graph under a static compile; padding
to buckets removes all of them but one per bucket.
"""
import torch


class StaticGraph(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(100, 16)
        self.proj = torch.nn.Linear(16, 16)

    def forward(self, input_ids):  # RECOMPILE shape
        return torch.softmax(self.proj(self.embed(input_ids)), dim=-1)


def get_model():
    return StaticGraph()


def get_example_inputs():
    return {"input_ids": torch.randint(0, 100, (1, 8))}


def make_inputs(batch_size, seq_len):
    return {"input_ids": torch.randint(0, 100, (batch_size, seq_len))}
