import torch

torch.cuda.synchronize()  # vendored: never audited by default
