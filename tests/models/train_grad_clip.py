"""Gradient clipping between backward and step: its ops belong to the optimizer phase and lower."""
import torch
import torch.nn.functional as F


def get_model():
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))


def get_example_inputs():
    return (torch.randn(8, 16), torch.randint(0, 4, (8,)))


def get_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)


def train_step(model, optimizer, batch):
    x, y = batch
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)  # clipping: optimizer phase
    optimizer.step()
    optimizer.zero_grad()
