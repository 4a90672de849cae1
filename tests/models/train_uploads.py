"""Eighteen targets built on the host and moved to the device in each step, one .item(): torch-xla 2.9
counts 18 host-to-device transfers, 1 device-to-host transfer and 2 graph executions (issue 33)."""
import torch
import torch.nn.functional as F


def get_model():
    return torch.nn.Linear(16, 4)


def get_example_inputs():
    return (torch.randn(18, 16),)


def train_step(model, optimizer, batch):
    (x,) = batch
    targets = [torch.tensor([0.0, 0.0, 1.0, 1.0]).to(x.device) for _ in range(18)]  # UPLOAD
    loss = F.l1_loss(model(x), torch.stack(targets))
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss.item()  # EXPECT cpu_fallback aten::_local_scalar_dense
