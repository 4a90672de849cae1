import torch

def f(:
    return torch.zeros(1).cuda()
