"""Training script with the CUDA assumptions a port to Trainium trips over.

A docstring that says torch.cuda.synchronize() and device = "cuda" is never flagged.
"""

import argparse
import os

import torch
import torch.cuda as tc
import torch.distributed as dist
from torch import cuda
from torch.nn.parallel import DistributedDataParallel as DDP

# device = "cuda" if torch.cuda.is_available() else "cpu"   NEAR-MISS: a comment
device = "cuda" if torch.cuda.is_available() else "cpu"  # EXPECT silent-cpu-fallback
accel = torch.accelerator.current_accelerator()  # NEAR-MISS: torch.accelerator
either = "cuda" if torch.cuda.is_available() else "xla"  # NEAR-MISS: a Neuron/XLA else, not the CPU
use_cuda = torch.cuda.is_available()
if use_cuda:  # EXPECT silent-cpu-fallback
    dev = torch.device("cuda")
else:
    dev = torch.device("cpu")
device_type = "cuda" if "cuda" in device else "cpu"  # EXPECT cuda-only-branch
device_type_ok = torch.device(device).type  # NEAR-MISS: the device's own type
dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16  # EXPECT cuda-probe-gate
print(torch.cuda.is_bf16_supported)  # NEAR-MISS: not a condition
if torch.version.cuda is not None:  # EXPECT cuda-probe-gate
    os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"  # EXPECT cuda-determinism
print("set CUBLAS_WORKSPACE_CONFIG for determinism on GPUs")  # NEAR-MISS: inside a longer string


def setup(backend="nccl"):  # EXPECT nccl-backend
    dist.init_process_group("nccl")  # EXPECT nccl-backend
    name = "NCCL" if use_cuda else "GLOO"  # EXPECT nccl-backend
    dist.init_process_group("xla")  # NEAR-MISS: the Neuron backend
    print("nccl")  # NEAR-MISS: a string that is not a backend


def wrap(model):
    if torch.cuda.is_available():  # EXPECT cuda-only-branch
        model = DDP(model)
    return model


def wrap_ok(model, world_size):
    if world_size > 1:  # NEAR-MISS: decided by the world size
        model = DDP(model)
    return model


def step(model, x, scaler):
    x = x.cuda()  # EXPECT dot-cuda
    y = x.to("cuda:1")  # EXPECT hardcoded-cuda-device
    z = torch.zeros(2, device="cuda")  # EXPECT hardcoded-cuda-device
    w = x.to(device)  # NEAR-MISS: a variable device
    tc.synchronize()  # EXPECT cuda-synchronize
    cuda.set_device(0)  # EXPECT cuda-runtime-api
    start = torch.cuda.Event(enable_timing=True)  # EXPECT cuda-event-timing
    with torch.cuda.amp.autocast():  # EXPECT cuda-amp
        loss = model(x)
    with torch.autocast("cuda", dtype=torch.bfloat16):  # EXPECT cuda-amp
        loss = model(y)
    with torch.autocast(device_type=x.device.type, dtype=torch.bfloat16):  # NEAR-MISS: device from the tensor
        loss = model(z)
    torch.accelerator.synchronize()  # NEAR-MISS: torch.accelerator
    return loss, w, start


torch.backends.cudnn.benchmark = True  # EXPECT cuda-backend-flags
activities = [torch.profiler.ProfilerActivity.CUDA]  # EXPECT cuda-profiler
compiled = torch.compile(torch.nn.Linear(2, 2), mode="max-autotune")  # EXPECT compile-backend
compiled_ok = torch.compile(torch.nn.Linear(2, 2), backend="neuron")  # NEAR-MISS: the Neuron backend
parser = argparse.ArgumentParser()
parser.add_argument("--device", default="cuda")  # EXPECT hardcoded-cuda-device
