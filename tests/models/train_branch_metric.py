"""A Python branch on a metric in the training step: a host read every step, and two possible graphs."""
import torch
import torch.nn.functional as F


def get_model():
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def get_example_inputs():
    return (torch.randn(8, 16), torch.randint(0, 4, (8,)))


def train_step(model, optimizer, batch):
    x, y = batch
    loss = F.cross_entropy(model(x), y)
    if loss > 10.0:  # EXPECT control_flow
        loss = loss * 0.1
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
