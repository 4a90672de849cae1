"""--train with a one-element tuple of example inputs: train_step gets that tuple, as the README says."""
import torch


def get_model():
    return torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))


def get_example_inputs():
    return (torch.randn(4, 16),)


def train_step(model, optimizer, batch):
    (x,) = batch  # a bare tensor here would raise "too many values to unpack"
    loss = model(x).pow(2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
