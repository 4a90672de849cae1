import torch

x = torch.zeros(1).cuda()  # neuronprobe: ignore[dot-cuda]
torch.cuda.synchronize()  # neuronprobe: ignore[no-such-rule]  EXPECT cuda-synchronize
