import torch

torch.cuda.synchronize()  # in a virtual environment: never audited
