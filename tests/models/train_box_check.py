"""A training step that raises on invalid boxes: the fake step's stand-in for the check reads False, so
the step runs again on the example batch with real tensors, where the boxes are valid (issue 33)."""
import torch
import torch.nn.functional as F


def get_model():
    return torch.nn.Linear(4, 4)


def get_example_inputs():
    return (torch.tensor([[0.0, 0.0, 1.0, 1.0]] * 3), torch.zeros(3, 4))


def train_step(model, optimizer, batch):
    boxes, target = batch
    if not bool((boxes[:, 2:] > boxes[:, :2]).all()):  # EXPECT control_flow
        raise ValueError("degenerate boxes")
    loss = F.mse_loss(model(boxes), target)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
