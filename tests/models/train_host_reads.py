"""Other host reads in a training loop: print(tensor), .cpu() and .tolist() each sync the device every step."""
import torch
import torch.nn.functional as F


def get_model():
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def get_example_inputs():
    return (torch.randn(8, 16), torch.randint(0, 4, (8,)))


def train_step(model, optimizer, batch):
    x, y = batch
    logits = model(x)
    loss = F.cross_entropy(logits, y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    print(loss)  # EXPECT cpu_fallback <print(tensor)>
    history = loss.detach().cpu()  # EXPECT cpu_fallback <tensor.cpu()>
    predictions = logits.argmax(-1).tolist()  # EXPECT cpu_fallback <tensor.tolist()>
    return history, predictions
