"""train_step() calls a model whose forward branches on a tensor value: control_flow in the forward phase."""
import torch


class Branchy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):
        x = self.proj(x)
        if x.sum() > 0:  # EXPECT control_flow
            return x * 2
        return x - 1


def get_model():
    return Branchy()


def get_example_inputs():
    return (torch.randn(4, 8), torch.randn(4, 8))


def train_step(model, optimizer, batch):
    x, y = batch
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
