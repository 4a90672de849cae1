"""Mixed precision with a GradScaler: scaler.step reads found_inf on the host every step."""
import torch
import torch.nn.functional as F


def get_model():
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def get_example_inputs():
    return (torch.randn(8, 16), torch.randint(0, 4, (8,)))


scaler = torch.amp.GradScaler("cpu")


def train_step(model, optimizer, batch):
    x, y = batch
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = F.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)  # EXPECT cpu_fallback aten::_local_scalar_dense
    scaler.update()
    optimizer.zero_grad()
