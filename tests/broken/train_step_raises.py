"""A train_step with a bug: it unpacks a batch that is one tensor as (inputs, labels)."""
import torch


def get_model():
    return torch.nn.Linear(8, 4)


def get_example_inputs():
    return (torch.randn(4, 8),)


def train_step(model, optimizer, batch):
    x, y = batch  # RAISES
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
