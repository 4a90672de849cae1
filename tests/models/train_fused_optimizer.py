"""A fused AdamW: fused=True raises on an XLA device (torch checks the parameters' device)."""
import torch


def get_model():
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def get_example_inputs():
    return (torch.randn(8, 16),)


def get_optimizer(model):
    return torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)  # EXPECT compile_error aten::_fused_adamw_
