"""loss.item() logged every step: a device sync and an extra graph execution per step."""
import torch
import torch.nn.functional as F


class Classifier(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))

    def forward(self, x):
        return self.net(x)


def get_model():
    return Classifier()


def get_example_inputs():
    return (torch.randn(8, 16), torch.randint(0, 4, (8,)))


def get_optimizer(model):
    return torch.optim.AdamW(model.parameters(), lr=1e-3)


def train_step(model, optimizer, batch):
    x, y = batch
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    print(f"loss {loss.item():.4f}")  # EXPECT cpu_fallback aten::_local_scalar_dense
