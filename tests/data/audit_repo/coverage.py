"""CUDA assumptions the audit was blind to before issue 29 (point 9), each beside a near-miss."""

import argparse
from dataclasses import dataclass

import bitsandbytes as bnb  # EXPECT cuda-kernel-import
import fused_layer_norm_cuda  # EXPECT cuda-kernel-import
import torch
import torch.distributed as dist
from kernels import get_kernel
from torch.cuda.amp import *  # noqa: F403
from torch.cuda.amp import GradScaler as Scaler

assert torch.cuda.is_available()  # EXPECT cuda-required
assert torch.accelerator.is_available()  # NEAR-MISS: any accelerator

if torch.cuda.is_available():  # EXPECT cuda-probe-branch
    torch.set_float32_matmul_precision("high")
if torch.accelerator.is_available():  # NEAR-MISS: any accelerator
    torch.set_float32_matmul_precision("high")


def has_gpu():
    return torch.cuda.is_available()


@dataclass
class Config:
    compile_backend: str = "inductor"  # EXPECT compile-backend
    neuron_backend: str = "neuron"  # NEAR-MISS: not inductor


def train(model, x):
    assert x.is_cuda  # EXPECT cuda-required
    if has_gpu():  # EXPECT cuda-probe-branch
        print("fast path")
    if str(x.device).startswith("cuda"):  # EXPECT cuda-probe-branch
        print("CUDA only")
    if x.device.type == "xla":  # NEAR-MISS: the XLA device
        print("XLA")
    scale = 2.0 if str(x.device) == "cuda:0" else 1.0  # EXPECT cuda-probe-branch
    model = torch.compile(model)  # EXPECT compile-backend
    model = torch.compile(model, backend="openxla")  # NEAR-MISS: a backend chosen
    return model, scale


@torch.compile  # EXPECT compile-backend
def fused(x):
    return x


def step(loss):
    with autocast():  # EXPECT cuda-amp
        return Scaler().scale(loss)  # EXPECT cuda-amp


parser = argparse.ArgumentParser()
parser.add_argument("--compile-backend", default="inductor")  # EXPECT compile-backend
parser.add_argument("--mode", default="default")  # NEAR-MISS: not a backend


def distributed(local_rank):
    dist.init_process_group(backend="cuda:nccl,cpu:gloo")  # EXPECT nccl-backend
    dist.init_process_group(backend="cpu:gloo,xla:xla")  # NEAR-MISS: no NCCL
    return torch.zeros(1, device=f"cuda:{local_rank}")  # EXPECT hardcoded-cuda-device


mean = torch.cuda.FloatTensor([0.5])  # EXPECT hardcoded-cuda-device
flash = get_kernel("kernels-community/flash-attn3")  # EXPECT cuda-kernel-import
layer = torch.nn.Linear(
    2, 2
).cuda()  # EXPECT dot-cuda
